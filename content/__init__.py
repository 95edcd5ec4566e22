"""What the app says, as data: prose and worked cases that pages show and tests check.

The engine (``mha_core``) holds only computation; this package holds the texts and the cases built
on it. Imports point one way: ``content -> mha_core``, never back.
"""
