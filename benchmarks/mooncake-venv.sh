#!/usr/bin/env bash
# Builds, or reuses, the Python virtualenv with Mooncake Store's wheel for
# strata-load's mooncake system, and prints its interpreter (the only thing
# printed on stdout; progress goes to stderr):
#
#   export STRATA_MOONCAKE_PYTHON=$(benchmarks/mooncake-venv.sh)
#   strata-load --systems strata,redis,mooncake,redis-py ...
#
# The venv lives outside the checkout, in
# ${STRATA_MOONCAKE_VENV:-$HOME/.cache/strata/mooncake-venv}, and holds the
# pinned wheel below from PyPI (no CUDA: the TCP transport). Its binaries
# (mooncake_master, the store extension) link libibverbs.so.1, which is
# installed with apt-get when missing (as root).
set -euo pipefail
wheel="mooncake-transfer-engine-non-cuda==0.3.13.post1"
venv=${STRATA_MOONCAKE_VENV:-$HOME/.cache/strata/mooncake-venv}
if ! ldconfig -p | grep -q 'libibverbs\.so\.1 '; then
  echo "mooncake-venv: installing libibverbs1 (the wheel links libibverbs.so.1)" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libibverbs1 >&2
fi
if ! "$venv/bin/python" -c 'import mooncake.store' 2>/dev/null ||
   ! "$venv/bin/pip" show -q "${wheel%%==*}" 2>/dev/null ||
   [ "$("$venv/bin/pip" show "${wheel%%==*}" | sed -n 's/^Version: //p')" != "${wheel##*==}" ]; then
  echo "mooncake-venv: installing $wheel into $venv" >&2
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q "$wheel" >&2
  "$venv/bin/python" -c 'import mooncake.store' >&2
fi
echo "$venv/bin/python"
