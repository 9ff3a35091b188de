#!/usr/bin/env bash
# Builds, or reuses, the Python test virtualenv and prints its path (the
# only thing printed on stdout; progress goes to stderr).
#
#   scripts/pyvenv.sh            # e.g. /root/.cache/strata/venv/3f9c0a1b2c3d4e5f
#   scripts/pyvenv.sh --path     # where it is or would be; builds nothing
#   "$(scripts/pyvenv.sh)/bin/python" -m unittest discover -s python/tests
#
# The venv lives outside the checkout, under
# ${STRATA_VENV_ROOT:-$HOME/.cache/strata/venv}, in a directory named by a
# key: the SHA-256 of this script's build recipe version (`recipe` below),
# python/pyproject.toml, every python/requirements/*.txt (name and content)
# and the interpreter's version and machine. Changing any requirement file therefore builds a new venv;
# later runs with the same files reuse it at no cost.
#
# A build:
#   1. python3 -m venv in a temporary directory beside the final one;
#   2. pip install --no-deps -r python/requirements/base.txt (torch and the
#      client's dependencies, every package pinned);
#   3. pip install --no-deps -r for each engine file (sglang.txt, lmcache.txt,
#      vllm.txt, any other *.txt there), in name order;
#   4. pip install ./python (strata-client, its dependencies resolved against
#      what is installed: nothing new may come in, checked against the pins);
#   5. a check that torch imports and does bf16/fp8 CPU tensor ops and that
#      strata_client imports from the venv;
#   6. rename to the final directory (atomic): a half-built venv is never
#      reused; a failed build leaves nothing but its log
#      (<root>/<key>.log, printed on failure).
# Concurrent runs with the same key wait for one another (flock). Venvs of
# other keys not used for STRATA_VENV_KEEP_DAYS days (default 3) are
# removed after a build.
#
# Environment: STRATA_VENV_ROOT (where), STRATA_VENV_PYTHON (the
# interpreter to build from, default python3), STRATA_VENV_KEEP_DAYS.
# Cost of a fresh build: python/README.md, "Test environment".
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
py=${STRATA_VENV_PYTHON:-python3}
root=${STRATA_VENV_ROOT:-$HOME/.cache/strata/venv}
keep_days=${STRATA_VENV_KEEP_DAYS:-3}
reqdir=python/requirements
# Bump when the build steps below change what a venv contains (editing a
# comment here must not cost every machine a rebuild).
recipe=1

command -v "$py" >/dev/null || { echo "pyvenv: $py not found (set STRATA_VENV_PYTHON)" >&2; exit 1; }
[ -f "$reqdir/base.txt" ] || { echo "pyvenv: $reqdir/base.txt is missing" >&2; exit 1; }
engines=()
for f in "$reqdir"/*.txt; do
  [ "$f" = "$reqdir/base.txt" ] || engines+=("$f")
done
# Every requirement line must be name==version: a loose line would make the
# same key install different packages on different days.
bad=$(grep -HnvE '^[[:space:]]*(#.*)?$|^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[A-Za-z0-9.+!_-]+[[:space:]]*(#.*)?$' \
  "$reqdir/base.txt" "${engines[@]}" || true)
if [ -n "$bad" ]; then
  echo "pyvenv: requirement lines must be name==version:" >&2
  echo "$bad" >&2
  exit 1
fi

pyver=$("$py" -c 'import platform, sys; print(sys.version.replace("\n", " "), platform.machine())')
key=$( {
  echo "recipe $recipe"
  echo "python $pyver"
  for f in python/pyproject.toml "$reqdir/base.txt" "${engines[@]}"; do
    echo "== $f"
    cat "$f"
  done
} | sha256sum | cut -c1-16)
venv=$root/$key
if [ "${1:-}" = "--path" ]; then
  echo "$venv"
  exit 0
fi
mkdir -p "$root"

if [ -x "$venv/bin/python" ]; then
  touch "$venv/.last-used"
  echo "$venv"
  exit 0
fi

exec 9>"$root/.$key.lock"
flock 9
if [ -x "$venv/bin/python" ]; then  # built by the run we waited for
  touch "$venv/.last-used"
  echo "$venv"
  exit 0
fi

log=$root/$key.log
tmp=$root/.build-$key
rm -rf "$tmp"
: >"$log"
fail() {
  echo "pyvenv: $1 (log: $log); last lines:" >&2
  tail -n 30 "$log" >&2
  rm -rf "$tmp"
  exit 1
}
t0=$(date +%s)
echo "pyvenv: building $venv ($pyver; log $log)" >&2
"$py" -m venv "$tmp" >>"$log" 2>&1 || fail "python3 -m venv failed"
pip=("$tmp/bin/python" -m pip --disable-pip-version-check --no-input)
"${pip[@]}" install --no-deps -r "$reqdir/base.txt" >>"$log" 2>&1 || fail "installing $reqdir/base.txt failed"
for f in "${engines[@]}"; do
  echo "pyvenv: + $f" >&2
  "${pip[@]}" install --no-deps -r "$f" >>"$log" 2>&1 || fail "installing $f failed"
done
# pip install ./python, not editable: this is the package a user gets. The tests themselves import
# the checkout's python/ first (tests/_support.py), so a reused venv does not
# go stale as the client's code changes.
# Built from a copy so that setuptools' build/ and *.egg-info never land in
# the checkout.
src=$tmp/.strata-client-src
mkdir -p "$src"
cp -r "$repo/python/pyproject.toml" "$repo/python/README.md" "$repo/python/strata_client" "$src/"
"${pip[@]}" install "$src" >>"$log" 2>&1 || fail "pip install ./python failed"
rm -rf "$src"
# pip install ./python resolves the client's dependency ranges against the
# venv: it must have found them all in the pins, not changed any.
"$tmp/bin/python" - "$reqdir/base.txt" "${engines[@]}" >>"$log" 2>&1 <<'EOF' || fail "pins changed or missing after pip install ./python"
import re, sys
from importlib.metadata import version, PackageNotFoundError
def norm(n): return re.sub(r"[-_.]+", "-", n).lower()
bad = []
for path in sys.argv[1:]:
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, want = line.split("==")
        name = name.split("[")[0]
        try:
            got = version(name)
        except PackageNotFoundError:
            got = None
        if got is None or norm(got) != norm(want):
            bad.append(f"{path}: {name}=={want}, installed {got}")
print("\n".join(bad) or "pins: all installed as listed")
sys.exit(1 if bad else 0)
EOF
(cd / && "$tmp/bin/python" - >>"$log" 2>&1) <<'EOF' || fail "the venv does not import torch/strata_client"
import os, sys
import torch
a = torch.arange(64, dtype=torch.float32).reshape(8, 8)
for dt in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
    t = a.to(dt)
    assert t.view(torch.uint8).numel() == 64 * t.element_size()
    assert torch.equal(t.float().to(dt).view(torch.uint8), t.view(torch.uint8))
import strata_client
from strata_client import checksum
assert os.path.realpath(strata_client.__file__).startswith(os.path.realpath(sys.prefix)), strata_client.__file__
assert checksum.HAVE_FAST_CRC32C and checksum.CRC32C_RELEASES_GIL, checksum.backend()
print("check: torch", torch.__version__, "cuda available:", torch.cuda.is_available(),
      "strata_client", strata_client.__version__, checksum.backend())
EOF
# Console scripts name the interpreter by its absolute path: point them at
# the final directory before the rename.
for f in "$tmp"/bin/*; do
  if [ -f "$f" ] && [ ! -L "$f" ] && head -c 2 "$f" | grep -q '#!'; then
    sed -i "1s|$tmp/|$venv/|" "$f"
  fi
done
sed -i "s|$tmp|$venv|g" "$tmp"/bin/activate* 2>/dev/null || true
printf 'key %s\npython %s\nbuilt %s in %ss\n' "$key" "$pyver" "$(date -u +%FT%TZ)" "$(( $(date +%s) - t0 ))" >"$tmp/strata-venv.txt"
mv -T "$tmp" "$venv"
touch "$venv/.last-used"
echo "pyvenv: built $venv in $(( $(date +%s) - t0 ))s ($(du -sh "$venv" | cut -f1))" >&2

# Prune venvs of other keys that no run has used for keep_days days.
for d in "$root"/*/; do
  d=${d%/}
  [ "$d" = "$venv" ] && continue
  if [ -f "$d/.last-used" ] && [ -z "$(find "$d/.last-used" -mtime -"$keep_days")" ]; then
    echo "pyvenv: removing $d (unused for $keep_days days)" >&2
    rm -rf "$d"
  fi
done
echo "$venv"
