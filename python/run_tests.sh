#!/usr/bin/env bash
# apt: protobuf-compiler-grpc g++ libssl-dev ninja-build
# Runs the whole Python suite (python/tests, the engine tests included) with
# the test venv's interpreter: scripts/pyvenv.sh builds it the first time
# (torch and the pinned engine wheels from PyPI; python/README.md, "Test
# environment", says what that costs) and reuses it afterwards.
# STRATA_PYTHON=/path/to/python runs the suite with that interpreter
# instead and builds nothing (e.g. /usr/bin/python3 with Debian's
# python3-grpcio python3-protobuf python3-crc32c python3-numpy: the client
# tests pass there, the engine tests skip).
#
# The node tests build stratad and the Go writer with `go build` and run
# them on 127.0.0.1 (skipped, saying why, where go is missing).
# protobuf-compiler-grpc (the apt line above; protoc comes with .ci/run's
# protobuf-compiler) lets test_stubs run `scripts/genpy.sh --check`; g++,
# libssl-dev and ninja-build let SGLang compile its page-hash extension
# (sglang/srt/mem_cache/cpp_utils, torch cpp_extension, -lcrypto) on first use.
#
# With STRATA_REQUIRE_ENGINES=1 (CI) a missing engine fails its tests
# (tests/_support.py require_engine), and as a second guard every test
# skipped with a reason that mentions "engine" is counted as failed here.
#
# Ends with a plain "python: N passed, N failed, N skipped" line and exits
# non-zero when a test failed or errored, or when none ran.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1
py=${STRATA_PYTHON:-}
if [ -z "$py" ]; then
  if ! venv=$(./scripts/pyvenv.sh); then
    echo "python: the test venv could not be built (scripts/pyvenv.sh)" >&2
    echo "python: 0 passed, 1 failed, 0 skipped"
    exit 1
  fi
  py=$venv/bin/python
fi
echo "python: $("$py" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
timeout 900 "$py" -m unittest discover -s python/tests -v 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p' "$log" | tail -1)
summary=$(grep -E '^(OK|FAILED)' "$log" | tail -1)
failed=$(grep -Eo '(failures|errors)=[0-9]+' <<<"$summary" | awk -F= '{s+=$2} END {print s+0}')
skipped=$(grep -Eo 'skipped=[0-9]+' <<<"$summary" | cut -d= -f2)
ran=${ran:-0}; skipped=${skipped:-0}
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
if [ "${STRATA_REQUIRE_ENGINES:-}" = "1" ]; then
  # unittest -v: "test_x (mod.Class.test_x) ... skipped 'reason'" (also for a
  # skipped setUpClass, which counts once).
  engine_skips=$(grep -Ei "\.\.\. skipped .*engine" "$log" || true)
  n=$(grep -c . <<<"$engine_skips" || true)
  if [ -n "$engine_skips" ] && [ "$n" -gt 0 ]; then
    echo "python: STRATA_REQUIRE_ENGINES=1 and $n test(s) skipped for a missing engine:" >&2
    echo "$engine_skips" >&2
    skipped=$((skipped - n)); failed=$((failed + n)); rc=1
  fi
fi
echo "python: $((ran - failed - skipped)) passed, $failed failed, $skipped skipped"
if [ "$ran" -eq 0 ] && [ "$rc" -eq 0 ]; then
  echo "python: no test ran" >&2
  exit 1
fi
exit "$rc"
