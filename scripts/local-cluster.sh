#!/usr/bin/env bash
# Starts a local N-node strata cluster for development: node 1 runs the
# embedded etcd on 127.0.0.1:2379 and every node uses it; gRPC ports are
# 7070, 7071, ...; data under ./cluster-data/node-<i>. Ctrl-C stops them all.
#
#   ./scripts/local-cluster.sh 3
#   go run ./cmd/strata --endpoint 127.0.0.1:7070 node ls
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-3}
host_bytes=${HOST_BYTES:-256MiB}
go build -o cluster-data/bin/stratad ./cmd/stratad
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' EXIT INT TERM
for i in $(seq 1 "$n"); do
  dir=cluster-data/node-$i
  mkdir -p "$dir"
  args=(--data-dir "$dir" --listen "127.0.0.1:$((7069 + i))" --host-bytes "$host_bytes")
  if [ "$i" -eq 1 ]; then
    args+=(--embedded-etcd-url http://127.0.0.1:2379)
  else
    args+=(--etcd http://127.0.0.1:2379)
  fi
  cluster-data/bin/stratad "${args[@]}" 2>"$dir/log" &
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
