#!/usr/bin/env bash
# Mutation check of the invariants' checks (docs/INVARIANTS.md): for each
# mutant of scripts/mutants.tsv, disable one check in a scratch copy of the
# tree and run the tests named for it; one of them must fail.
#
#   scripts/mutants.sh                  # every mutant, on a copy of HEAD
#   scripts/mutants.sh --list           # ids, files and tests; runs nothing
#   scripts/mutants.sh ID [ID...]       # only these mutants (also --id ID)
#   scripts/mutants.sh --dirty          # copy the working tree (uncommitted
#                                       # and untracked, not ignored, files)
#   scripts/mutants.sh --baseline       # first run each mutant's tests on the
#                                       # unmutated copy: they must pass
#   scripts/mutants.sh --timeout 120    # seconds per test run (default 120)
#   scripts/mutants.sh --keep           # leave the scratch copy
#
# Each mutant is classified:
#   KILLED    a named test failed: the check is pinned;
#   SURVIVED  every named test passed with the check removed (a finding);
#   HUNG      the tests ran past the timeout (a finding: a removed check
#             must fail a test, not hang it);
#   BROKEN    the snippet does not occur exactly once, or the mutant does
#             not compile;
#   MISSING   no named test exists (yet); one that is missing while
#             others ran is noted after the result, and fails the run too;
#   BASEFAIL  (--baseline) a named test fails without the mutant.
# Ends with a summary table and the run time; exits 1 unless every mutant
# was KILLED.
#
# One scratch copy serves every mutant (each file is restored after its
# run), at one path, so Go's build cache serves the packages a mutant does
# not touch. Go tests run without -race, -count=1. Python tests run with
# $STRATA_PYTHON, else the test venv if built (scripts/pyvenv.sh --path),
# else python3.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
list=scripts/mutants.tsv
dirty=0 baseline=0 keep=0 listonly=0 tmo=120
ids=()
while [ $# -gt 0 ]; do
  case "$1" in
    --list) listonly=1 ;;
    --dirty) dirty=1 ;;
    --baseline) baseline=1 ;;
    --keep) keep=1 ;;
    --timeout) tmo=$2; shift ;;
    --id) ids+=("$2"); shift ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    -*) echo "mutants: unknown option $1" >&2; exit 2 ;;
    *) ids+=("$1") ;;
  esac
  shift
done

# rows prints the selected mutants as id<TAB>file<TAB>tests (the snippet
# and replacement stay in the list; apply reads them from there).
rows() {
  python3 - "$list" "${ids[@]}" <<'EOF'
import sys
path, want = sys.argv[1], sys.argv[2:]
seen = set()
for n, line in enumerate(open(path), 1):
    line = line.rstrip("\n")
    if not line.strip() or line.startswith("#"):
        continue
    f = line.split("\t")
    if len(f) != 5:
        sys.exit(f"{path}:{n}: {len(f)} fields, want 5 (id, file, snippet, replacement, tests)")
    if f[0] in seen:
        sys.exit(f"{path}:{n}: mutant {f[0]} listed twice")
    seen.add(f[0])
    if not want or f[0] in want:
        print(f"{f[0]}\t{f[1]}\t{f[4]}")
missing = [w for w in want if w not in seen]
if missing:
    sys.exit(f"no such mutant: {' '.join(missing)}")
EOF
}

if [ "$listonly" = 1 ]; then
  rows | awk -F'\t' 'BEGIN{printf "%-20s %-34s %s\n","ID","FILE","TESTS"} {printf "%-20s %-34s %s\n",$1,$2,$3}'
  exit "${PIPESTATUS[0]}"
fi
sel=$(rows) || exit 2

py=${STRATA_PYTHON:-}
if [ -z "$py" ]; then
  v=$(./scripts/pyvenv.sh --path 2>/dev/null)
  if [ -n "$v" ] && [ -x "$v/bin/python" ]; then py=$v/bin/python; else py=python3; fi
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/strata-mutants.XXXXXX")
logs=$scratch.logs
mkdir -p "$logs"
cleanup() { [ "$keep" = 1 ] || rm -rf "$scratch"; }
trap cleanup EXIT
if [ "$dirty" = 1 ]; then
  git ls-files -z -co --exclude-standard | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf - | tar -x -C "$scratch"
  src="working tree"
else
  git archive HEAD | tar -x -C "$scratch"
  src="HEAD $(git rev-parse --short HEAD)"
fi
echo "mutants: $(printf '%s\n' "$sel" | wc -l) on a copy of the $src in $scratch; logs in $logs; python: $py"

# apply ID FILE: replace the mutant's snippet in the scratch copy's FILE
# (kept as FILE.orig); exit 3 unless the snippet occurs exactly once.
apply() {
  python3 - "$root/$list" "$1" "$scratch/$2" <<'EOF'
import re, shutil, sys
path, want, target = sys.argv[1:]
unesc = lambda s: re.sub(r"\\([nt\\])", lambda m: {"n": "\n", "t": "\t", "\\": "\\"}[m.group(1)], s)
for line in open(path):
    f = line.rstrip("\n").split("\t")
    if f[0] == want and len(f) == 5:
        old, new = unesc(f[2]), unesc(f[3])
        break
src = open(target).read()
n = src.count(old)
if n != 1:
    print(f"snippet occurs {n} times in {target}")
    sys.exit(3)
shutil.copy2(target, target + ".orig")
open(target, "w").write(src.replace(old, new))
EOF
}

# commands TESTS: one shell command a line running the tests named;
# "MISSING name" for a test not found.
commands() {
  local t dir file
  declare -A gopkgs=() pyfiles=()
  for t in $1; do
    case "$t" in
      Test*)
        dirs=$(cd "$scratch" && grep -rl --include='*_test.go' -E "^func $t\(" . | xargs -r -n1 dirname | sort -u)
        [ -z "$dirs" ] && { echo "MISSING $t"; continue; }
        for dir in $dirs; do gopkgs[$dir]+="${gopkgs[$dir]:+|}$t"; done ;;
      test_*)
        files=$(cd "$scratch/python/tests" && grep -l -E "^\s*def $t\(" ./*.py 2>/dev/null | xargs -r -n1 basename)
        [ -z "$files" ] && { echo "MISSING $t"; continue; }
        for file in $files; do pyfiles[$file]+=" -k '*.$t'"; done ;;
      *) echo "MISSING $t (neither TestX nor test_x)" ;;
    esac
  done
  for dir in "${!gopkgs[@]}"; do
    echo "go test -count=1 -run '^(${gopkgs[$dir]})\$' $dir/"
  done
  for file in "${!pyfiles[@]}"; do
    echo "'$py' -m unittest discover -s python/tests -p $file ${pyfiles[$file]}"
  done
}

# runtests CMDS LOG: runs each command under the timeout; prints
# pass, fail, hung or broken (a build failure).
runtests() {
  local cmds=$1 log=$2 rc out=pass
  while IFS= read -r c; do
    [ -z "$c" ] && continue
    echo "\$ $c" >>"$log"
    (cd "$scratch" && timeout -k 10 "$tmo" bash -c "$c") >>"$log" 2>&1
    rc=$?
    if [ $rc = 124 ] || [ $rc = 137 ]; then out=hung; break; fi
    if tail -n 40 "$log" | grep -qE '\[(build|setup) failed\]|SyntaxError|IndentationError'; then
      out=broken; break
    fi
    if tail -n 40 "$log" | grep -qE 'no tests to run|^Ran 0 tests'; then out=missing; break; fi
    [ $rc != 0 ] && { out=fail; break; }
  done <<<"$cmds"
  echo "$out"
}

start=$(date +%s)
results=()
bad=0
while IFS=$'\t' read -r id file tests; do
  t0=$(date +%s)
  log=$logs/$id.log
  : >"$log"
  cmds=$(commands "$tests")
  status=""
  miss=$(grep '^MISSING' <<<"$cmds" | cut -d' ' -f2 | tr '\n' ' ' | sed 's/ $//')
  cmds=$(grep -v '^MISSING' <<<"$cmds")
  if [ -z "$cmds" ]; then
    status="MISSING ($miss)"
  elif [ "$baseline" = 1 ] && [ "$(runtests "$cmds" "$log")" != pass ]; then
    status=BASEFAIL
  elif ! msg=$(apply "$id" "$file"); then
    status="BROKEN ($msg)"
  else
    if [[ "$file" == *.py ]] && ! python3 -m py_compile "$scratch/$file" >>"$log" 2>&1; then
      r=broken
    else
      echo "--- mutant $id applied to $file" >>"$log"
      r=$(runtests "$cmds" "$log")
    fi
    mv "$scratch/$file.orig" "$scratch/$file"
    case "$r" in
      fail) status=KILLED ;;
      pass) status=SURVIVED ;;
      hung) status="HUNG (>${tmo}s)" ;;
      broken) status="BROKEN (does not compile; $log)" ;;
      missing) status="MISSING (no test ran)" ;;
    esac
  fi
  # A named test that does not exist fails the run even when another
  # named test killed the mutant.
  [ -n "$miss" ] && [ "${status%% *}" != MISSING ] && status="$status (missing: $miss)"
  [ "$status" = KILLED ] || bad=1
  secs=$(( $(date +%s) - t0 ))
  printf '%-20s %-9s %4ss  %s\n' "$id" "${status%% *}" "$secs" "$tests"
  results+=("$(printf '%-20s %-34s %5ss  %s  [%s]' "$id" "$file" "$secs" "$status" "$tests")")
done <<<"$sel"

echo
echo "== summary (logs: $logs)"
printf '%-20s %-34s %6s  %s  [%s]\n' ID FILE TIME RESULT TESTS
printf '%s\n' "${results[@]}"
for s in KILLED SURVIVED HUNG BROKEN MISSING BASEFAIL; do
  n=$(printf '%s\n' "${results[@]}" | awk -v s="$s" '$4 == s' | wc -l)
  [ "$n" -gt 0 ] && printf '%s %d  ' "$s" "$n"
done
echo
echo "total run time: $(( $(date +%s) - start ))s for ${#results[@]} mutants"
exit $bad
