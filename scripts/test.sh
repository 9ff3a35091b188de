#!/usr/bin/env bash
# The project's test command (README): vet, check generated code is current,
# then every test with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."
go vet ./...
if command -v protoc >/dev/null; then
  ./scripts/genproto.sh
  git diff --exit-code -- proto/ || { echo "generated code is stale: run ./scripts/genproto.sh" >&2; exit 1; }
fi
go test -race -count=1 -timeout 15m ./...
