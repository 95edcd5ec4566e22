#!/usr/bin/env bash
# Start or stop N Streamlit replicas of MHA Explorer behind nginx, all on loopback.
#
#   deploy/replicas.sh start N    # replicas on ports BASE_PORT.., nginx on PROXY_PORT
#   deploy/replicas.sh stop       # nginx and every replica started from this prefix
#
# Environment (defaults): MHA_PREFIX (/tmp/mha-replicas: pids, logs, generated nginx.conf),
# MHA_PROXY_PORT (18080), MHA_BASE_PORT (18501), MHA_PIN (1: replica i runs on core i mod nproc
# with taskset; 0: no pinning), PYTHON (python3).
# The proxy is http://127.0.0.1:$MHA_PROXY_PORT; every response names its replica in X-Upstream.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PREFIX="${MHA_PREFIX:-/tmp/mha-replicas}"
PROXY_PORT="${MHA_PROXY_PORT:-18080}"
BASE_PORT="${MHA_BASE_PORT:-18501}"
PIN="${MHA_PIN:-1}"
PYTHON="${PYTHON:-python3}"
START_TIMEOUT_S=90

die() { echo "replicas.sh: $*" >&2; exit 1; }

wait_ok() {  # wait_ok URL: poll until it answers "ok"
    local deadline=$((SECONDS + START_TIMEOUT_S))
    until [ "$(curl -fsS --max-time 2 "$1" 2>/dev/null)" = "ok" ]; do
        [ "$SECONDS" -lt "$deadline" ] || die "no ok from $1 within ${START_TIMEOUT_S} s (logs in $PREFIX/logs)"
        sleep 0.3
    done
}

proxy_config() {  # proxy_config N: deploy/nginx.conf with this prefix's port and N replica lines
    local servers="" i
    for ((i = 0; i < $1; i++)); do
        servers+="        server 127.0.0.1:$((BASE_PORT + i));  # replica\\n"
    done
    sed -e "/# replica\$/d" \
        -e "s|^    upstream streamlit {\$|&\\n${servers%\\n}|" \
        -e "s|listen 127.0.0.1:8080;|listen 127.0.0.1:${PROXY_PORT};|" \
        "$ROOT/deploy/nginx.conf"
}

start() {
    local n="$1" i cpu cores
    [[ "$n" =~ ^[1-9][0-9]?$ ]] || die "N must be 1..99, got '$n'"
    command -v nginx >/dev/null || die "nginx is missing (apt-get install nginx)"
    [ ! -e "$PREFIX/nginx.pid" ] || die "already running from $PREFIX (stop it first)"
    mkdir -p "$PREFIX/logs" "$PREFIX/temp"
    cores="$(nproc)"
    for ((i = 0; i < n; i++)); do
        cpu=()
        if [ "$PIN" = 1 ] && command -v taskset >/dev/null; then cpu=(taskset -c "$((i % cores))"); fi
        # tools/launch.py's server command line (loopback, headless), exec'd: the pid below is streamlit's
        (cd "$ROOT" && exec "${cpu[@]}" "$PYTHON" -m tools.launch "$((BASE_PORT + i))" \
            >"$PREFIX/logs/replica-$i.log" 2>&1) &
        echo $! >"$PREFIX/replica-$i.pid"
    done
    for ((i = 0; i < n; i++)); do wait_ok "http://127.0.0.1:$((BASE_PORT + i))/_stcore/health"; done
    proxy_config "$n" >"$PREFIX/nginx.conf"
    nginx -q -t -p "$PREFIX" -c "$PREFIX/nginx.conf"
    nginx -p "$PREFIX" -c "$PREFIX/nginx.conf"
    wait_ok "http://127.0.0.1:$PROXY_PORT/_stcore/health"
    echo "http://127.0.0.1:$PROXY_PORT  ($n replicas on ports $BASE_PORT..$((BASE_PORT + n - 1)), prefix $PREFIX)"
}

stop() {
    local pidfile pid
    if [ -e "$PREFIX/nginx.pid" ]; then
        nginx -p "$PREFIX" -c "$PREFIX/nginx.conf" -s quit 2>/dev/null || kill "$(cat "$PREFIX/nginx.pid")" 2>/dev/null || true
        for _ in $(seq 50); do [ -e "$PREFIX/nginx.pid" ] || break; sleep 0.1; done
        rm -f "$PREFIX/nginx.pid"
    fi
    for pidfile in "$PREFIX"/replica-*.pid; do
        [ -e "$pidfile" ] || continue
        pid="$(cat "$pidfile")"
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$pidfile"
    done
}

case "${1:-}" in
    start) start "${2:-2}" ;;
    stop) stop ;;
    config) proxy_config "${2:-2}" ;;  # print the generated nginx.conf
    *) die "usage: $0 start N | stop | config N" ;;
esac
