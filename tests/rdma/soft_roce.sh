#!/usr/bin/env bash
# The ib-verbs transport for real where Soft-RoCE can be made: loads
# rdma_rxe if it can, adds an rxe device (`rdma link add ... type rxe`) on
# lo, else on a dummy netdev, else on one end of a veth pair (some kernels
# refuse rxe on loopback), runs the plugin's tests and the conformance kit
# against it with PB_TEST_IB_VERBS_REQUIRE=1 (a test that finds no usable
# port fails instead of skipping), and removes what it made. Exits 77
# (skipped) with the reason where no device can be made (not root, no
# `rdma` tool, a kernel without rdma_rxe or without the RDMA netlink
# socket, as in the CI and GPU machines' containers).
#   bash tests/rdma/soft_roce.sh BUILD_DIR
set -uo pipefail
build=${1:?usage: soft_roce.sh BUILD_DIR}
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root to add a Soft-RoCE device"
command -v rdma > /dev/null || skip "needs the rdma tool (iproute2)"
# Built as a module on most distribution kernels; where it is missing the
# rdma link add below says so.
modprobe rdma_rxe > /dev/null 2>&1 || true
dev=pbrxe$$
made=()  # netdevs this script created
cleanup() {
  rdma link delete "$dev" > /dev/null 2>&1
  for n in "${made[@]}"; do ip link delete "$n" > /dev/null 2>&1; done
}
trap cleanup EXIT
why=""  # every refusal so far, for the skip line
# add_rxe NETDEV: adds $dev on NETDEV, or appends the refusal to $why.
add_rxe() {
  local out
  out=$(rdma link add "$dev" type rxe netdev "$1" 2>&1) && return 0
  why+="${why:+; }on $1: ${out:-rdma link add failed}"
  return 1
}
# new_netdev NAME ADDRESS KIND [ARGS...]: an up netdev of KIND holding ADDRESS
# (an IPv4 address gives the port the RoCE v2 IPv4-mapped GID ib-verbs takes).
new_netdev() {
  local name=$1 address=$2 kind=$3
  shift 3
  ip link add "$name" type "$kind" "$@" > /dev/null 2>&1 || { why+="; cannot create a $kind netdev"; return 1; }
  made+=("$name")
  if ! { ip addr add "$address" dev "$name" && ip link set "$name" up; }; then
    why+="; cannot give $name an address and bring it up"
    return 1
  fi
}
try_devices() {
  add_rxe lo && return 0
  # Without the RDMA netlink socket no netdev helps: leave the host's links alone.
  [[ "$why" == *NETLINK_RDMA* ]] && return 1
  command -v ip > /dev/null || { why+="; no ip tool for a dummy or veth netdev"; return 1; }
  new_netdev "pbdum$$" 198.18.0.1/32 dummy && add_rxe "pbdum$$" && return 0
  new_netdev "pbva$$" 198.18.0.2/32 veth peer name "pbvb$$" && ip link set "pbvb$$" up && add_rxe "pbva$$"
}
try_devices || skip "cannot add a Soft-RoCE device: $why (no rdma_rxe module or no RDMA netlink here)"
echo "soft-roce: $(rdma link show "$dev/1" 2>&1)"
export PB_TEST_IB_VERBS_HCA="=$dev" PB_TEST_IB_VERBS_REQUIRE=1
failures=0
for t in plugboard_ib_verbs_parts_test plugboard_ib_verbs_plugin_test; do
  timeout 300 "$build/bin/$t" || failures=$((failures + 1))
done
timeout 300 "$build/bin/plugboard-plugin-check" --set "hca==$dev" "$build/lib/plugboard/libplugboard-ib-verbs.so" ||
  failures=$((failures + 1))
echo "soft-roce: $failures failure(s)"
[ "$failures" -eq 0 ]
