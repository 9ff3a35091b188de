#!/usr/bin/env bash
# Checks the GPU tier against the real CUDA driver. Run it on a machine with
# an NVIDIA GPU; extra arguments go to `go test` (e.g. -race).
#
# It prints nvidia-smi, then runs the GPU tier's tests verbosely, once with
# cgo as the toolchain defaults and once with CGO_ENABLED=0 (purego's
# fakecgo, as a static stratad runs). Each device test runs on the real
# driver (subtest "cuda") and on a fake one built from
# tiers/testdata/gpu_fakecuda.c ("fake"). Where nvidia-smi lists a GPU,
# STRATA_REQUIRE_GPU=1 turns "no GPU" skips into failures, and the script
# also fails if any "cuda" subtest was skipped or none passed. Where there
# is no GPU it passes, saying that only the allocator and the fake driver
# were checked.
set -euo pipefail
cd "$(dirname "$0")/.."

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi || echo "gpu-check: nvidia-smi failed (exit $?)" >&2
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
else
  echo "gpu-check: no nvidia-smi on this machine"
fi
echo "gpu-check: nvidia-smi lists $gpus GPU(s); $(go version); CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-<unset>}"
ldconfig -p 2>/dev/null | grep -E 'libcuda\.so' || echo "gpu-check: ldconfig knows no libcuda.so"
if [ "$gpus" -gt 0 ]; then
  export STRATA_REQUIRE_GPU=1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
for cgo in default 0; do
  echo
  echo "gpu-check: go test -count=1 -run GPU -v $* ./tiers/ (CGO_ENABLED=$cgo)"
  set +e
  if [ "$cgo" = default ]; then
    go test -count=1 -run GPU -v "$@" ./tiers/ 2>&1 | tee "$log"
  else
    CGO_ENABLED=0 go test -count=1 -run GPU -v "$@" ./tiers/ 2>&1 | tee "$log"
  fi
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -ne 0 ]; then
    echo "gpu-check: FAILED: the GPU tier's tests failed (CGO_ENABLED=$cgo, exit $rc)" >&2
    status=1
    continue
  fi
  if [ "$gpus" -gt 0 ]; then
    skipped=$(grep -E -- '--- SKIP: TestGPU[^ ]*/cuda ' "$log" || true)
    passed=$(grep -cE -- '--- PASS: TestGPU[^ ]*/cuda ' "$log" || true)
    if [ -n "$skipped" ] || [ "$passed" -eq 0 ]; then
      {
        echo "gpu-check: FAILED: nvidia-smi lists $gpus GPU(s) but the real-driver tests did not all run (CGO_ENABLED=$cgo):"
        echo "${skipped:-  (no cuda subtest passed)}"
      } >&2
      status=1
      continue
    fi
    echo "gpu-check: CGO_ENABLED=$cgo: $passed real-driver subtests passed on the GPU"
  else
    echo "gpu-check: CGO_ENABLED=$cgo: no GPU here, so the real-driver subtests were skipped; only the allocator and the fake driver were checked"
  fi
done
exit "$status"
