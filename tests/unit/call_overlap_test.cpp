// plans/call_overlap.hpp: which plans both executors (callsNeedNoHandshake),
// the GPU executor (accessesStayInsideTheOwnersCall) and the host executor
// (putsHearFromTheirTarget) run without the start handshake, and the
// happens-before order that rests on (happensAfterRank).
#include <gtest/gtest.h>

#include <string>

#include "plans/call_overlap.hpp"
#include "plugboard/plan.hpp"

using namespace plugboard;

namespace {

Plan shipped(const std::string& name) {
  return loadPlan(std::string(PLUGBOARD_TEST_SOURCE_DIR) + "/../plans/" + name + ".json");
}

/// A put or put_packet of chunk 0 of src into chunk 0 of dst on channel.
PlanOp oneChunk(PlanOp::Kind kind, int channel, PlanChunk::Buffer src, PlanChunk::Buffer dst) {
  PlanOp o;
  o.kind = kind;
  o.channel = channel;
  o.src.buffer = src;
  o.dst.buffer = dst;
  o.src.size = o.dst.size = 1;
  return o;
}

/// An LL plan of two ranks in which only rank 0 puts packets (to rank 1).
Plan oneWayPackets() {
  Plan p;
  p.protocol = "ll";
  p.nranks = 2;
  p.inputChunks = p.outputChunks = p.packetChunks = 1;
  p.ranks.resize(2);
  for (int r = 0; r < 2; ++r) p.ranks[r].channels.push_back(PlanChannel{1 - r, PlanChannel::Type::Memory, 0});
  p.ranks[0].threadblocks.push_back(
      {0, {oneChunk(PlanOp::Kind::PutPacket, 0, PlanChunk::Buffer::Input, PlanChunk::Buffer::Packets)}});
  return p;
}

}  // namespace

TEST(CallOverlap, LLPlansWithPacketsBothWaysNeedNoHandshake) {
  for (const char* name : {"allreduce_packets/2ranks", "allreduce_packets/4ranks", "allreduce_allpairs_packets/3ranks"})
    EXPECT_TRUE(callsNeedNoHandshake(shipped(name))) << name;
}

TEST(CallOverlap, SimplePlansAndOneWayPacketsKeepTheHandshake) {
  for (const char* name : {"allreduce_ring/2ranks", "allreduce_allpairs_twoshot/4ranks", "allgather_allpairs/3ranks"})
    EXPECT_FALSE(callsNeedNoHandshake(shipped(name))) << name;
  // Rank 0 could run calls ahead of rank 1 and overwrite the packets half
  // rank 1 still reads.
  EXPECT_FALSE(callsNeedNoHandshake(oneWayPackets()));
  Plan both = oneWayPackets();
  PlanOp back = both.ranks[0].threadblocks[0].ops[0];
  both.ranks[1].threadblocks.push_back({0, {back}});
  EXPECT_TRUE(callsNeedNoHandshake(both));
}

TEST(CallOverlap, PlansWhosePutsHearFromTheirTargetOverlapOnHostBuffers) {
  // Allpairs plans wait for each target's own signal; a ring's rank puts
  // into its successor and hears from it around the ring.
  for (const char* name : {"allreduce_allpairs/2ranks", "allreduce_allpairs/4ranks", "allreduce_allpairs_twoshot/3ranks",
                           "allgather_allpairs/4ranks", "alltoall_allpairs/3ranks", "allreduce_ring/3ranks",
                           "allreduce_ring/8ranks", "allgather_ring/4ranks"})
    EXPECT_TRUE(putsHearFromTheirTarget(shipped(name))) << name;
  // LL plans have their own rule.
  EXPECT_FALSE(putsHearFromTheirTarget(shipped("allreduce_packets/2ranks")));
}

namespace {

/// An operation of `kind` on channel `channel`.
PlanOp op(PlanOp::Kind kind, int channel) {
  PlanOp o;
  o.kind = kind;
  o.channel = channel;
  return o;
}

/// Three ranks, a channel from each to each (channel index = peer, the
/// rank's own unused): rank 0 puts into rank 1 and waits for rank 2; rank
/// 1 signals rank 2. What rank 2 does is the test's.
Plan relayThroughRankTwo(std::vector<PlanThreadBlock> rank2) {
  Plan p;
  p.nranks = 3;
  p.protocol = "simple";
  p.inputChunks = p.outputChunks = 1;
  p.ranks.resize(3);
  for (int r = 0; r < 3; ++r)
    for (int peer = 0; peer < 3; ++peer) p.ranks[r].channels.push_back(PlanChannel{peer, PlanChannel::Type::Port, 0});
  const PlanOp put = oneChunk(PlanOp::Kind::Put, 1, PlanChunk::Buffer::Input, PlanChunk::Buffer::Output);
  p.ranks[0].threadblocks.push_back({0, {put, op(PlanOp::Kind::Wait, 2)}});
  p.ranks[1].threadblocks.push_back({0, {op(PlanOp::Kind::Signal, 2)}});
  p.ranks[2].threadblocks = std::move(rank2);
  return p;
}

}  // namespace

TEST(CallOverlap, ARankHearsFromAnotherOnlyThroughOrdersEveryRunHas) {
  const PlanOp waitFor1 = op(PlanOp::Kind::Wait, 1), signal0 = op(PlanOp::Kind::Signal, 0);
  // Rank 2 hears from rank 1, then tells rank 0: 1 -> 2 -> 0.
  Plan relayed = relayThroughRankTwo({{0, {waitFor1, signal0}}});
  EXPECT_TRUE(putsHearFromTheirTarget(relayed));
  EXPECT_EQ(happensAfterRank(relayed, 1), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(happensAfterRank(relayed, 0), (std::vector<bool>{true, false, false}));
  // Rank 2 tells rank 0 before it has heard from rank 1: rank 0 could run
  // two calls ahead of rank 1.
  EXPECT_FALSE(putsHearFromTheirTarget(relayThroughRankTwo({{0, {signal0, waitFor1}}})));
  // In two thread blocks of rank 2, nothing orders the wait before the signal...
  EXPECT_FALSE(putsHearFromTheirTarget(relayThroughRankTwo({{0, {waitFor1}}, {1, {signal0}}})));
  // ...unless a barrier does.
  PlanOp barrier = op(PlanOp::Kind::Barrier, -1);
  barrier.barrier = 0;
  barrier.parties = 2;
  EXPECT_TRUE(putsHearFromTheirTarget(relayThroughRankTwo({{0, {waitFor1, barrier}}, {1, {barrier, signal0}}})));
  // Rank 2 signals rank 0 from two blocks, one before its wait: rank 0's
  // single wait may have counted either signal.
  EXPECT_FALSE(putsHearFromTheirTarget(relayThroughRankTwo({{0, {waitFor1, signal0}}, {1, {signal0}}})));
  // In place, the output would not survive a peer's next call.
  relayed.inPlace = true;
  EXPECT_FALSE(putsHearFromTheirTarget(relayed));
}

TEST(CallOverlap, TheJthWaitFollowsTheJthSignalOfASingleBlock) {
  // Rank 2 signals rank 0 twice and hears from rank 1 between the two.
  const PlanOp waitFor1 = op(PlanOp::Kind::Wait, 1), signal0 = op(PlanOp::Kind::Signal, 0), waitFor2 = op(PlanOp::Kind::Wait, 2);
  Plan p = relayThroughRankTwo({{0, {signal0, waitFor1, signal0}}});
  const PlanOp put = p.ranks[0].threadblocks[0].ops[0];
  p.ranks[0].threadblocks = {{0, {put, waitFor2, waitFor2}}};
  EXPECT_TRUE(putsHearFromTheirTarget(p));  // rank 0's second wait needs the second signal
  p.ranks[0].threadblocks = {{0, {put, waitFor2}}};
  EXPECT_FALSE(putsHearFromTheirTarget(p));  // its only wait may have had the first
  p.ranks[0].threadblocks = {{0, {put, waitFor2}}, {1, {waitFor2}}};
  EXPECT_FALSE(putsHearFromTheirTarget(p));  // waits in two blocks: either may be counted first
}

namespace {

/// Two ranks over one channel each (index 0, to the other rank, of `type`);
/// both run `ops` in one thread block.
Plan symmetricPair(std::vector<PlanOp> ops, PlanChannel::Type type = PlanChannel::Type::Memory) {
  Plan p;
  p.nranks = 2;
  p.protocol = "simple";
  p.inputChunks = p.outputChunks = p.scratchChunks = 1;
  p.ranks.resize(2);
  for (int r = 0; r < 2; ++r) {
    p.ranks[r].channels.push_back(PlanChannel{1 - r, type, 0});
    p.ranks[r].threadblocks.push_back({0, ops});
  }
  return p;
}

}  // namespace

TEST(CallOverlap, SwitchPlansOrderEveryPeersAccessInsideTheOwnersCall) {
  // Every rank signals every other before its first switch operation and after its last.
  for (const char* name : {"allreduce_switch/2ranks", "allreduce_switch/3ranks", "allreduce_switch/8ranks"})
    EXPECT_TRUE(accessesStayInsideTheOwnersCall(shipped(name))) << name;
  // Their first put reaches a peer that may not have begun the call.
  for (const char* name : {"allreduce_allpairs/2ranks", "allreduce_allpairs_twoshot/4ranks", "allreduce_ring/3ranks",
                           "allgather_allpairs/2ranks", "allreduce_packets/2ranks"})
    EXPECT_FALSE(accessesStayInsideTheOwnersCall(shipped(name))) << name;
}

TEST(CallOverlap, ASwitchOperationNeedsEveryOwnersOperationsBeforeAndAfterIt) {
  // allreduce_switch/3ranks, one thread block a rank: copy, signal x2, wait
  // x2, switch_reduce, switch_broadcast, signal x2, wait x2.
  const Plan base = shipped("allreduce_switch/3ranks");
  auto ops = [](Plan& p, int r) -> std::vector<PlanOp>& { return p.ranks[r].threadblocks[0].ops; };
  auto peerOf = [](const Plan& p, int r, const PlanOp& op) { return p.ranks[r].channels[op.channel].peer; };
  EXPECT_TRUE(accessesStayInsideTheOwnersCall(base));
  // Without the closing round, a peer's next call may begin under rank 0's broadcast.
  Plan noClose = base;
  for (int r = 0; r < 3; ++r) ops(noClose, r).resize(7);
  EXPECT_FALSE(accessesStayInsideTheOwnersCall(noClose));
  // Without the opening round, rank 0 may reduce a peer's scratch before the peer's call began.
  Plan noOpen = base;
  for (int r = 0; r < 3; ++r) ops(noOpen, r).erase(ops(noOpen, r).begin() + 1, ops(noOpen, r).begin() + 5);
  EXPECT_FALSE(accessesStayInsideTheOwnersCall(noOpen));
  // Rank 0 hears only from rank 1 before its switch operations (its wait
  // for rank 2 and rank 2's matching signal become plain copies): rank 2's
  // call may not have begun.
  Plan oneHeard = base;
  for (auto& op : ops(oneHeard, 0))
    if (op.kind == PlanOp::Kind::Wait && peerOf(oneHeard, 0, op) == 2) {
      op = PlanOp{};
      break;
    }
  for (auto& op : ops(oneHeard, 2))
    if (op.kind == PlanOp::Kind::Signal && peerOf(oneHeard, 2, op) == 0) {
      op = PlanOp{};
      break;
    }
  EXPECT_FALSE(accessesStayInsideTheOwnersCall(oneHeard));
}

TEST(CallOverlap, APutNeedsTheOwnersOperationsBeforeAndAfterIt) {
  const PlanOp signal = op(PlanOp::Kind::Signal, 0), wait = op(PlanOp::Kind::Wait, 0);
  const PlanOp put = oneChunk(PlanOp::Kind::Put, 0, PlanChunk::Buffer::Input, PlanChunk::Buffer::Scratch);
  const PlanOp get = oneChunk(PlanOp::Kind::Get, 0, PlanChunk::Buffer::Input, PlanChunk::Buffer::Scratch);
  EXPECT_TRUE(accessesStayInsideTheOwnersCall(symmetricPair({signal, wait, put, signal, wait})));
  EXPECT_TRUE(accessesStayInsideTheOwnersCall(symmetricPair({signal, wait, get, signal, wait})));
  // Before the peer is heard from: its previous call may still read the scratch.
  EXPECT_FALSE(accessesStayInsideTheOwnersCall(symmetricPair({put, signal, wait, signal, wait})));
  // Nothing of the peer's call follows the put: its next call may begin under it.
  EXPECT_FALSE(accessesStayInsideTheOwnersCall(symmetricPair({signal, wait, put})));
  EXPECT_FALSE(accessesStayInsideTheOwnersCall(symmetricPair({signal, wait, get, signal})));
  // The proxy's writes land after the put that asked for them.
  EXPECT_FALSE(accessesStayInsideTheOwnersCall(symmetricPair({signal, wait, put, signal, wait}, PlanChannel::Type::Port)));
}

TEST(CallOverlap, BlocksHandshakeOnlyWhereEveryRanksChannelsStayInOneBlock) {
  for (const char* name : {"allreduce_allpairs_blocks/4ranks", "allreduce_ring/3ranks", "allgather_allpairs/2ranks"})
    EXPECT_TRUE(channelsStayInOneBlock(shipped(name))) << name;
  const PlanOp signal = op(PlanOp::Kind::Signal, 0), wait = op(PlanOp::Kind::Wait, 0);
  Plan p = symmetricPair({signal, wait});
  EXPECT_TRUE(channelsStayInOneBlock(p));
  // Rank 1 alone signals from a second block: both ranks take the handshake kernel.
  p.ranks[1].threadblocks = {{0, {wait}}, {1, {signal}}};
  EXPECT_FALSE(channelsStayInOneBlock(p));
}

TEST(CallOverlap, APlanOfManyOperationsIsCheckedInLinearTime) {
  // 50,000 rounds of signal, wait, put per rank (300,000 operations): two
  // walks of the graph per rank, not one per access (ctest's timeout
  // would end a walk per access).
  const PlanOp signal = op(PlanOp::Kind::Signal, 0), wait = op(PlanOp::Kind::Wait, 0);
  const PlanOp put = oneChunk(PlanOp::Kind::Put, 0, PlanChunk::Buffer::Input, PlanChunk::Buffer::Scratch);
  std::vector<PlanOp> ops;
  for (int i = 0; i < 50000; ++i) ops.insert(ops.end(), {signal, wait, put});
  ops.insert(ops.end(), {signal, wait});
  EXPECT_TRUE(accessesStayInsideTheOwnersCall(symmetricPair(ops)));
  // A barrier of 20,000 thread blocks: edges in proportion to its members
  // (every pair of them would be 400 million).
  Plan wide = symmetricPair({signal, wait});
  PlanOp barrier = op(PlanOp::Kind::Barrier, -1);
  barrier.barrier = 0;
  barrier.parties = 20000;
  for (int t = 1; t < 20000; ++t) wide.ranks[0].threadblocks.push_back({t, {barrier}});
  wide.ranks[0].threadblocks[0].ops.push_back(barrier);
  EXPECT_EQ(happensAfterRank(wide, 0), (std::vector<bool>{true, true}));  // its signal reaches rank 1
}
