"""Deployment: the container, the proxy in front of replicas, the smallest host, and the launcher of servers and Chromium."""
