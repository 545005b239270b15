// GpuCollectives over PortChannels: pairs whose transport does not map peer
// memory. Two ranks forced onto ethernet (CUDA memory staged by the core),
// and a 4-rank communicator split over two fake hosts (host_id) where pairs
// on one host map each other (cudaipc) and pairs across go staged over
// ethernet. Every result is checked against the host reference.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gpu_coll_check.hpp"
#include "gpu_test_util.hpp"

using namespace plugboard;
using namespace plugboard::test;

namespace {

/// Small slots so every pipeline wraps: 2 blocks x 4 slots of 8 KiB per
/// peer, so PortChannel acks come in batches of 2. The LL threshold is left
/// high to show that with an unmapped pair no call takes the LL path; 1009
/// floats take the one-shot pipeline, 100003 the two-shot one (the host
/// relay is off here: relaySmall() turns it on).
const Settings kPortSmall = {{"gpu_allreduce_small_bytes", "65536"}, {"gpu_allreduce_oneshot_bytes", "16384"},
                             {"gpu_scratch_bytes", "65536"},         {"gpu_blocks", "2"},
                             {"gpu_threads", "256"},                 {"gpu_chunk_bytes", "8192"},
                             {"gpu_host_relay_bytes", "0"}};

/// kPortSmall with calls of up to 8 KiB (the larger of a rank's input and
/// output) through the host relay: on 2 ranks an allreduce of 2048 floats
/// goes through the host, 2049 through the pipeline; an allgather of 1024
/// floats a rank through the host, 1025 through the pipeline.
Settings relaySmall() {
  Settings s = kPortSmall;
  s["gpu_host_relay_bytes"] = "8192";
  return s;
}

/// The same with the fewest slots, 2 per block: one ack per message.
Settings twoSlots() {
  Settings s = kPortSmall;
  s["gpu_scratch_bytes"] = "32768";
  return s;
}

/// Small staging slots so the staging rings wrap too.
void useSmallStaging() {
  setenv("PLUGBOARD_STAGING_CHUNK_BYTES", "65536", 1);
  setenv("PLUGBOARD_STAGING_SLOTS", "4", 1);
}

/// Every pair over ethernet, CUDA memory staged.
void overEthernet(int, Settings&) {
  setenv("PLUGBOARD_TRANSPORTS", "ethernet", 1);
  useSmallStaging();
}

/// Throws unless the pair (me, peer) moves CUDA memory staged (or not).
void expectStaged(Communicator& comm, int peer, bool staged) {
  const std::string why = comm.selectionReason(peer, MemoryKind::Cuda);
  if ((why.find("staged") != std::string::npos) != staged)
    throw std::runtime_error("rank " + std::to_string(comm.rank()) + " -> " + std::to_string(peer) + ": expected " +
                             (staged ? "" : "no ") + "staging, selection says: " + why);
}

const std::vector<DataType> kPortTypes = {DataType::Float32, DataType::Float16, DataType::Int32};
const std::vector<ReduceOp> kPortOps = {ReduceOp::Sum, ReduceOp::Max};
/// 0, tiny, odd, below the LL threshold, many times the scratch.
const std::vector<size_t> kPortCounts = {0, 1, 7, 1009, 100003};

}  // namespace

TEST(GpuCollectivesPort, EveryCollectiveOverStagedEthernetMatchesReferenceTwoRanks) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(2, kPortSmall, [](GpuCollectives& g, int rank, int n, cudaStream_t s) {
    expectStaged(g.communicator(), 1 - rank, true);
    reducingMatrix(g, rank, n, s, kPortTypes, kPortOps, kPortCounts);
    for (DataType t : {DataType::BFloat16, DataType::Uint8})
      for (ReduceOp op : kPortOps)
        for (size_t count : kPortCounts)
          for (bool inPlace : {false, true})
            checkReducing(g, Reducing::AllReduce, t, op, count, inPlace, 0, rank, n, s);
    movingMatrix(g, rank, n, s, kPortTypes, kPortCounts);
    for (size_t count : {size_t(7), size_t(100003)}) sendRecvPairs(g, rank, n, s, DataType::Float16, count);
    // A second object on the same communicator, alive beside the first:
    // its own scratch, proxy and channels; then both are destroyed.
    GpuCollectives second(g.communicator());
    checkReducing(second, Reducing::AllReduce, DataType::Float32, ReduceOp::Sum, 100003, false, 0, rank, n, s);
    checkReducing(g, Reducing::AllReduce, DataType::Float32, ReduceOp::Sum, 1009, true, 0, rank, n, s);
  }, std::chrono::seconds(110), overEthernet);
}

TEST(GpuCollectivesPort, RelayedCallsOfEveryTypeAndOpMatchReferenceBesidePipelinedOnes) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(2, relaySmall(), [](GpuCollectives& g, int rank, int n, cudaStream_t s) {
    expectStaged(g.communicator(), 1 - rank, true);
    const ReduceOp ops[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg};
    for (DataType t : kEveryDataType)
      for (ReduceOp op : ops)
        for (size_t count : {size_t(1), size_t(7), size_t(1009)})
          for (bool inPlace : {false, true}) {
            checkReducing(g, Reducing::AllReduce, t, op, count, inPlace, 0, rank, n, s);
            checkReducing(g, Reducing::Reduce, t, op, count, inPlace, static_cast<int>(count % 2), rank, n, s);
            checkReducing(g, Reducing::ReduceScatter, t, op, count, inPlace, 0, rank, n, s);
          }
    // Relayed and pipelined calls in turn, on either side of the 8 KiB line.
    reducingMatrix(g, rank, n, s, {DataType::Float32, DataType::Float16}, {ReduceOp::Sum, ReduceOp::Max},
                   {0, 1, 2048, 2049, 100003, 7});
    movingMatrix(g, rank, n, s, {DataType::Float32, DataType::Uint8}, {1, 7, 1024, 1025, 100003, 1009});
  }, std::chrono::seconds(110), overEthernet);
}

TEST(GpuCollectivesPort, RelayedCallsReplayInACapturedGraph) {
  PB_REQUIRE_GPU_NO_INIT();
  // checkGraphReplays' 500-float allreduces (2000 bytes) go through the relay here.
  runGpuRanks(2, relaySmall(), checkGraphReplays, std::chrono::seconds(110), overEthernet);
}

TEST(GpuCollectivesPort, RelayedCallsOnMixedMappedAndStagedPairsFourRanks) {
  PB_REQUIRE_GPU_NO_INIT();
  auto twoFakeHosts = [](int rank, Settings& overrides) {
    overrides["host_id"] = rank < 2 ? "fake-a" : "fake-b";
    useSmallStaging();
  };
  runGpuRanks(4, relaySmall(), [](GpuCollectives& g, int rank, int n, cudaStream_t s) {
    for (Reducing kind : {Reducing::AllReduce, Reducing::Reduce, Reducing::ReduceScatter})
      for (DataType t : {DataType::Float32, DataType::BFloat16, DataType::Int64})
        for (size_t count : {size_t(1), size_t(255), size_t(100003)})
          for (bool inPlace : {false, true}) checkReducing(g, kind, t, ReduceOp::Sum, count, inPlace, 2, rank, n, s);
    movingMatrix(g, rank, n, s, {DataType::Float16}, {1, 1023, 100003});  // 4 x 1023 halves: relayed
  }, std::chrono::seconds(110), twoFakeHosts);
}

namespace {

/// Rank 1 never joins a relayed allreduce of count floats and tears down:
/// rank 0's call ends within the timeouts in an error that names this
/// rank, the relay and the collective, and the next call fails the same way.
void expectSkippedRelayedCallNamed(size_t count) {
  Settings settings = relaySmall();
  settings["timeout"] = "10";
  settings["gpu_wait_timeout"] = "2";
  runGpuRanks(2, settings, [count](GpuCollectives& g, int rank, int, cudaStream_t s) {
    if (rank == 1) return;  // never joins the call; its teardown closes its host collectives
    DevBuf buf(count * 4);
    const auto start = std::chrono::steady_clock::now();
    g.allReduce(buf.p, buf.p, count, DataType::Float32, ReduceOp::Sum, s);
    // Either the host learns that rank 1 left (Remote) or the device wait
    // for the host ends (Timeout): both name this rank, the relay and the call.
    ErrorCode code = ErrorCode::Internal;
    std::string what;
    try {
      g.synchronize(s);
    } catch (const Error& e) {
      code = e.code();
      what = e.what();
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (code != ErrorCode::Remote && code != ErrorCode::Timeout)
      throw std::runtime_error("a skipped relayed call ended in code " + std::string(errorCodeName(code)) + ": " + what);
    for (const char* needle : {"rank 0", "relay", "allreduce", "cannot be used any more"})
      if (what.find(needle) == std::string::npos)
        throw std::runtime_error("missing '" + std::string(needle) + "' in: " + what);
    if (code == ErrorCode::Remote && what.find("rank 1") == std::string::npos)
      throw std::runtime_error("the host's error does not name rank 1: " + what);
    if (took > 12) throw std::runtime_error("the skipped relayed call ended after " + std::to_string(took) + " s");
    std::printf("skipped relayed allreduce of %zu floats: %s after %.2f s: %s\n", count, errorCodeName(code), took,
                what.c_str());
    requireError([&] { g.allReduce(buf.p, buf.p, count, DataType::Float32, ReduceOp::Sum, s); }, code, {"relay"});
  }, std::chrono::seconds(55), overEthernet);
}

}  // namespace

TEST(GpuCollectivesPort, RankSkippingARelayedCallEndsInAnErrorNamingTheRelay) {
  PB_REQUIRE_GPU_NO_INIT();
  expectSkippedRelayedCallNamed(100);  // 400 bytes: a posted call
}

TEST(GpuCollectivesPort, RankSkippingAPacketCallEndsInAnErrorNamingItsCollective) {
  PB_REQUIRE_GPU_NO_INIT();
  expectSkippedRelayedCallNamed(16);  // 64 bytes: packets, which write no call word
}

TEST(GpuCollectivesPort, AbortEndsARelayedCallWaitingOnTheHost) {
  PB_REQUIRE_GPU_NO_INIT();
  Settings settings = relaySmall();
  settings["timeout"] = "10";
  expectAbortEndsASkippedCall(settings, 2, skippableCalls()[0], overEthernet);  // 100 floats: relayed
}

TEST(GpuCollectivesPort, SendRecvRingOverStagedEthernetTwoRanks) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(2, twoSlots(), [](GpuCollectives& g, int rank, int n, cudaStream_t s) {
    expectStaged(g.communicator(), 1 - rank, true);
    sendRecvRingMatrix(g, rank, n, s, DataType::Float16, {0, 1, 7, 1009, 100003});
  }, std::chrono::seconds(110), overEthernet);
}

// Ranks {0, 1} claim host "fake-a", {2, 3} host "fake-b": cudaipc within a
// fake host (mapped, direct stores), staged ethernet across (PortChannels).
TEST(GpuCollectivesPort, MixedMappedAndStagedPairsFourRanks) {
  PB_REQUIRE_GPU_NO_INIT();
  auto twoFakeHosts = [](int rank, Settings& overrides) {
    overrides["host_id"] = rank < 2 ? "fake-a" : "fake-b";
    useSmallStaging();
  };
  runGpuRanks(4, kPortSmall, [](GpuCollectives& g, int rank, int n, cudaStream_t s) {
    for (int p = 0; p < n; ++p)
      if (p != rank) expectStaged(g.communicator(), p, (p < 2) != (rank < 2));
    const std::vector<DataType> types = {DataType::Float32, DataType::Float16};
    for (Reducing kind : {Reducing::AllReduce, Reducing::ReduceScatter, Reducing::Reduce})
      for (DataType t : types)
        for (size_t count : {size_t(1), size_t(1009), size_t(100003)})
          for (bool inPlace : {false, true}) checkReducing(g, kind, t, ReduceOp::Sum, count, inPlace, 1, rank, n, s);
    for (DataType t : types)
      for (size_t count : {size_t(7), size_t(1009), size_t(100003)})
        for (bool inPlace : {false, true}) {
          checkMoving(g, Moving::AllGather, t, count, inPlace, 0, rank, n, s);
          checkMoving(g, Moving::AllToAll, t, count, inPlace, 0, rank, n, s);
          checkMoving(g, Moving::Broadcast, t, count, inPlace, 2, rank, n, s);
        }
    sendRecvPairs(g, rank, n, s, DataType::Uint8, 100003);
    // Ring 0 -> 1 -> 2 -> 3 -> 0: each rank's sendRecv has one mapped and one staged direction.
    for (bool inPlace : {false, true}) checkSendRecvRing(g, rank, n, s, DataType::Float16, 100003, inPlace);
  }, std::chrono::seconds(110), twoFakeHosts);
}

// The default grid (128 blocks of 512 threads) on both ranks: two ranks on
// one GPU under CUDA MPS then fill every SM slot with kernels that wait for
// each other's staged signals, so a signal must land without an SM (a
// kernel per signal, as before, deadlocked until gpu_wait_timeout).
TEST(GpuCollectivesPort, DefaultGridOverStagedEthernetTwoRanks) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(2, {{"gpu_wait_timeout", "10"}}, [](GpuCollectives& g, int rank, int n, cudaStream_t s) {
    expectStaged(g.communicator(), 1 - rank, true);
    for (size_t count : {size_t(1009), size_t(262147), size_t(3) << 20 | 1})
      for (bool inPlace : {false, true}) {
        checkReducing(g, Reducing::AllReduce, DataType::Float32, ReduceOp::Sum, count, inPlace, 0, rank, n, s);
        checkMoving(g, Moving::AllGather, DataType::Float16, count, inPlace, 0, rank, n, s);
      }
  }, std::chrono::seconds(110), overEthernet);
}

TEST(GpuCollectivesPort, CapturedGraphReplaysOverStagedEthernet) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(2, kPortSmall, checkGraphReplays, std::chrono::seconds(110), overEthernet);
}

TEST(GpuCollectivesPort, RankSkippingACallOverStagedEthernetEndsInAReportedTimeout) {
  PB_REQUIRE_GPU_NO_INIT();
  // The rank that skips tears its objects down at once: what the other's
  // proxy still sends it then is refused, and that proxy's send gives up
  // only after the communicator's `timeout`, which the destructor waits
  // for. 10 s keeps the teardown inside the test's bound.
  Settings settings = kPortSmall;
  settings["timeout"] = "10";
  const std::vector<SkippedCall> calls = skippableCalls();
  // The message says where the network path stands.
  const std::vector<std::string> state = {"The network path to rank", "proxy: handled", "transport posted"};
  expectTimeoutWhenARankSkips(settings, 2, calls[1], overEthernet, state);  // pipelined allreduce
  expectTimeoutWhenARankSkips(settings, 3, calls[4], overEthernet, state);  // alltoall
}

TEST(GpuCollectivesPort, AbortEndsKernelsWaitingOverStagedEthernet) {
  PB_REQUIRE_GPU_NO_INIT();
  Settings settings = kPortSmall;
  settings["timeout"] = "10";  // the teardown after the abort, as above
  expectAbortEndsASkippedCall(settings, 2, skippableCalls()[1], overEthernet);  // pipelined allreduce
}
