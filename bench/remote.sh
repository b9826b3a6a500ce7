#!/usr/bin/env bash
# bench/remote.sh — `tools list` embedded vs `--server` against a running `serve` over the
# same root, state and 1,000-grant authority (bench/serve.sh's files: run it first),
# interleaved with bench/interleave.py (median wall and CPU time, ratio to embedded).
#
#   bench/remote.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out-serve
runs=${1:-20}
export HOME="$out/home" XDG_CONFIG_HOME="$out/xdg/config" XDG_STATE_HOME="$out/xdg/state"
export SHAREDOS_TOKEN="$(cat "$out/token")"
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()')
"$out/sharedos" --root "$out/root" --state "$out/state/state.db" serve --listen "127.0.0.1:$port" \
  --tokens "$out/etc/tokens.yaml" 2>/dev/null &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 1 200); do curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.05; done
python3 bench/interleave.py --runs "$runs" --warmup 2 \
  --peer embedded "$out/sharedos --root $out/root --state $out/state/state.db --grants $out/etc/grants.yaml tools list" \
  --cmd server "$out/sharedos --server http://127.0.0.1:$port tools list"
