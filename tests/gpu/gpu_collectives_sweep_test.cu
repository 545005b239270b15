// The correctness sweep of issue 12: every collective at element counts on
// both sides of every path threshold (LL, one-shot, two-shot; broadcast
// LL; allgather, alltoall and reducescatter LL; send/recv LL) and chunk and scratch boundary, odd counts, both placements, on 2, 3
// and 4 ranks, each case repeated; and every type x op at the counts that
// pick each path. tests/gpu/run.sh runs it under CUDA MPS (the ranks'
// kernels truly concurrent on one GPU) and without (time-sliced).
// PLUGBOARD_TEST_REPEAT sets the repeats (default 2).
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <vector>

#include "gpu_coll_check.hpp"
#include "gpu_test_util.hpp"

using namespace plugboard;
using namespace plugboard::test;

namespace {

constexpr uint64_t kLL = 4096, kOneShot = 32768, kChunk = 4096, kBlocks = 4, kScratch = 65536;

/// Small thresholds and scratch (as gpu_collectives_test.cu) plus small
/// broadcast and allgather/alltoall/reducescatter LL thresholds, so every
/// path and wrap is reached at small counts.
const Settings kSweep = {{"gpu_allreduce_small_bytes", std::to_string(kLL)},
                         {"gpu_allreduce_oneshot_bytes", std::to_string(kOneShot)},
                         {"gpu_broadcast_small_bytes", std::to_string(kLL)},
                         {"gpu_blocks_small_bytes", std::to_string(kLL)},
                         {"gpu_p2p_small_bytes", std::to_string(kLL)},
                         {"gpu_scratch_bytes", std::to_string(kScratch)},
                         {"gpu_blocks", std::to_string(kBlocks)},
                         {"gpu_threads", "256"},
                         {"gpu_chunk_bytes", std::to_string(kChunk)}};

int repeats() {
  const char* r = std::getenv("PLUGBOARD_TEST_REPEAT");
  return r && std::atoi(r) > 0 ? std::atoi(r) : 2;
}

/// Counts of E-byte elements at and next to each boundary on n ranks: the
/// LL and one-shot thresholds (compared with bytes x (n - 1)), one chunk,
/// one chunk per block of every segment, the scratch of one peer, and odd
/// counts below and above them.
std::vector<size_t> boundaryCounts(int n, size_t E) {
  std::set<size_t> counts = {1, 3, 7, 33, 100003};
  const uint64_t N = static_cast<uint64_t>(n);
  for (uint64_t bytes : {kLL / (N - 1), kOneShot / (N - 1), kChunk, kChunk * kBlocks * N, kScratch * N}) {
    const size_t k = bytes / E;
    for (size_t c : {k - 1, k, k + 1})
      if (c > 0) counts.insert(c);
  }
  return {counts.begin(), counts.end()};
}

/// One element size of each width, each kind of arithmetic.
const DataType kWidths[] = {DataType::Float8E4M3, DataType::Float16, DataType::Float32, DataType::Int64};

void protocolSweep(GpuCollectives& g, int rank, int n, cudaStream_t s) {
  for (int rep = 0; rep < repeats(); ++rep)
    for (DataType t : kWidths) {
      const std::vector<size_t> counts = boundaryCounts(n, dataTypeSize(t));
      reducingMatrix(g, rank, n, s, {t}, {ReduceOp::Sum, ReduceOp::Max}, counts);
      movingMatrix(g, rank, n, s, {t}, counts);
      for (size_t count : counts)
        for (bool inPlace : {false, true}) checkSendRecvRing(g, rank, n, s, t, count, inPlace);
    }
}

/// Every type and op at a count of each allreduce path on n ranks (LL,
/// one-shot, two-shot), odd.
void arithmeticSweep(GpuCollectives& g, int rank, int n, cudaStream_t s) {
  for (DataType t : kEveryDataType) {
    const size_t E = dataTypeSize(t);
    const std::vector<size_t> counts = {7, (kLL / (n - 1) / E) | 1, (kOneShot / (n - 1) / E - 2) | 1, 100003};
    reducingMatrix(g, rank, n, s, {t},
                   {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg}, counts);
  }
}

}  // namespace

TEST(GpuCollectivesSweep, BoundaryCountsTwoRanks) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(2, kSweep, protocolSweep);
}

TEST(GpuCollectivesSweep, BoundaryCountsThreeRanks) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(3, kSweep, protocolSweep);
}

TEST(GpuCollectivesSweep, BoundaryCountsFourRanks) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(4, kSweep, protocolSweep);
}

TEST(GpuCollectivesSweep, EveryTypeAndOpThreeRanks) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(3, kSweep, arithmeticSweep);
}

TEST(GpuCollectivesSweep, EveryTypeAndOpFourRanks) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(4, kSweep, arithmeticSweep);
}
