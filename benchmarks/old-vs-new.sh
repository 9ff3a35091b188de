#!/usr/bin/env bash
# Old beside new, client and node both: strata-load built at REV (the old
# build) and from the working tree (the new one), run in turns with the
# same flags, ROUNDS times each; prints new ÷ old mean ops/s per
# operation, plane, page size and worker count. strata-load's own
# --old-node measures an older node under this build's client; this
# measures a change to the client too.
#
#   benchmarks/old-vs-new.sh REV [ROUNDS] [-- strata-load flags]
#
# Default flags: --systems strata --transport tcp,shm --ops get,put,lookup
# --sizes 64K,1M --concurrency 1,8 --duration 2s --working-set 64M
# --put-budget 128M --host-bytes 512M. Runs land in $OUT (default a temp
# directory), kept.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: benchmarks/old-vs-new.sh REV [ROUNDS] [-- strata-load flags]}
shift
rounds=2
if [ $# -gt 0 ] && [ "$1" != "--" ]; then rounds=$1; shift; fi
[ "${1:-}" = "--" ] && shift
flags=("$@")
if [ ${#flags[@]} -eq 0 ]; then
  flags=(--systems strata --transport tcp,shm --ops get,put,lookup --sizes 64K,1M --concurrency 1,8
         --duration 2s --working-set 64M --put-budget 128M --host-bytes 512M)
fi
out=${OUT:-$(mktemp -d)}
tree=$(mktemp -d)
trap 'git worktree remove --force "$tree" >/dev/null 2>&1 || true' EXIT
git worktree add -q --detach "$tree" "$rev"
(cd "$tree" && go build -o "$out/strata-load-old" ./cmd/strata-load)
go build -o "$out/strata-load-new" ./cmd/strata-load
for r in $(seq "$rounds"); do
  for v in old new; do
    echo "old-vs-new: $v, round $r of $rounds" >&2
    "$out/strata-load-$v" "${flags[@]}" --quiet --out "$out/$v-$r" >"$out/$v-$r.log" 2>&1
  done
done
python3 - "$out" <<'PY'
import csv, glob, statistics, sys
out = sys.argv[1]
def load(v):
    runs = {}
    for path in sorted(glob.glob(f"{out}/{v}-*/results.csv")):
        for r in csv.DictReader(open(path)):
            k = (r["op"], "shm" if r["system"].endswith("shm") else "raw tcp", int(r["page_bytes"]), int(r["workers"]))
            runs.setdefault(k, []).append(float(r["ops_per_s"]))
    return runs
old, new = load("old"), load("new")
cols = sorted({(k[2], k[3]) for k in new})
print("| op | plane | " + " | ".join(f"{b // 1024}K × {w}" for b, w in cols) + " |")
print("|---|---|" + "---:|" * len(cols))
for op, plane in sorted({(k[0], k[1]) for k in new}):
    cells = [f"{statistics.mean(new[k]) / statistics.mean(old[k]):.2f}" if (k := (op, plane, b, w)) in old and k in new else "–"
             for b, w in cols]
    print(f"| {op} | {plane} | " + " | ".join(cells) + " |")
print(f"(new ÷ old mean ops/s; runs in {out})")
PY
