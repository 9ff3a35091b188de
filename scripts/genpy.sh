#!/usr/bin/env bash
# Regenerates the Python gRPC stubs for proto/strata/v1 into
# python/strata_client/_proto/ with Debian's tools:
#   apt-get install -y protobuf-compiler protobuf-compiler-grpc
# (protoc 3.21 + grpc_python_plugin 1.51, matching python3-protobuf 3.21 /
# protobuf-python 4.21 and python3-grpcio 1.51). python3-grpc-tools is not
# used: Debian's build bundles protoc 3.5, whose output the 4.21 runtime
# refuses ("Descriptors cannot be created directly") and which does not know
# proto3 `optional`.
set -euo pipefail
cd "$(dirname "$0")/.."
plugin=$(command -v grpc_python_plugin || true)
if [ -z "$plugin" ]; then
  echo "genpy: grpc_python_plugin not found (apt-get install protobuf-compiler-grpc)" >&2
  exit 1
fi
out=${GENPY_OUT:-python/strata_client/_proto}  # GENPY_OUT: write elsewhere (the staleness test)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
protoc -I proto --python_out="$tmp" --grpc_out="$tmp" --plugin=protoc-gen-grpc="$plugin" \
  proto/strata/v1/strata.proto
mkdir -p "$out"
cp "$tmp/strata/v1/strata_pb2.py" "$out/strata_pb2.py"
# The generated service module imports the messages as a top-level package
# (strata.v1); inside strata_client it is a sibling module.
sed -e 's/^from strata\.v1 import strata_pb2 as/from . import strata_pb2 as/' \
  "$tmp/strata/v1/strata_pb2_grpc.py" >"$out/strata_pb2_grpc.py"
if [ ! -f "$out/__init__.py" ]; then
  printf '"""Generated gRPC stubs for strata.v1 (scripts/genpy.sh; do not edit)."""\n' >"$out/__init__.py"
fi
echo "genpy: wrote $out/strata_pb2.py and $out/strata_pb2_grpc.py ($(protoc --version))"
