// GpuCollectives against the host reference (tools/perf/collective_reference.hpp):
// forked ranks (one GPU each where there are enough, else sharing), every
// collective, type, op, count (LL and pipelined paths, pipelines that wrap
// their scratch), in place and out of place; CUDA graph capture and replay;
// argument errors; a rank that skips a call ends in a reported timeout.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_coll_check.hpp"
#include "gpu_test_util.hpp"

using namespace plugboard;
using namespace plugboard::test;

namespace {

const ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg};
/// 0, tiny, odd, LL (< 4096 bytes for 4-byte types), one-shot, two-shot and larger than the scratch.
const size_t kCounts[] = {0, 1, 7, 1009, 3000, 100003};

std::vector<DataType> allTypes() { return {std::begin(kEveryDataType), std::end(kEveryDataType)}; }
std::vector<ReduceOp> allOps() { return {std::begin(kOps), std::end(kOps)}; }
std::vector<size_t> allCounts() { return {std::begin(kCounts), std::end(kCounts)}; }

}  // namespace

TEST(GpuCollectives, ReducingCollectivesMatchReferenceTwoRanks) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(2, kSmall, [](GpuCollectives& g, int rank, int n, cudaStream_t s) {
    reducingMatrix(g, rank, n, s, allTypes(), allOps(), allCounts());
  });
}

TEST(GpuCollectives, MovingCollectivesAndSendRecvMatchReferenceTwoRanks) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(2, kSmall, [](GpuCollectives& g, int rank, int n, cudaStream_t s) {
    movingMatrix(g, rank, n, s, allTypes(), allCounts());
    for (size_t count : allCounts()) sendRecvPairs(g, rank, n, s, DataType::Float16, count);
  });
}

TEST(GpuCollectives, MovingCollectivesAndSendRecvMatchReferenceThreeAndFourRanks) {
  PB_REQUIRE_GPU_NO_INIT();
  for (int n : {3, 4})
    runGpuRanks(n, kSmall, [](GpuCollectives& g, int rank, int n, cudaStream_t s) {
      movingMatrix(g, rank, n, s, allTypes(), {0, 7, 1009, 100003});
      for (size_t count : {size_t(7), size_t(100003)}) sendRecvPairs(g, rank, n, s, DataType::Uint8, count);
    }, std::chrono::seconds(55));
}

// Counts 0 .. 100003 (2-byte elements: 200 KB, three times the 64 KiB
// scratch) and 262149 (eight times): every pipe wraps. 2047 + rank halves
// out of place: rank 0 sends on the LL path (4094 bytes), the others on
// the pipeline, so some sendRecvs mix the two.
TEST(GpuCollectives, SendRecvRingInterleavedWithSendRecvAndAllReduceTwoThreeFourRanks) {
  PB_REQUIRE_GPU_NO_INIT();
  for (int n : {2, 3, 4})
    runGpuRanks(n, kSmall, [](GpuCollectives& g, int rank, int n, cudaStream_t s) {
      sendRecvRingMatrix(g, rank, n, s, DataType::Float16, {0, 1, 7, 1009, 2047, 100003, 262149});
    }, std::chrono::seconds(55));
}

// The LL send/recv lets a sender run two calls ahead of its receiver (the
// two halves of the pair's area); many rounds wrap the parity and flags,
// and a pipelined send between them shares nothing with the LL calls.
TEST(GpuCollectives, SmallSendsRunTwoAheadOfTheirReceivesTwoAndThreeRanks) {
  PB_REQUIRE_GPU_NO_INIT();
  for (int n : {2, 3})
    runGpuRanks(n, kSmall, [](GpuCollectives& g, int rank, int n, cudaStream_t s) {
      const DataType t = DataType::Float32;
      const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
      const size_t counts[2] = {7, 1001}, big = 3000;  // LL, LL, pipeline (12000 bytes)
      DevBuf in0(counts[1] * 4), in1(counts[1] * 4), out0(counts[1] * 4), out1(counts[1] * 4), bigIn(big * 4),
          bigOut(big * 4);
      for (int round = 0; round < 40; ++round) {
        const size_t a = counts[round % 2], b = counts[(round + 1) % 2];
        in0.upload(inputs(a, round, rank, t, ReduceOp::Sum));
        in1.upload(inputs(b, round + 1, rank, t, ReduceOp::Sum));
        bigIn.upload(inputs(big, round, rank, t, ReduceOp::Sum));
        out0.poison();
        out1.poison();
        g.send(in0.p, a, t, next, s);
        g.send(in1.p, b, t, next, s);
        if (round % 4 == 3) g.sendRecv(bigIn.p, big, next, bigOut.p, big, prev, t, s);
        g.recv(out0.p, a, t, prev, s);
        g.recv(out1.p, b, t, prev, s);
        sync(s, g);
        const std::string what = "rank " + std::to_string(rank) + " round " + std::to_string(round);
        expectValues(out0.download(0, a * 4), a, t, ReduceOp::Sum,
                     [&](size_t i) { return inputValue(prev, i + round, t, ReduceOp::Sum); }, what + " first recv");
        expectValues(out1.download(0, b * 4), b, t, ReduceOp::Sum,
                     [&](size_t i) { return inputValue(prev, i + round + 1, t, ReduceOp::Sum); }, what + " second recv");
        if (round % 4 == 3)
          expectValues(bigOut.download(0, big * 4), big, t, ReduceOp::Sum,
                       [&](size_t i) { return inputValue(prev, i + round, t, ReduceOp::Sum); }, what + " pipelined");
      }
    }, std::chrono::seconds(55));
}

// A third small send before the receiver read the first waits for it, and a
// small recv waits for its sender; either ends in the named timeout.
TEST(GpuCollectives, SmallSendThreeAheadOrRecvWithoutSenderTimesOut) {
  PB_REQUIRE_GPU_NO_INIT();
  const DataType F = DataType::Float32;
  const SkippedCall sends{"send", 7, [=](GpuCollectives& g, char* b, size_t k, int r, cudaStream_t s) {
                            for (int i = 0; i < 3; ++i) g.send(b, k, F, 1 - r, s);
                          }};
  const SkippedCall recv{"recv", 7, [=](GpuCollectives& g, char* b, size_t k, int r, cudaStream_t s) {
                           g.recv(b, k, F, 1 - r, s);
                         }};
  expectTimeoutWhenARankSkips(kSmall, 2, sends);
  expectTimeoutWhenARankSkips(kSmall, 2, recv);
}

TEST(GpuCollectives, DefaultSettingsLargeMessagesTwoRanks) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(2, {}, [](GpuCollectives& g, int rank, int n, cudaStream_t s) {
    // Default settings: 4000 floats take the LL path, 1 Mi (4 MiB) the
    // one-shot pipeline, 9 Mi + 3 (36 MiB) the two-shot pipeline.
    for (size_t count : {size_t(4000), size_t(1) << 20, size_t(9) << 20 | 3}) {
      for (bool inPlace : {false, true}) {
        checkReducing(g, Reducing::AllReduce, DataType::Float32, ReduceOp::Sum, count, inPlace, 0, rank, n, s);
        checkReducing(g, Reducing::AllReduce, DataType::BFloat16, ReduceOp::Max, count, inPlace, 0, rank, n, s);
        checkReducing(g, Reducing::ReduceScatter, DataType::Float16, ReduceOp::Sum, count, inPlace, 0, rank, n, s);
        checkMoving(g, Moving::AllGather, DataType::Float32, count, inPlace, 0, rank, n, s);
        checkSendRecvRing(g, rank, n, s, DataType::Float32, count, inPlace);
      }
    }
  });
}

TEST(GpuCollectives, CapturedGraphReplaysWithFreshInputsEachTime) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(2, kSmall, checkGraphReplays);
}

TEST(GpuCollectives, BadArgumentsThrowBeforeAnythingIsEnqueued) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(2, kSmall, [](GpuCollectives& g, int rank, int n, cudaStream_t s) {
    DevBuf buf(4096);
    const auto F = DataType::Float32;
    requireError([&] { g.allReduce(nullptr, buf.p, 10, F, ReduceOp::Sum, s); }, ErrorCode::InvalidUsage,
                 {"rank " + std::to_string(rank), "allreduce", "send buffer is null"});
    const auto badType = static_cast<DataType>(99);
    requireError([&] { g.allReduce(buf.p, buf.p, 10, badType, ReduceOp::Sum, s); }, ErrorCode::InvalidUsage,
                 {"data type 99 is not a DataType"});
    requireError([&] { g.allReduce(buf.p, buf.p, 10, F, static_cast<ReduceOp>(7), s); }, ErrorCode::InvalidUsage,
                 {"reduce op 7 is not a ReduceOp"});
    requireError([&] { g.allReduce(buf.p + 4, buf.p, 10, DataType::Float64, ReduceOp::Sum, s); }, ErrorCode::InvalidUsage,
                 {"not aligned to its 8-byte elements"});
    requireError([&] { g.allReduce(buf.p + 1, buf.p, 10, F, ReduceOp::Sum, s); }, ErrorCode::InvalidUsage, {"not aligned"});
    requireError([&] { g.broadcast(buf.p, buf.p, 10, F, n, s); }, ErrorCode::InvalidUsage, {"root", "out of range"});
    requireError([&] { g.reduce(buf.p, buf.p, 10, F, ReduceOp::Sum, -1, s); }, ErrorCode::InvalidUsage, {"root"});
    requireError([&] { g.send(buf.p, 10, F, rank, s); }, ErrorCode::InvalidUsage, {"peer is this rank"});
    requireError([&] { g.recv(buf.p, 10, F, n + 3, s); }, ErrorCode::InvalidUsage, {"peer", "out of range"});
    requireError([&] { g.allGather(buf.p, nullptr, 10, DataType::Int64, s); }, ErrorCode::InvalidUsage,
                 {"recv buffer is null"});
    const int other = 1 - rank;
    requireError([&] { g.sendRecv(buf.p, 10, rank, buf.p, 10, other, F, s); }, ErrorCode::InvalidUsage,
                 {"sendrecv", "send peer is this rank"});
    requireError([&] { g.sendRecv(buf.p, 10, other, buf.p, 0, n, F, s); }, ErrorCode::InvalidUsage,
                 {"recv peer", "out of range"});
    requireError([&] { g.sendRecv(nullptr, 10, other, buf.p, 10, other, F, s); }, ErrorCode::InvalidUsage,
                 {"send buffer is null"});
    requireError([&] { g.sendRecv(buf.p, 10, other, nullptr, 10, other, F, s); }, ErrorCode::InvalidUsage,
                 {"recv buffer is null"});
    requireError([&] { g.sendRecv(buf.p, 10, other, buf.p, 10, other, badType, s); }, ErrorCode::InvalidUsage,
                 {"data type 99"});
    // Count 0 is a no-op whatever the buffers; then a real call still works on every rank.
    g.allReduce(nullptr, nullptr, 0, F, ReduceOp::Sum, s);
    g.allToAll(nullptr, nullptr, 0, DataType::Uint8, s);
    g.sendRecv(nullptr, 0, 1 - rank, nullptr, 0, 1 - rank, F, s);
    checkReducing(g, Reducing::AllReduce, F, ReduceOp::Sum, 1009, false, 0, rank, n, s);
  });
}

TEST(GpuCollectives, RankSkippingACallEndsInAReportedTimeout) {
  PB_REQUIRE_GPU_NO_INIT();
  expectTimeoutsWhenARankSkipsACall(kSmall);
}

// Three ranks (gpu_wait_timeout 4 s, the same on every rank, as settings
// must be); rank 2 never joins an allreduce. Rank 1 calls at once and gives
// up at 4 s; rank 0 calls 2.5 s later, so its own limit would end its wait
// at 6.5 s: it must end soon after 4 s with rank 1's notice, and its next
// call must throw the same at once. Rank 0 waits in GpuCollectives::
// synchronize, or (userSync) in cudaStreamSynchronize, where only the
// notice watcher's thread can hear the notice and end the kernel.
void expectPeersToLearnOfAFailedRankAtOnce(bool userSync) {
  Settings settings = kSmall;
  settings["gpu_wait_timeout"] = "4";
  runGpuRanks(3, settings, [userSync](GpuCollectives& g, int rank, int, cudaStream_t s) {
    g.communicator().bootstrap().barrier();
    if (rank == 2) {  // stays (its leaving must not be what ends the others' waits) but never calls
      std::this_thread::sleep_for(std::chrono::seconds(8));
      return;
    }
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    DevBuf buf(100003 * 4);
    const auto start = std::chrono::steady_clock::now();
    g.allReduce(buf.p, buf.p, 100003, DataType::Float32, ReduceOp::Sum, s);
    if (rank == 1) {
      requireError([&] { g.synchronize(s); }, ErrorCode::Timeout, {"rank 1", "timed out in allreduce"});
      return;
    }
    const std::vector<std::string> named{"rank 0", "rank 1 (host", "told its peers", "timed out in allreduce"};
    if (userSync) {
      cudaError_t synced = cudaStreamSynchronize(s);  // the kernel ends (its wait aborted), no CUDA error
      if (synced != cudaSuccess) throw std::runtime_error(std::string("cudaStreamSynchronize: ") + cudaGetErrorString(synced));
      requireError([&] { g.checkErrors(); }, ErrorCode::Remote, named);
    } else {
      requireError([&] { g.synchronize(s); }, ErrorCode::Remote, named);
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("rank 0 learned of rank 1's failure %.2f s after its call (its own limit: 4 s; %s)\n", took,
                userSync ? "cudaStreamSynchronize" : "synchronize");
    if (took > 3.5) throw std::runtime_error("rank 0 learned of rank 1's failure only after " + std::to_string(took) + " s");
    requireError([&] { g.allReduce(buf.p, buf.p, 1, DataType::Float32, ReduceOp::Sum, s); }, ErrorCode::Remote,
                 {"told its peers"});
  }, std::chrono::seconds(55));
}

TEST(GpuCollectives, ARankThatFailsTellsItsPeersAtOnce) {
  PB_REQUIRE_GPU_NO_INIT();
  expectPeersToLearnOfAFailedRankAtOnce(false);
}

TEST(GpuCollectives, ARankThatFailsEndsAPeersCudaStreamSynchronize) {
  PB_REQUIRE_GPU_NO_INIT();
  expectPeersToLearnOfAFailedRankAtOnce(true);
}

// Rank 1 skips an allreduce and reports a failure of the communicator's
// instead (gpu_wait_timeout 20 s): rank 0's kernel ends within seconds in
// the user's cudaStreamSynchronize, and checkErrors() and the next call
// throw rank 1's reason.
TEST(GpuCollectives, ACommunicatorsReportedFailureEndsAWaitingCall) {
  PB_REQUIRE_GPU_NO_INIT();
  Settings settings = kSmall;
  settings["gpu_wait_timeout"] = "20";
  runGpuRanks(2, settings, [](GpuCollectives& g, int rank, int, cudaStream_t s) {
    g.communicator().bootstrap().barrier();
    DevBuf buf(100003 * 4);
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      g.communicator().reportFailure("rank 1 found its input corrupt");
      g.communicator().bootstrap().barrier();
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    g.allReduce(buf.p, buf.p, 100003, DataType::Float32, ReduceOp::Sum, s);
    cudaError_t synced = cudaStreamSynchronize(s);
    if (synced != cudaSuccess) throw std::runtime_error(std::string("cudaStreamSynchronize: ") + cudaGetErrorString(synced));
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("rank 0's allreduce ended %.3f s after its call (its limit: 20 s)\n", took);
    if (took > 5) throw std::runtime_error("the allreduce ended only after " + std::to_string(took) + " s");
    const std::vector<std::string> named{"rank 0 (host", "rank 1 (host", "found its input corrupt"};
    requireError([&] { g.checkErrors(); }, ErrorCode::Remote, named);
    requireError([&] { g.allReduce(buf.p, buf.p, 1, DataType::Float32, ReduceOp::Sum, s); }, ErrorCode::Remote, named);
    g.communicator().bootstrap().barrier();
  }, std::chrono::seconds(55));
}

TEST(GpuCollectives, AbortEndsKernelsWaitingForARankThatSkips) {
  PB_REQUIRE_GPU_NO_INIT();
  const std::vector<SkippedCall> calls = skippableCalls();
  expectAbortEndsASkippedCall(kSmall, 2, calls[0]);  // LL allreduce
  expectAbortEndsASkippedCall(kSmall, 2, calls[1]);  // pipelined allreduce
}
