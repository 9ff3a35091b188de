#!/usr/bin/env bash
# The project's test command (README): vet (also the rdma build tag), check
# generated code is current, every Go test with the race detector (and
# strata-sim's acceptance replays without it), then the Python suite
# (python/run_tests.sh: the test venv, engines included).
set -euo pipefail
cd "$(dirname "$0")/.."
go vet ./...
# The verbs backend (package rdma, cgo against libibverbs) builds only with
# the rdma tag: the whole module is vetted with it too, the client's and
# node's plane choice included; scripts/rdma-check.sh runs the rdma tests
# built with it, those on a device where there is one (else it says why).
if [ -f /usr/include/infiniband/verbs.h ]; then
  go vet -tags rdma ./...
  ./scripts/rdma-check.sh
else
  echo "rdma tag not checked: libibverbs-dev is not installed (.ci/run installs it)"
fi
if command -v protoc >/dev/null; then
  ./scripts/genproto.sh
  git diff --exit-code -- proto/ || { echo "generated code is stale: run ./scripts/genproto.sh" >&2; exit 1; }
else
  echo "generated code not checked: protoc is not installed (.ci/run installs protobuf-compiler)"
fi
go test -race -count=1 -timeout 15m ./...
# strata-sim's acceptance replays check figures, which the race detector
# only slows tenfold (they skip under it): here without it, one placement
# per figure (go test ./cmd/strata-sim averages five).
go test -count=1 -timeout 10m -run '^TestAcceptance' ./cmd/strata-sim -args -sim.placements=1
# The Python suite, engine tests included, in the test venv
# (scripts/pyvenv.sh builds it the first time; $STRATA_PYTHON overrides).
./python/run_tests.sh
