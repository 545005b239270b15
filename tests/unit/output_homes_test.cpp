// chunksInStorage (plans/output_homes.hpp): which input and output chunks
// the GPU executor (puts from storage over port channels only) and the host
// executor (every put and get through a transport) must keep in registered storage, for
// shipped plans and for operations whose chunk ranges overlap.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "plans/output_homes.hpp"
#include "plugboard/plan.hpp"

using namespace plugboard;

namespace {

Plan shipped(const std::string& name) {
  return loadPlan(std::string(PLUGBOARD_TEST_SOURCE_DIR) + "/../plans/" + name + ".json");
}

PlanChunk chunk(PlanChunk::Buffer b, uint64_t index, uint64_t size) {
  PlanChunk c;
  c.buffer = b;
  c.index = index;
  c.size = size;
  return c;
}

PlanOp op(PlanOp::Kind kind, int channel, PlanChunk src, PlanChunk dst) {
  PlanOp o;
  o.kind = kind;
  o.channel = channel;
  o.src = src;
  o.dst = dst;
  return o;
}

/// Two ranks with a memory channel each way; rank 1 puts into rank 0's
/// output chunk `written`; rank 0 copies into the output ranges given.
Plan twoRanks(uint64_t outputChunks, uint64_t written, const std::vector<std::pair<uint64_t, uint64_t>>& copies) {
  using B = PlanChunk::Buffer;
  Plan p;
  p.nranks = 2;
  p.inputChunks = p.outputChunks = outputChunks;
  p.ranks.resize(2);
  for (int r = 0; r < 2; ++r) p.ranks[r].channels.push_back(PlanChannel{1 - r, PlanChannel::Type::Memory, 0});
  p.ranks[1].threadblocks.push_back({0, {op(PlanOp::Kind::Put, 0, chunk(B::Input, 0, 1), chunk(B::Output, written, 1))}});
  PlanThreadBlock tb;
  for (const auto& [index, size] : copies)
    tb.ops.push_back(op(PlanOp::Kind::Copy, -1, chunk(B::Input, index, size), chunk(B::Output, index, size)));
  p.ranks[0].threadblocks.push_back(tb);
  return p;
}

/// The GPU executor's question: output chunks, port channels' puts from storage.
std::vector<bool> outputChunksInStorage(const Plan& p, int rank) {
  return chunksInStorage(p, rank, PlanChunk::Buffer::Output, false);
}

}  // namespace

TEST(OutputHomes, TwoShotKeepsOnlyThePeersChunkInTheStorage) {
  const Plan p = shipped("allreduce_allpairs_twoshot/2ranks");
  EXPECT_EQ(outputChunksInStorage(p, 0), (std::vector<bool>{false, true}));
  EXPECT_EQ(outputChunksInStorage(p, 1), (std::vector<bool>{true, false}));
}

TEST(OutputHomes, OneShotComputesItsWholeOutputHere) {
  EXPECT_EQ(outputChunksInStorage(shipped("allreduce_allpairs/4ranks"), 2), (std::vector<bool>{false}));
  // Gets read the peers' inputs: the output is this rank's alone.
  EXPECT_EQ(outputChunksInStorage(shipped("allgather_allpairs_get/2ranks"), 1), (std::vector<bool>{false, false}));
}

TEST(OutputHomes, PeersPutsAndPortSourcesStayInTheStorage) {
  EXPECT_EQ(outputChunksInStorage(shipped("allreduce_ring/3ranks"), 1), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(outputChunksInStorage(shipped("allgather_allpairs/3ranks"), 0), (std::vector<bool>{false, true, true}));
  // A port channel's transport reads the reduced chunk from registered memory.
  EXPECT_EQ(outputChunksInStorage(shipped("allreduce_allpairs_twoshot/port-2ranks"), 0), (std::vector<bool>{true, true}));
}

TEST(OutputHomes, OverlappingRangesShareOneHome) {
  // Chunk 2 is the peer's; [1, 3) then holds 1, and [0, 2) holds 0: in
  // either order of the operations. Chunk 3 is named alone.
  const std::vector<bool> want{true, true, true, false};
  EXPECT_EQ(outputChunksInStorage(twoRanks(4, 2, {{0, 2}, {1, 2}, {3, 1}}), 0), want);
  EXPECT_EQ(outputChunksInStorage(twoRanks(4, 2, {{3, 1}, {1, 2}, {0, 2}}), 0), want);
  EXPECT_EQ(outputChunksInStorage(twoRanks(4, 3, {{0, 2}, {1, 2}}), 0), (std::vector<bool>{false, false, false, true}));
}

TEST(OutputHomes, OnHostBuffersEveryPutSendsFromTheStorage) {
  const Plan twoShot = shipped("allreduce_allpairs_twoshot/2ranks");
  // Input chunk 1 goes to rank 1, chunk 0 is only reduced here.
  EXPECT_EQ(chunksInStorage(twoShot, 0, PlanChunk::Buffer::Input, true), (std::vector<bool>{false, true}));
  // The reduced chunk 0 is then put to rank 1, and rank 1 puts chunk 1 here.
  EXPECT_EQ(chunksInStorage(twoShot, 0, PlanChunk::Buffer::Output, true), (std::vector<bool>{true, true}));
  const Plan oneShot = shipped("allreduce_allpairs/2ranks");
  EXPECT_EQ(chunksInStorage(oneShot, 1, PlanChunk::Buffer::Input, true), (std::vector<bool>{true}));
  EXPECT_EQ(chunksInStorage(oneShot, 1, PlanChunk::Buffer::Output, true), (std::vector<bool>{false}));
  // A peer's get reads this rank's input; its owner writes a get's data here.
  const Plan gets = shipped("allgather_allpairs_get/2ranks");
  EXPECT_EQ(chunksInStorage(gets, 0, PlanChunk::Buffer::Input, true), (std::vector<bool>{true}));
  EXPECT_EQ(chunksInStorage(gets, 0, PlanChunk::Buffer::Output, true), (std::vector<bool>{false, true}));
  EXPECT_EQ(chunksInStorage(gets, 0, PlanChunk::Buffer::Output, false), (std::vector<bool>{false, false}));
}
