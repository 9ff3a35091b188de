#!/usr/bin/env bash
# The project's test command (README): vet (also the rdma build tag), check
# generated code is current, every Go test with the race detector, then the
# Python suite (python/run_tests.sh: the test venv, engines included).
set -euo pipefail
cd "$(dirname "$0")/.."
go vet ./...
# The verbs backend (cgo against libibverbs) builds only with the rdma tag.
if [ -f /usr/include/infiniband/verbs.h ]; then
  go vet -tags rdma ./transport/
else
  echo "rdma tag not checked: libibverbs-dev is not installed (.ci/run installs it)"
fi
if command -v protoc >/dev/null; then
  ./scripts/genproto.sh
  git diff --exit-code -- proto/ || { echo "generated code is stale: run ./scripts/genproto.sh" >&2; exit 1; }
fi
go test -race -count=1 -timeout 15m ./...
# The Python suite, engine tests included, in the test venv
# (scripts/pyvenv.sh builds it the first time; $STRATA_PYTHON overrides).
./python/run_tests.sh
