#!/usr/bin/env bash
# The rdma plane built with -tags rdma (cgo against libibverbs). First the
# tests that need no device: the plane's choice and its fallbacks when the
# device or the peer lacks it (client, TestRDMA*), the registration books
# (rdma). Then, where an RDMA device or soft-RoCE exists, the real ones:
# the verbs loopback (rdma, TestVerbsLoopback: two queue pairs on one
# device, a page each way by RDMA WRITE and READ) and a client reading a
# node's pages over the plane (client, TestRDMAPlane); elsewhere it says
# why it skips them, and exits 0.
#
# Soft-RoCE, on a kernel with the rdma_rxe module (iproute2's rdma tool):
#   sudo modprobe rdma_rxe && sudo rdma link add rxe0 type rxe netdev eth0
set -euo pipefail
cd "$(dirname "$0")/.."
skip() {
  echo "rdma-check: skipped: $*"
  exit 0
}
[ -f /usr/include/infiniband/verbs.h ] || skip "libibverbs-dev is not installed (apt-get install libibverbs-dev)"
[ "$(go env CGO_ENABLED)" = 1 ] || skip "cgo is off (CGO_ENABLED=1 and a C compiler are needed)"
go test -tags rdma -race -count=1 -short ./rdma ./proto/pbconv
go test -tags rdma -race -count=1 -short -run '^TestRDMA' ./client
devices=""
if [ -d /sys/class/infiniband ]; then
  devices=$(ls /sys/class/infiniband)
fi
if [ -z "$devices" ] && command -v ibv_devices >/dev/null; then
  devices=$(ibv_devices | awk 'NR > 2 { print $1 }')
fi
if [ -z "$devices" ]; then
  where="/sys/class/infiniband is absent"
  [ -d /sys/class/infiniband ] && where="/sys/class/infiniband is empty"
  lists="is not installed"
  command -v ibv_devices >/dev/null && lists="lists none"
  skip "the device tests: no RDMA device ($where; ibv_devices $lists); soft-RoCE: modprobe rdma_rxe, rdma link add rxe0 type rxe netdev IFACE"
fi
echo "rdma-check: devices: $(echo $devices)"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
go test -tags rdma -race -count=1 -v -run '^(TestVerbsLoopback|TestRDMAPlane)$' ./rdma ./client 2>&1 | tee "$out" || status=$?
# With a device present a skip is a failure: the tests skip only when
# rdma.Open finds none.
if grep -q -- '--- SKIP' "$out"; then
  echo "rdma-check: FAIL: a device test skipped although $(echo $devices) exists" >&2
  exit 1
fi
[ "$status" = 0 ] && echo "rdma-check: ok"
exit "$status"
