#!/usr/bin/env bash
# Two hosts for real on one machine: two network namespaces joined by a
# veth pair, ranks started in each with their own host id, so selection
# sees different hosts and every pair across takes the network path
# (ethernet over the veth link; the namespaces have no other route).
#
#   bash tests/netns/two_hosts.sh PLUGBOARD_PERF
#
# Cases: every collective over 2 ranks (one per host) and 4 ranks (two per
# host) at odd sizes, each result checked (-c 1); a rank killed
# mid-allreduce ends the others' calls with an error naming it and its
# host; a rank stopped (SIGSTOP) is named by the others after the timeout;
# a rank joining late is waited for; a rank of another job (other
# PLUGBOARD_JOB_ID) at the same root is refused at once and the job goes
# on; ranks disagreeing on the rank count both fail naming both counts;
# the root's port taken by another process is named; a decoy interface is
# skipped by the ifname filter; with failover on, the link cut
# mid-allreduce moves the cross-host pairs (2 ranks, then 4 ranks two a
# host) to libfabric on a second link and the job completes; allreduce
# and allgather over libfabric with two lanes across the hosts (2 and 4
# ranks); without failover, the cut ends every rank's call by the timeout,
# naming the peer, over ethernet, ucx and libfabric alike. Exits 77 (skipped) where network namespaces cannot be
# made (not root, no iproute2, no permission). Every process is bounded by
# `timeout`, and the namespaces are removed on exit.
set -uo pipefail
perf=${1:?usage: two_hosts.sh PLUGBOARD_PERF}
perf=$(readlink -f "$perf")
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
command -v ip > /dev/null || skip "needs ip (iproute2)"

# Unique names (parallel ctest runs): namespaces pbA<pid>/pbB<pid>, links
# (15 characters at most) pa<pid>/pb<pid>, a /24 picked from the pid.
ns_a=pbA$$ ns_b=pbB$$ link_a=pa$$ link_b=pb$$
net="10.$((100 + $$ % 100)).$(( ($$ / 100) % 250 ))"
addr_a=$net.1 addr_b=$net.2
logs=$(mktemp -d /tmp/pb-two-hosts.XXXXXX)
cleanup() {
  ip netns pids "$ns_a" 2> /dev/null | xargs -r kill -9 2> /dev/null
  ip netns pids "$ns_b" 2> /dev/null | xargs -r kill -9 2> /dev/null
  ip netns del "$ns_a" 2> /dev/null
  ip netns del "$ns_b" 2> /dev/null
  rm -rf "$logs"
}
trap cleanup EXIT
ip netns add "$ns_a" 2> /dev/null || skip "ip netns add is not permitted here"
ip netns add "$ns_b" || skip "ip netns add is not permitted here"
ip link add "$link_a" type veth peer name "$link_b" || skip "cannot create a veth pair"
ip link set "$link_a" netns "$ns_a" && ip link set "$link_b" netns "$ns_b" &&
  ip -n "$ns_a" addr add "$addr_a/24" dev "$link_a" && ip -n "$ns_b" addr add "$addr_b/24" dev "$link_b" &&
  ip -n "$ns_a" link set "$link_a" up && ip -n "$ns_b" link set "$link_b" up &&
  ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up || { echo "FAIL: setting up the veth link"; exit 1; }

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# start RANK NRANKS ARGS...: rank RANK of NRANKS in the namespace of its
# host (the first half of the ranks on host A), in the background, its
# output in $logs/RANK.log. Ranks find rank 0 at addr_a:port. Optional:
# TIMEOUT (PLUGBOARD_TIMEOUT, default 20), JOB_ID (PLUGBOARD_JOB_ID),
# NRANKS_CLAIM (the rank count the rank is told), IFNAME (the ethernet
# plugin's ifname).
port=29400
# CONTROL (an interface name less its a/b suffix): the bootstrap and the
# libfabric tcp provider use that link; ROOT (default addr_a) is rank 0's
# address there; TRANSPORTS (default ethernet); EXTRA_ENV: more
# assignments for every rank.
start() {
  local rank=$1 nranks=$2; shift 2
  local ns=$ns_a host=hostA side=a
  if [ "$rank" -ge $(( (nranks + 1) / 2 )) ]; then ns=$ns_b host=hostB side=b; fi
  # shellcheck disable=SC2086 # EXTRA_ENV is a list of assignments
  ip netns exec "$ns" env PLUGBOARD_RANK="$rank" PLUGBOARD_NRANKS="${NRANKS_CLAIM:-$nranks}" PLUGBOARD_HOST_ID="$host" \
    PLUGBOARD_BOOTSTRAP_ADDR="${ROOT:-$addr_a}:$port" PLUGBOARD_TRANSPORTS="${TRANSPORTS:-ethernet}" \
    PLUGBOARD_TIMEOUT="${TIMEOUT:-20}" ${JOB_ID:+PLUGBOARD_JOB_ID=$JOB_ID} ${IFNAME:+PLUGBOARD_ETHERNET_IFNAME=$IFNAME} \
    ${CONTROL:+PLUGBOARD_SOCKET_IFNAME=$CONTROL$side FI_TCP_IFACE=$CONTROL$side} ${EXTRA_ENV:-} \
    timeout 120 "$perf" --mem host "$@" > "$logs/$rank.log" 2>&1 &
  pids[$rank]=$!
}

# run_case NAME NRANKS ARGS...: every rank must exit 0 with no wrong value.
# VIA (default ethernet): the transport rank 0 must report.
run_case() {
  local name=$1 nranks=$2; shift 2
  port=$((port + 1))
  pids=()
  for ((r = 0; r < nranks; r++)); do start "$r" "$nranks" "$@"; done
  local bad=0
  for ((r = 0; r < nranks; r++)); do wait "${pids[$r]}" || bad=1; done
  if [ $bad -ne 0 ] || ! grep -q "Out of bounds values : 0 OK" "$logs/0.log"; then
    fail "$name"
    tail -5 "$logs"/*.log
  else
    echo "ok: $name ($(grep -E '^ +[0-9]' "$logs/0.log" | wc -l) sizes)"
  fi
  grep -q "via ${VIA:-ethernet}" "$logs/0.log" || fail "$name: rank 0 did not report ${VIA:-ethernet}"
}

# Every collective, 2 ranks (one per host) and 4 ranks (two per host).
for n in 2 4; do
  for c in allreduce allgather reducescatter broadcast reduce alltoall sendrecv; do
    run_case "$c, $n ranks on 2 hosts" "$n" -C "$c" -d float -o sum -b 7 -e 3000007 -f 31 -n 3 -w 1 -c 1
  done
  run_case "allreduce int8 max, $n ranks on 2 hosts" "$n" -C allreduce -d int8 -o max -b 7 -e 300007 -f 31 -n 3 -w 1 -c 1
  run_case "allreduce half avg, $n ranks on 2 hosts" "$n" -C allreduce -d half -o avg -b 7 -e 300007 -f 31 -n 3 -w 1 -c 1
done

# expect_error NAME RANKS PATTERN...: each listed rank exited non-zero by
# itself (not killed by its timeout or a signal) within the bound and its
# log holds every pattern.
expect_error() {
  local name=$1 ranks=$2; shift 2
  local r
  for r in $ranks; do
    local rc=0
    wait "${pids[$r]}" || rc=$?
    if [ "$rc" -eq 0 ]; then fail "$name: rank $r succeeded"; continue; fi
    # 124: its timeout wrapper killed it (a hang); above 128: a signal (a crash).
    [ "$rc" -lt 124 ] || { fail "$name: rank $r ended with status $rc (a hang or a crash)"; tail -5 "$logs/$r.log"; }
    local said; said=$(grep -m1 "^plugboard-perf: " "$logs/$r.log" || grep -m1 -iE "error|fail|timed out|timeout|closed" "$logs/$r.log")
    echo "  rank $r: $(echo "$said" | cut -c1-300)"
    local p
    for p in "$@"; do grep -q -- "$p" "$logs/$r.log" || { fail "$name: rank $r's error lacks '$p'"; tail -3 "$logs/$r.log"; }; done
  done
  echo "ok (if no FAIL above): $name"
}

# A rank killed mid-allreduce: the others' calls end naming it and its host.
port=$((port + 1))
pids=()
for r in 0 1 2; do start "$r" 3 -C allreduce -b 16M -e 16M -n 100000 -w 1 -c 0; done
sleep 3
ip netns pids "$ns_b" | xargs -r kill -9  # rank 2 and its timeout wrapper
begin=$(date +%s)
expect_error "rank 2 killed mid-allreduce" "0 1" "rank 2" "hostB"
took=$(( $(date +%s) - begin ))
[ "$took" -le 25 ] || fail "the survivors took $took s to report the dead rank (timeout 20 s)"
wait "${pids[2]}" 2> /dev/null  # reaped: killed

# expect_pair_ok NAME: ranks 0 and 1 (pids[0], pids[1]) exit 0 with no wrong value.
expect_pair_ok() {
  if wait "${pids[0]}" && wait "${pids[1]}" && grep -q "Out of bounds values : 0 OK" "$logs/0.log"; then
    echo "ok: $1"
  else
    fail "$1"; tail -3 "$logs"/*.log
  fi
}

# A rank stopped (SIGSTOP) mid-allreduce: the others' calls end by the
# timeout, naming it; then it is killed.
TIMEOUT=5
port=$((port + 1))
pids=()
for r in 0 1 2; do start "$r" 3 -C allreduce -b 16M -e 16M -n 100000 -w 1 -c 0; done
sleep 3
stopped=$(for p in $(ip netns pids "$ns_b"); do [ "$(cat /proc/$p/comm 2> /dev/null)" = plugboard-perf ] && echo "$p"; done)
kill -STOP $stopped
begin=$(date +%s)
expect_error "rank 2 stopped mid-allreduce" "0 1" "rank 2" "made no progress"
took=$(( $(date +%s) - begin ))
[ "$took" -le 20 ] || fail "the ranks took $took s to report the stopped rank (timeout 5 s)"
kill -9 $stopped 2> /dev/null
wait "${pids[2]}" 2> /dev/null
unset TIMEOUT

# A rank joining late (3 s after the others, within the timeout) is waited for.
port=$((port + 1))
pids=()
start 0 2 -C allreduce -b 1K -e 1K -n 3 -w 1 -c 1
sleep 3
start 1 2 -C allreduce -b 1K -e 1K -n 3 -w 1 -c 1
expect_pair_ok "a rank joining 3 s late"

# A rank of another job (an earlier one: another PLUGBOARD_JOB_ID) knocking
# at the same root is refused at once, and the job goes on.
port=$((port + 1))
pids=()
JOB_ID=now start 0 2 -C allreduce -b 1K -e 1K -n 3 -w 1 -c 1
JOB_ID=earlier start 1 2 -C allreduce -b 1K -e 1K -n 3 -w 1 -c 1
stale=${pids[1]}
begin=$(date +%s)
if wait "$stale"; then fail "a rank of another job joined"; fi
took=$(( $(date +%s) - begin ))
grep -q "serves another job" "$logs/1.log" || { fail "the stale rank's error lacks 'serves another job'"; tail -3 "$logs/1.log"; }
[ "$took" -le 10 ] || fail "the stale rank took $took s to be told"
echo "  stale rank: $(grep -m1 "serves another job" "$logs/1.log" | cut -c1-200)"
JOB_ID=now start 1 2 -C allreduce -b 1K -e 1K -n 3 -w 1 -c 1
expect_pair_ok "a rank of another job refused in $took s, the job completed"

# Ranks that disagree on the number of ranks both fail, naming both counts.
port=$((port + 1))
pids=()
start 0 2 -C allreduce -b 1K -e 1K -n 3 -w 1 -c 1
NRANKS_CLAIM=3 start 1 2 -C allreduce -b 1K -e 1K -n 3 -w 1 -c 1
expect_error "ranks disagreeing on the rank count" "0 1" "rank 0 has 2" "rank 1 has 3"

# The root's port already taken on its host: rank 0 says so, naming the
# address; rank 1 (which reaches the squatter) ends by its timeout.
port=$((port + 1))
ip netns exec "$ns_a" python3 -c "import socket,time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('$addr_a', $port)); s.listen(8); time.sleep(60)" &
squatter=$!
sleep 1
pids=()
TIMEOUT=4 start 0 2 -C allreduce -b 1K -e 1K -n 3 -w 1 -c 1
TIMEOUT=4 start 1 2 -C allreduce -b 1K -e 1K -n 3 -w 1 -c 1
expect_error "the root's port in use" "0" "$addr_a:$port" "in use"
expect_error "the root's port in use" "1" "rank 1"
kill "$squatter" 2> /dev/null; wait "$squatter" 2> /dev/null

# A decoy interface on host A (up, addressed, leading nowhere: its veth
# peer sits down and unaddressed on host B), listed before the real link
# (interface index 2). Without a filter the ethernet plugin takes it and the
# job fails, naming the address; the ifname filter skips it and the job runs
# over the real link.
decoy=dc$$
ip -n "$ns_a" link add "${decoy}a" index 2 type veth peer name "${decoy}b" netns "$ns_b" &&
  ip -n "$ns_a" addr add 192.0.2.1/24 dev "${decoy}a" && ip -n "$ns_a" link set "${decoy}a" up ||
  fail "setting up the decoy interface"
port=$((port + 1))
pids=()
TIMEOUT=4 start 0 2 -C allreduce -b 1K -e 1K -n 3 -w 1 -c 1
TIMEOUT=4 start 1 2 -C allreduce -b 1K -e 1K -n 3 -w 1 -c 1
expect_error "the decoy taken without a filter" "1" "192.0.2.1"
wait "${pids[0]}" 2> /dev/null
IFNAME="^$decoy,lo" run_case "allreduce with a decoy interface skipped by ifname" 2 -C allreduce -b 7 -e 300007 -f 31 -n 3 -w 1 -c 1
ip -n "$ns_a" link del "${decoy}a"

# The link cut mid-allreduce with failover on: ethernet carries every pair
# (cross-host pairs on the data link, with 2 stripe sockets from 64 KiB so
# pieces travel on their own sockets too; same-host pairs on lo), the
# bootstrap and libfabric (tcp) a second, control link. With nothing
# acknowledged on the data link for ethernet.ack_timeout (2 s) the
# cross-host connections fail, those pairs move to libfabric, same-host
# pairs stay on ethernet, and every size after the cut still comes out
# right. With 4 ranks, two a host, each rank moves two pairs at once.
# cut_with_failover NRANKS IFNAME ITERS (calls a size: the sweep must
# outlast the cut, or no pair moves and the case fails)
cut_with_failover() {
  local nranks=$1 ifname=$2 iters=$3 r last=$(($1 - 1))
  port=$((port + 1))
  pids=()
  for ((r = 0; r < nranks; r++)); do
    CONTROL=$ctl ROOT=$ctl_net.1 TRANSPORTS=ethernet,libfabric IFNAME="$ifname" \
      EXTRA_ENV="PLUGBOARD_FAILOVER=1 PLUGBOARD_ETHERNET_ACK_TIMEOUT=2 PLUGBOARD_ETHERNET_STRIPE_SOCKETS=2 PLUGBOARD_ETHERNET_STRIPE_BYTES=65536" \
      start "$r" "$nranks" -C allreduce -b 256K -e 8M -f 2 -n "$iters" -w 1 -c 1
  done
  sleep 1.5
  ip -n "$ns_a" link set "$link_a" down
  local begin bad=0 took name="link cut mid-allreduce with failover, $nranks ranks"
  begin=$(date +%s)
  for ((r = 0; r < nranks; r++)); do wait "${pids[$r]}" || bad=1; done
  took=$(( $(date +%s) - begin ))
  if [ $bad -ne 0 ] || ! grep -q "Out of bounds values : 0 OK" "$logs/0.log"; then
    fail "$name"; tail -n 5 "$logs"/[0-$last].log
  else
    echo "ok: $name: finished $took s after the cut"
  fi
  for ((r = 0; r < nranks; r++)); do
    local moved
    moved=$(grep -c "failing over to libfabric" "$logs/$r.log")
    [ "$moved" -eq $((nranks / 2)) ] ||
      { fail "$name: rank $r moved $moved pairs to libfabric, not $((nranks / 2))"; grep "WARN" "$logs/$r.log" | cut -c1-300; }
  done
  grep -q "ethernet.ack_timeout is 2.0 s: the link to rank" "$logs"/[0-$last].log ||
    { fail "$name: no rank said the data link went unacknowledged"; grep -h "WARN" "$logs"/[0-$last].log | cut -c1-300; }
  echo "  $(cat "$logs"/[0-$last].log | grep -m1 "ack_timeout is" | cut -c1-300)"
  ip -n "$ns_a" link set "$link_a" up
}
libfabric_plugin=$(dirname "$perf")/../lib/plugboard/libplugboard-libfabric.so
if [ -f "$libfabric_plugin" ]; then
  ctl=c$$
  ctl_net="10.$((100 + $$ % 100)).$(( ($$ / 100 + 1) % 250 ))"
  ip link add "${ctl}a" type veth peer name "${ctl}b" && ip link set "${ctl}a" netns "$ns_a" &&
    ip link set "${ctl}b" netns "$ns_b" && ip -n "$ns_a" addr add "$ctl_net.1/24" dev "${ctl}a" &&
    ip -n "$ns_b" addr add "$ctl_net.2/24" dev "${ctl}b" && ip -n "$ns_a" link set "${ctl}a" up &&
    ip -n "$ns_b" link set "${ctl}b" up || fail "setting up the control link"
  cut_with_failover 2 "=$link_a,$link_b" 200
  cut_with_failover 4 "=lo,$link_a,$link_b" 60
  # libfabric with two lanes (plugins/libfabric/README.md "Lanes") between
  # the hosts: writes from 64 KiB cut across the lanes' own endpoints.
  for n in 2 4; do
    for c in allreduce allgather; do
      CONTROL=$ctl ROOT=$ctl_net.1 TRANSPORTS=libfabric VIA=libfabric \
        EXTRA_ENV="PLUGBOARD_LIBFABRIC_LANES=2 PLUGBOARD_LIBFABRIC_LANE_BYTES=65536 PLUGBOARD_DEBUG=INFO" \
        run_case "$c over libfabric with 2 lanes, $n ranks on 2 hosts" "$n" -C "$c" -d float -o sum -b 7 -e 3000007 \
        -f 31 -n 3 -w 1 -c 1
      grep -q "(host hostB) connected over libfabric .*, 2 lane(s)" "$logs/0.log" ||
        fail "$c over libfabric, $n ranks: rank 0's connection to host B does not use 2 lanes"
    done
  done
  ip -n "$ns_a" link del "${ctl}a"
else
  echo "skipped: link cut with failover (no libfabric plugin in this build: $libfabric_plugin)"
fi

# cut_without_failover TRANSPORT: the link cut mid-allreduce over
# TRANSPORT; every rank's call ends by the timeout, naming the peer, its
# host and the transport, and every rank exits (no hang in teardown).
# Either wait may be the one that gives up: the collective's ("made no
# progress ... rank 1 (host hostB, ethernet)") or, when this rank's part
# was done, the flush of its last writes ("rank 0 -> rank 1 (host hostB)
# over ethernet: flush timed out after 5.0 s"); the transport's own error
# may come first (a failed send or receive naming the peer). All name
# peer, host and transport (a loaded machine, e.g. CI at -j2, makes the
# second likelier).
cut_without_failover() {
  local transport=$1
  TIMEOUT=5
  port=$((port + 1))
  pids=()
  for r in 0 1; do TRANSPORTS=$transport start "$r" 2 -C allreduce -b 16M -e 16M -n 100000 -w 1 -c 0; done
  sleep 3
  ip -n "$ns_a" link set "$link_a" down
  local begin; begin=$(date +%s)
  expect_error "link cut mid-allreduce over $transport" "0" "rank 1 (host hostB" "$transport" \
    'made no progress\|timed out after\|failed\|closed'
  expect_error "link cut mid-allreduce over $transport" "1" "rank 0 (host hostA" "$transport" \
    'made no progress\|timed out after\|failed\|closed'
  local took=$(( $(date +%s) - begin ))
  [ "$took" -le 20 ] || fail "over $transport the ranks took $took s to report the cut link (timeout 5 s)"
  ip -n "$ns_a" link set "$link_a" up
}
cut_without_failover ethernet
for t in ucx libfabric; do
  if [ -f "$(dirname "$perf")/../lib/plugboard/libplugboard-$t.so" ]; then
    cut_without_failover "$t"
  else
    echo "skipped: link cut over $t (no $t plugin in this build)"
  fi
done

echo "two_hosts: $failures failure(s)"
[ "$failures" -eq 0 ]
