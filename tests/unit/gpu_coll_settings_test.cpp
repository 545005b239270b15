// The GPU collectives' settings as GpuCollSettings::read checks them (the
// measured defaults, a Config error naming the setting for each bad value)
// and the kernel path each call takes from them. Host code only; built
// where the library has its CUDA path.
#include <gtest/gtest.h>

#ifdef PLUGBOARD_HAVE_CUDA

#include <string>

#include "env_guard.hpp"
#include "gpu/collectives/algorithm.hpp"
#include "gpu/collectives/collectives_impl.hpp"
#include "plugboard/config.hpp"
#include "plugboard/error.hpp"
#include "plugboard/gpu/switch_channel.hpp"

using namespace plugboard;
using plugboard::test::EnvGuard;

namespace {

const char* const kGpuVariables[] = {
    "PLUGBOARD_GPU_ALLREDUCE_SMALL_BYTES", "PLUGBOARD_GPU_BROADCAST_SMALL_BYTES", "PLUGBOARD_GPU_ALLREDUCE_ONESHOT_BYTES",
    "PLUGBOARD_GPU_SCRATCH_BYTES",         "PLUGBOARD_GPU_BLOCKS",                "PLUGBOARD_GPU_THREADS",
    "PLUGBOARD_GPU_CHUNK_BYTES",           "PLUGBOARD_GPU_WAIT_SPINS",            "PLUGBOARD_GPU_PORT_BLOCKS",
    "PLUGBOARD_GPU_PORT_SLOTS",            "PLUGBOARD_GPU_SWITCH",                "PLUGBOARD_GPU_SWITCH_BYTES",
    "PLUGBOARD_GPU_SWITCH_CHUNK_BYTES",    "PLUGBOARD_GPU_HOST_RELAY_BYTES",      "PLUGBOARD_FAILOVER"};

/// Settings read from yaml with no GPU variable of the environment in the way.
GpuCollSettings readFrom(const std::string& yaml) {
  EnvGuard env;
  for (const char* v : kGpuVariables) env.unset(v);
  return GpuCollSettings::read(Config::fromYamlText(yaml, "gpu.yaml"));
}

/// Expects a Config error whose message names `needle`.
void expectRejected(const std::string& yaml, const std::string& needle) {
  try {
    readFrom(yaml);
    FAIL() << "accepted: " << yaml;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Config) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "missing '" << needle << "' in: " << e.what();
  }
}

}  // namespace

TEST(GpuCollSettings, DefaultsAreTheMeasuredOnes) {
  const GpuCollSettings s = readFrom("");
  EXPECT_EQ(s.smallBytes, 4u << 20);
  EXPECT_EQ(s.broadcastSmallBytes, 1u << 20);
  EXPECT_EQ(s.oneShotBytes, 32u << 20);
  EXPECT_EQ(s.blocks, 128u);
  EXPECT_EQ(s.threads, 512u);
  EXPECT_EQ(s.chunkBytes, 512u << 10);
  EXPECT_EQ(s.portBlocks, 4u);
  EXPECT_EQ(s.portSlots, 8u);
}

TEST(GpuCollSettings, ThresholdsAcceptTheirRangeAndNameItOtherwise) {
  const GpuCollSettings s =
      readFrom("gpu_allreduce_small_bytes: 0\ngpu_broadcast_small_bytes: 16777216\ngpu_allreduce_oneshot_bytes: 0\n");
  EXPECT_EQ(s.smallBytes, 0u);
  EXPECT_EQ(s.broadcastSmallBytes, 16u << 20);
  EXPECT_EQ(s.oneShotBytes, 0u);
  expectRejected("gpu_allreduce_small_bytes: 16777217\n", "gpu_allreduce_small_bytes must be between 0 and 16777216");
  expectRejected("gpu_broadcast_small_bytes: -1\n", "gpu_broadcast_small_bytes");
  expectRejected("gpu_blocks_small_bytes: 16777217\n", "gpu_blocks_small_bytes must be between 0 and 16777216");
  expectRejected("gpu_allreduce_oneshot_bytes: -5\n", "gpu_allreduce_oneshot_bytes");
}

TEST(GpuCollSettings, LaunchShapeErrorsSayWhatToChange) {
  expectRejected("gpu_threads: 100\n", "gpu_threads must be a multiple of 32");
  expectRejected("gpu_threads: 1024\n", "gpu_threads must be between 64 and 512");
  expectRejected("gpu_blocks: 0\n", "gpu_blocks");
  expectRejected("gpu_chunk_bytes: 1000\n", "gpu_chunk_bytes");
  expectRejected("gpu_chunk_bytes: 1032\n", "multiple of 16");
  expectRejected("gpu_scratch_bytes: 65536\ngpu_blocks: 4\ngpu_chunk_bytes: 16384\n", "raise it to 131072");
  expectRejected("gpu_port_blocks: 0\n", "gpu_port_blocks must be between 1 and 128");
  expectRejected("gpu_port_slots: 1\n", "gpu_port_slots must be between 2 and 1024");
}

TEST(GpuCollectivesPath, DefaultsOnTwoRanksFollowTheMeasuredCrossovers) {
  using gpucoll::ReducePath;
  const GpuCollSettings s = readFrom("");
  const gpucoll::CommShape two{2, false};
  EXPECT_EQ(gpucoll::reducePath(s, two, 8), ReducePath::LL);
  EXPECT_EQ(gpucoll::reducePath(s, two, (4 << 20) - 4), ReducePath::LL);
  EXPECT_EQ(gpucoll::reducePath(s, two, 4 << 20), ReducePath::OneShot);
  EXPECT_EQ(gpucoll::reducePath(s, two, (32 << 20) - 4), ReducePath::OneShot);
  EXPECT_EQ(gpucoll::reducePath(s, two, 32 << 20), ReducePath::TwoShot);
  EXPECT_TRUE(gpucoll::broadcastUsesLL(s, two, (1 << 20) - 1));
  EXPECT_FALSE(gpucoll::broadcastUsesLL(s, two, 1 << 20));
  EXPECT_TRUE(gpucoll::blocksUseLL(s, two, (4 << 20) - 1));  // allgather, alltoall, reducescatter: per rank block
  EXPECT_FALSE(gpucoll::blocksUseLL(s, two, 4 << 20));
}

TEST(GpuCollectivesPath, OneShotBeyondTwoRanksOnlyWhileItsExtraBytesAreFew) {
  using gpucoll::ReducePath;
  const GpuCollSettings s = readFrom("gpu_allreduce_small_bytes: 0\ngpu_host_relay_bytes: 0\n");
  const gpucoll::CommShape four{4, false}, fourPorted{4, true};
  // Four ranks: one-shot sends 3 x bytes, two-shot 1.5 x: extra 1.5 x bytes.
  EXPECT_EQ(gpucoll::reducePath(s, four, 680 << 10), ReducePath::OneShot);   // extra 1020 KiB
  EXPECT_EQ(gpucoll::reducePath(s, four, 684 << 10), ReducePath::TwoShot);   // extra 1026 KiB
  EXPECT_EQ(gpucoll::reducePath(s, fourPorted, 64 << 10), ReducePath::OneShot);
  EXPECT_EQ(gpucoll::reducePath(s, fourPorted, 4 << 20), ReducePath::TwoShot);
  // Two ranks send the same bytes either way: only gpu_allreduce_oneshot_bytes decides.
  EXPECT_EQ(gpucoll::reducePath(s, {2, false}, 16 << 20), ReducePath::OneShot);
}

TEST(GpuCollectivesPath, SmallCallsWithAnUnmappedPairGoThroughTheHostRelay) {
  using gpucoll::ReducePath;
  const GpuCollSettings s = readFrom("");  // gpu_host_relay_bytes 64 KiB
  EXPECT_EQ(s.relayBytes, 64u << 10);
  const gpucoll::CommShape twoPorted{2, true}, twoMapped{2, false};
  EXPECT_EQ(gpucoll::reducePath(s, twoPorted, 1), ReducePath::Relay);
  EXPECT_EQ(gpucoll::reducePath(s, twoPorted, 64 << 10), ReducePath::Relay);
  EXPECT_EQ(gpucoll::reducePath(s, twoPorted, (64 << 10) + 2), ReducePath::OneShot);
  EXPECT_EQ(gpucoll::reducePath(s, twoMapped, 8), ReducePath::LL);  // every pair mapped: never the host
  EXPECT_TRUE(gpucoll::usesRelay(s, twoPorted, 64 << 10));  // any collective's larger side
  EXPECT_FALSE(gpucoll::usesRelay(s, twoPorted, (64 << 10) + 1));
  EXPECT_FALSE(gpucoll::usesRelay(s, twoPorted, 0));
  EXPECT_FALSE(gpucoll::usesRelay(s, twoMapped, 8));
  const GpuCollSettings off = readFrom("gpu_host_relay_bytes: 0\n");
  EXPECT_EQ(gpucoll::reducePath(off, twoPorted, 8), ReducePath::OneShot);
  EXPECT_FALSE(gpucoll::usesRelay(off, twoPorted, 8));
  expectRejected("gpu_host_relay_bytes: 16777217\n", "gpu_host_relay_bytes must be between 0 and 16777216");
}

// With failover on, every call over an unmapped pair goes through the host
// relay (whose host collectives fail over), the large ones in pieces of a
// 4 MiB area; without the relay nothing changes (and the set-up warns).
TEST(GpuCollectivesPath, WithFailoverEveryCallOverAnUnmappedPairGoesThroughTheRelay) {
  using gpucoll::ReducePath;
  const gpucoll::CommShape twoPorted{2, true}, twoMapped{2, false};
  const GpuCollSettings s = readFrom("failover: true\n");
  EXPECT_TRUE(s.relayAll);
  EXPECT_EQ(s.relayAreaBytes, gpucoll::kRelayPieceBytes);
  EXPECT_EQ(gpucoll::reducePath(s, twoPorted, 1ull << 30), ReducePath::Relay);
  EXPECT_TRUE(gpucoll::usesRelay(s, twoPorted, 1ull << 30));
  EXPECT_TRUE(gpucoll::relaysInPieces(s, (64 << 10) + 1));
  EXPECT_FALSE(gpucoll::relaysInPieces(s, 64 << 10));  // up to gpu_host_relay_bytes: one call, packets when small
  EXPECT_TRUE(gpucoll::p2pUsesRelay(s, twoPorted));
  EXPECT_FALSE(gpucoll::p2pUsesRelay(s, twoMapped));
  EXPECT_EQ(gpucoll::reducePath(s, twoMapped, 8), ReducePath::LL);
  EXPECT_EQ(readFrom("failover: true\ngpu_host_relay_bytes: 8388608\n").relayAreaBytes, 8u << 20);
  const GpuCollSettings noRelay = readFrom("failover: true\ngpu_host_relay_bytes: 0\n");
  EXPECT_FALSE(noRelay.relayAll);
  EXPECT_FALSE(gpucoll::usesRelay(noRelay, twoPorted, 8));
  EXPECT_FALSE(gpucoll::p2pUsesRelay(noRelay, twoPorted));
  const GpuCollSettings plain = readFrom("");
  EXPECT_FALSE(plain.relayAll);
  EXPECT_EQ(plain.relayAreaBytes, 64u << 10);
  EXPECT_FALSE(gpucoll::p2pUsesRelay(plain, twoPorted));
}

TEST(GpuCollectivesPath, ChunkCapSplitsOneSlotAmongTheStepsPeers) {
  const GpuCollSettings s = readFrom("");  // gpu_chunk_bytes 512 KiB
  EXPECT_EQ(gpucoll::pipelineChunkCap(s, {2, false}, 1), 512u << 10);
  EXPECT_EQ(gpucoll::pipelineChunkCap(s, {4, false}, 1), 512u << 10);   // send / recv: one peer a step
  EXPECT_EQ(gpucoll::pipelineChunkCap(s, {4, false}, 3), 128u << 10);   // 170 KiB down to a power of two
  EXPECT_EQ(gpucoll::pipelineChunkCap(s, {8, false}, 7), 64u << 10);
  EXPECT_EQ(gpucoll::pipelineChunkCap(s, {4, true}, 3), 512u << 10);    // network messages stay large
  const GpuCollSettings odd = readFrom("gpu_chunk_bytes: 1040\n");
  EXPECT_EQ(gpucoll::pipelineChunkCap(odd, {2, false}, 1), 1040u);
  EXPECT_EQ(gpucoll::pipelineChunkCap(odd, {8, false}, 7), 1024u);      // never below 1 KiB
}

TEST(GpuCollectivesPath, ThresholdsScaleWithRanksAndUnmappedPairsNeverTakeLL) {
  using gpucoll::ReducePath;
  const GpuCollSettings s = readFrom("");
  const gpucoll::CommShape eight{8, false}, ported{2, true};
  EXPECT_EQ(gpucoll::reducePath(s, eight, 512 << 10), ReducePath::LL);        // 7 x 512 KiB < 4 MiB
  EXPECT_EQ(gpucoll::reducePath(s, eight, 1 << 20), ReducePath::TwoShot);     // one-shot's extra 5.25 MiB > 1 MiB
  EXPECT_EQ(gpucoll::reducePath(s, eight, 5 << 20), ReducePath::TwoShot);     // 35 MiB
  EXPECT_EQ(gpucoll::reducePath(s, ported, 8), ReducePath::Relay);
  EXPECT_EQ(gpucoll::reducePath(s, ported, 128 << 10), ReducePath::OneShot);
  EXPECT_EQ(gpucoll::reducePath(s, ported, 32 << 20), ReducePath::TwoShot);
  EXPECT_FALSE(gpucoll::broadcastUsesLL(s, ported, 8));
  EXPECT_FALSE(gpucoll::blocksUseLL(s, ported, 8));
  EXPECT_TRUE(gpucoll::blocksUseLL(s, eight, 512 << 10));  // 7 x 512 KiB < 4 MiB
  EXPECT_FALSE(gpucoll::blocksUseLL(s, eight, 1 << 20));
  // The LL area holds the largest call either threshold admits.
  EXPECT_EQ(gpucoll::largestLLBytes(s, 2), 4u << 20);
  EXPECT_EQ(gpucoll::largestLLBytes(s, 5), 1u << 20);
  EXPECT_EQ(gpucoll::largestLLBytes(readFrom("gpu_broadcast_small_bytes: 16777216\n"), 3), 8u << 20);
  EXPECT_EQ(gpucoll::largestLLBytes(readFrom("gpu_blocks_small_bytes: 12582912\n"), 3), 6u << 20);
}

TEST(GpuCollectivesPath, ZeroThresholdsTurnThePathsOff) {
  const GpuCollSettings s =
      readFrom("gpu_allreduce_small_bytes: 0\ngpu_allreduce_oneshot_bytes: 0\ngpu_blocks_small_bytes: 0\n");
  EXPECT_EQ(gpucoll::reducePath(s, {2, false}, 8), gpucoll::ReducePath::TwoShot);
  EXPECT_FALSE(gpucoll::blocksUseLL(s, {2, false}, 8));
}

TEST(GpuCollSettings, SwitchModeAndBufferAreCheckedByName) {
  const GpuCollSettings d = readFrom("{}");
  EXPECT_EQ(d.switchMode, "auto");  // multicast only where the nvls transport can create it
  EXPECT_EQ(d.switchBytes, 32ull << 20);
  for (const char* mode : {"auto", "multicast", "peers", "off"})
    EXPECT_EQ(readFrom(std::string("gpu_switch: ") + mode).switchMode, mode);
  expectRejected("gpu_switch: nvls", "gpu_switch must be auto, multicast, peers or off");
  expectRejected("gpu_switch_bytes: 4096", "gpu_switch_bytes");
  EXPECT_EQ(d.switchChunkBytes, 0u);  // cells as large as the buffer allows
  EXPECT_EQ(readFrom("gpu_switch_chunk_bytes: 131072").switchChunkBytes, 131072u);
  expectRejected("gpu_switch_chunk_bytes: 1000", "gpu_switch_chunk_bytes must be a multiple of 16");
}

TEST(SwitchChannel, SupportsWhatMultimemReducesOnHopper) {
  EXPECT_TRUE(SwitchChannel::supports(DataType::Float32, ReduceOp::Sum));
  EXPECT_FALSE(SwitchChannel::supports(DataType::Float32, ReduceOp::Max));  // no f32 min/max in multimem.ld_reduce
  for (DataType t : {DataType::Float16, DataType::BFloat16}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max}) EXPECT_TRUE(SwitchChannel::supports(t, op));
    EXPECT_FALSE(SwitchChannel::supports(t, ReduceOp::Prod));
    EXPECT_FALSE(SwitchChannel::supports(t, ReduceOp::Avg));
  }
  for (DataType t : {DataType::Int32, DataType::Float64, DataType::Float8E4M3})
    EXPECT_FALSE(SwitchChannel::supports(t, ReduceOp::Sum));
}

TEST(GpuCollectivesPath, SharedGpusCapTheGridSoEveryBlockIsResident) {
  using gpucoll::GpuSeat;
  using gpucoll::sharedGpuBlockCap;
  // One GPU each: the GPU's own capacity.
  EXPECT_EQ(sharedGpuBlockCap({{"a/0", 264}, {"a/1", 264}}), 264u);
  // Three ranks on one H100 (132 SMs x 2): 88 each (128 each hung).
  EXPECT_EQ(sharedGpuBlockCap({{"a/0", 264}, {"a/0", 264}, {"a/0", 264}}), 88u);
  // The most crowded GPU decides for every rank; the same bus on another host is another GPU.
  EXPECT_EQ(sharedGpuBlockCap({{"a/0", 264}, {"a/0", 264}, {"a/1", 264}, {"b/0", 264}}), 132u);
  EXPECT_EQ(sharedGpuBlockCap({{"a/0", 1}, {"a/0", 1}}), 1u);  // never 0
}

#endif  // PLUGBOARD_HAVE_CUDA
