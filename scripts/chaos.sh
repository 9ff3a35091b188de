#!/usr/bin/env bash
# The chaos suite (cmd/stratad/chaos_test.go, build tag chaos): three real
# stratad processes with SSD tiers on an etcd process, under a load that
# verifies every byte it reads, through kill -9 and restart, SIGSTOP of a
# node and an etcd outage with a node restarted during it, then one node
# on a full tmpfs SSD directory against an empty one. Prints per
# experiment: pages acknowledged and served, wrong bytes, calls past their
# deadline, acknowledged pages not served after the fault (and whether a
# node still holds them), ops/s before, during and after; lookup p99 with
# and without the full disk. About a minute and a half on two cores;
# bounded by -timeout.
set -euo pipefail
cd "$(dirname "$0")/.."
exec go test -tags chaos -count=1 -timeout 10m -run '^TestChaos' -v ./cmd/stratad "$@"
