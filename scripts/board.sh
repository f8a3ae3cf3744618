#!/usr/bin/env bash
# MindInsight for marl runs: board.sh [start|stop|status] [RESULTS_DIR] [PORT]
#   start  (default) serve every run folder under RESULTS_DIR (default: results) on 127.0.0.1:PORT (8080)
#   stop   stop the server on PORT
# MindInsight 2.3.1 lives in .venv-board (make board-env): it pins protobuf 3.20, which breaks mindspore 2.10.
# `mindinsight start` launches `gunicorn` by name, so the venv's bin/ must be on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
ACTION="${1:-start}"
RESULTS="${2:-results}"
PORT="${3:-8080}"
VENV="${BOARD_VENV:-.venv-board}"
if [ ! -x "$VENV/bin/mindinsight" ]; then
  echo "MindInsight is not installed in $VENV; run: make board-env" >&2
  exit 1
fi
export PATH="$(cd "$VENV/bin" && pwd):$PATH"
case "$ACTION" in
  start)
    mkdir -p "$RESULTS"
    mindinsight start --summary-base-dir "$(cd "$RESULTS" && pwd)" --port "$PORT"
    echo "MindInsight: http://127.0.0.1:$PORT  (stop with: scripts/board.sh stop $RESULTS $PORT)"
    ;;
  stop)
    mindinsight stop --port "$PORT"
    ;;
  *)
    echo "usage: scripts/board.sh [start|stop] [RESULTS_DIR] [PORT]" >&2
    exit 2
    ;;
esac
