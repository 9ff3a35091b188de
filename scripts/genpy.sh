#!/usr/bin/env bash
# The Python gRPC stubs for proto/strata/v1, in python/strata_client/_proto/.
#
#   scripts/genpy.sh                   # regenerate them
#   scripts/genpy.sh --check [PYTHON]  # are the committed ones current, and
#                                      # do they import with PYTHON's protobuf
#                                      # and grpcio? (exit 1 if not)
#
# PYTHON defaults to $STRATA_PYTHON, else python3; the tests pass the venv's
# interpreter (python/tests/test_stubs.py). Generation uses Debian's tools:
#   apt-get install -y protobuf-compiler protobuf-compiler-grpc
# protoc 3.21 + grpc_python_plugin 1.51. Their output carries no runtime
# version check and imports with protobuf 4.21 through 7.x and grpcio 1.51
# and later (the ranges in python/pyproject.toml; --check imports it with
# the interpreter given). grpcio-tools from PyPI would tie the stubs to the
# protobuf major it bundles; python3-grpc-tools from Debian bundles protoc
# 3.5, whose output protobuf 4.21 refuses and which does not know proto3
# `optional`.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=write
if [ "${1:-}" = "--check" ]; then
  mode=check
  shift
fi
plugin=$(command -v grpc_python_plugin || true)
if [ -z "$plugin" ] || ! command -v protoc >/dev/null; then
  echo "genpy: protoc or grpc_python_plugin not found (apt-get install protobuf-compiler protobuf-compiler-grpc)" >&2
  exit 1
fi
dest=python/strata_client/_proto
out=${GENPY_OUT:-$dest}  # GENPY_OUT: write elsewhere
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
protoc -I proto --python_out="$tmp" --grpc_out="$tmp" --plugin=protoc-gen-grpc="$plugin" \
  proto/strata/v1/strata.proto
# The generated service module imports the messages as a top-level package
# (strata.v1); inside strata_client it is a sibling module.
sed -i -e 's/^from strata\.v1 import strata_pb2 as/from . import strata_pb2 as/' "$tmp/strata/v1/strata_pb2_grpc.py"

if [ "$mode" = write ]; then
  mkdir -p "$out"
  cp "$tmp/strata/v1/strata_pb2.py" "$tmp/strata/v1/strata_pb2_grpc.py" "$out/"
  if [ ! -f "$out/__init__.py" ]; then
    printf '"""Generated gRPC stubs for strata.v1 (scripts/genpy.sh; do not edit)."""\n' >"$out/__init__.py"
  fi
  echo "genpy: wrote $out/strata_pb2.py and $out/strata_pb2_grpc.py ($(protoc --version))"
  exit 0
fi

py=${1:-${STRATA_PYTHON:-python3}}
stale=0
for f in strata_pb2.py strata_pb2_grpc.py; do
  if ! cmp -s "$tmp/strata/v1/$f" "$dest/$f"; then
    echo "genpy: $dest/$f is stale: run scripts/genpy.sh" >&2
    stale=1
  fi
done
[ "$stale" -eq 0 ] || exit 1
# Import them as the package does, warnings as errors, from outside the tree.
(cd python && "$py" -W error -c '
import sys, grpc, google.protobuf
from strata_client._proto import strata_pb2, strata_pb2_grpc
assert strata_pb2.DESCRIPTOR.services_by_name["Strata"].methods_by_name["Put"]
assert strata_pb2_grpc.StrataStub
print(f"genpy: stubs current ({sys.argv[1]}); they import with protobuf {google.protobuf.__version__}, grpcio {grpc.__version__}")
' "$(protoc --version)") || { echo "genpy: the stubs do not import with $py" >&2; exit 1; }
