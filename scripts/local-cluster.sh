#!/usr/bin/env bash
# Starts a local N-node strata cluster for development: node 1 runs the
# embedded etcd on 127.0.0.1:2379 and every node uses it; gRPC ports are
# 7070, 7071, ...; data under ./cluster-data/node-<i>. Ctrl-C stops them in
# order: the last node first, each waited for (up to $STOP_WAIT seconds,
# default 30, then killed), node 1 last, so that no node loses the etcd it
# deregisters from.
#
#   ./scripts/local-cluster.sh 3
#   go run ./cmd/strata --endpoint 127.0.0.1:7070 node ls
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-3}
host_bytes=${HOST_BYTES:-256MiB}
go build -o cluster-data/bin/stratad ./cmd/stratad
stop_wait=${STOP_WAIT:-30}
pids=()
# stop_nodes stops the nodes last to first: SIGTERM, then a wait for the
# process to exit, SIGKILL after stop_wait seconds.
stop_nodes() {
  trap - EXIT INT TERM
  local i pid
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid=${pids[i]}
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 1 $((stop_wait * 10))); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "node $((i + 1)) did not stop within ${stop_wait}s; killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
    echo "node $((i + 1)) stopped"
  done
}
trap stop_nodes EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# Each node runs in its own session where setsid exists, so that Ctrl-C
# (SIGINT to the terminal's foreground process group) reaches this script
# only, not every node at once.
detach=()
if command -v setsid >/dev/null; then detach=(setsid); fi
for i in $(seq 1 "$n"); do
  dir=cluster-data/node-$i
  mkdir -p "$dir"
  args=(--data-dir "$dir" --listen "127.0.0.1:$((7069 + i))" --host-bytes "$host_bytes")
  if [ "$i" -eq 1 ]; then
    args+=(--embedded-etcd-url http://127.0.0.1:2379)
  else
    args+=(--etcd http://127.0.0.1:2379)
  fi
  ${detach[@]+"${detach[@]}"} cluster-data/bin/stratad "${args[@]}" 2>"$dir/log" &
  pids+=($!)
  # Wait until the node serves before starting the next (it joins through etcd).
  for _ in $(seq 1 100); do
    grep -q "strata node serving" "$dir/log" && break
    sleep 0.2
  done
  grep -q "strata node serving" "$dir/log" || { echo "node $i did not start; see $dir/log" >&2; exit 1; }
  echo "node $i serving on 127.0.0.1:$((7069 + i))"
done
wait
