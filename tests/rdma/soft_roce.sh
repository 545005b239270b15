#!/usr/bin/env bash
# The ib-verbs transport for real where Soft-RoCE can be made: adds an rxe
# device on loopback (`rdma link add ... type rxe netdev lo`), runs the
# plugin's ABI tests and the conformance kit against it, and removes the
# device again. Exits 77 (skipped) with the reason where that is not
# possible (not root, no `rdma` tool, a kernel without rdma_rxe or without
# the RDMA netlink socket, as in the CI and GPU machines' containers).
#   bash tests/rdma/soft_roce.sh BUILD_DIR
set -uo pipefail
build=${1:?usage: soft_roce.sh BUILD_DIR}
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root to add a Soft-RoCE device"
command -v rdma > /dev/null || skip "needs the rdma tool (iproute2)"
dev=pbrxe$$
if ! out=$(rdma link add "$dev" type rxe netdev lo 2>&1); then
  skip "cannot add a Soft-RoCE device on lo: ${out:-rdma link add failed} (no rdma_rxe module or no RDMA netlink here)"
fi
trap 'rdma link delete "$dev" > /dev/null 2>&1' EXIT
failures=0
timeout 300 env PB_TEST_IB_VERBS_HCA="=$dev" "$build/bin/plugboard_ib_verbs_plugin_test" || failures=$((failures + 1))
timeout 300 "$build/bin/plugboard-plugin-check" --set "hca==$dev" "$build/lib/plugboard/libplugboard-ib-verbs.so" ||
  failures=$((failures + 1))
echo "soft-roce: $failures failure(s)"
[ "$failures" -eq 0 ]
