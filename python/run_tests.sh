#!/usr/bin/env bash
# apt: python3 python3-grpcio python3-protobuf python3-crc32c python3-numpy protobuf-compiler protobuf-compiler-grpc
# Runs the Python client's tests with Debian's Python (the packages above
# install for /usr/bin/python3). Installs nothing. The node tests build
# stratad and the Go writer with `go build` from the main module and run
# them on 127.0.0.1; they are skipped, saying why, where go is missing.
# (protobuf-compiler and protobuf-compiler-grpc let test_stubs check that the
# committed stubs match strata.proto; without them that one test is skipped.)
# Ends with a plain "python: N passed, N failed, N skipped" line and exits
# non-zero when a test failed or errored.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1
log=$(mktemp)
trap 'rm -f "$log"' EXIT
timeout 600 /usr/bin/python3 -m unittest discover -s python/tests -v 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p' "$log" | tail -1)
summary=$(grep -E '^(OK|FAILED)' "$log" | tail -1)
failed=$(grep -Eo '(failures|errors)=[0-9]+' <<<"$summary" | awk -F= '{s+=$2} END {print s+0}')
skipped=$(grep -Eo 'skipped=[0-9]+' <<<"$summary" | cut -d= -f2)
ran=${ran:-0}; skipped=${skipped:-0}
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "python: $((ran - failed - skipped)) passed, $failed failed, $skipped skipped"
if [ "$ran" -eq 0 ] && [ "$rc" -eq 0 ]; then
  echo "python: no test ran" >&2
  exit 1
fi
exit "$rc"
