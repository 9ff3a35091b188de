#!/usr/bin/env bash
# Builds the Python client's native plane, the Go client as a C shared
# library (cmd/libstrata), into python/strata_client/_native/libstrata.so,
# where strata_client.native finds it in a checkout (pip install ./python
# builds it into the installed package the same way: python/setup.py).
#
#   scripts/buildnative.sh            # build (go's cache makes a rebuild cheap)
#   scripts/buildnative.sh OUT.so     # build to OUT.so instead
#
# Needs go and a C compiler (cgo): the README's toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-python/strata_client/_native/libstrata.so}
mkdir -p "$(dirname "$out")"
CGO_ENABLED=1 go build -trimpath -buildmode=c-shared -o "$out.tmp" ./cmd/libstrata
rm -f "$out.h"  # the cgo header: native.py declares the calls itself
mv -f "$out.tmp" "$out"
echo "$out"
