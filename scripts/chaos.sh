#!/usr/bin/env bash
# The chaos suite (cmd/stratad/chaos*_test.go, build tag chaos): real
# stratad processes with SSD tiers on an etcd process, under a load that
# verifies every byte it reads, through kill -9 and restart, SIGSTOP of a
# node, an etcd outage with a node restarted during it, a partition (a
# node's link cut in network namespaces the test makes; skipped where it
# cannot: not root, no ip), a transfer's consumer cut off from the room's
# node the same way (its await ends within its deadline; a grant lost in
# the cut holds the room until the pin's TTL), stalled readers and writers (a gRPC get that
# stops reading, half a raw-plane frame, half a page on a put stream), a
# 75 s soak (STRATA_CHAOS_SOAK) sampling the nodes' goroutines, FDs and
# RSS, then one node on a full tmpfs SSD directory against an empty one,
# and ten runs of an owner killed -9 right after a hinted handoff gave it
# pages acknowledged on another node's SSD (STRATA_CHAOS_HANDOFF_RUNS):
# none may end on no node, and a fresh client must read them all at once
# after the owner's restart.
# Prints per experiment: pages acknowledged and served, wrong bytes, calls
# past their deadline, acknowledged pages not served after the fault (and
# whether a node still holds them), ops/s before, during and after; lookup
# p99 with and without the full disk. About three and a half minutes on
# two cores; bounded by -timeout.
set -euo pipefail
cd "$(dirname "$0")/.."
exec go test -tags chaos -count=1 -timeout 10m -run '^TestChaos' -v ./cmd/stratad "$@"
