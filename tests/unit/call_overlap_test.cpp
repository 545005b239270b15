// plans/call_overlap.hpp: which plans both executors (callsNeedNoHandshake)
// and the host executor (putsWaitForTheirTarget) run without the start
// handshake.
#include <gtest/gtest.h>

#include <string>

#include "plans/call_overlap.hpp"
#include "plugboard/plan.hpp"

using namespace plugboard;

namespace {

Plan shipped(const std::string& name) {
  return loadPlan(std::string(PLUGBOARD_TEST_SOURCE_DIR) + "/../plans/" + name + ".json");
}

/// An LL plan of two ranks in which only rank 0 puts packets (to rank 1).
Plan oneWayPackets() {
  Plan p;
  p.protocol = "ll";
  p.nranks = 2;
  p.inputChunks = p.outputChunks = p.packetChunks = 1;
  p.ranks.resize(2);
  for (int r = 0; r < 2; ++r) p.ranks[r].channels.push_back(PlanChannel{1 - r, PlanChannel::Type::Memory, 0});
  PlanOp put;
  put.kind = PlanOp::Kind::PutPacket;
  put.channel = 0;
  put.src.buffer = PlanChunk::Buffer::Input;
  put.dst.buffer = PlanChunk::Buffer::Packets;
  put.src.size = put.dst.size = 1;
  p.ranks[0].threadblocks.push_back({0, {put}});
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

TEST(CallOverlap, PlansWhosePutsWaitForTheirTargetOverlapOnHostBuffers) {
  for (const char* name : {"allreduce_allpairs/2ranks", "allreduce_allpairs/4ranks", "allreduce_allpairs_twoshot/3ranks",
                           "allgather_allpairs/4ranks", "alltoall_allpairs/3ranks"})
    EXPECT_TRUE(putsWaitForTheirTarget(shipped(name))) << name;
  // A ring's rank puts into its successor and waits for its predecessor
  // only; LL plans have their own rule.
  for (const char* name : {"allreduce_ring/3ranks", "allgather_ring/4ranks", "allreduce_packets/2ranks"})
    EXPECT_FALSE(putsWaitForTheirTarget(shipped(name))) << name;
}
