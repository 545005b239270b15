// SwitchChannel on the lent machines: the peers backend (cudaipc
// mappings) runs the same device calls and collective kernels as the
// multicast one, so the algorithm, its barriers and its results are tested
// for real here; multicast itself is never created (those machines set
// NCCL_NVLS_ENABLE=0, and these tests check that it is refused by name).
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gpu_coll_check.hpp"
#include "gpu_test_util.hpp"
#include "plugboard/gpu/switch_channel.hpp"

using namespace plugboard;
using namespace plugboard::test;

namespace {

constexpr uint64_t kLL = 4096;

/// Small LL thresholds and the smallest switch buffer, so calls of a few
/// hundred KiB already take several rounds; 4 blocks.
Settings switchSettings(const std::string& mode) {
  return {{"gpu_switch", mode},
          {"gpu_switch_bytes", "65536"},
          {"gpu_allreduce_small_bytes", std::to_string(kLL)},
          {"gpu_blocks_small_bytes", std::to_string(kLL)},
          {"gpu_blocks", "4"},
          {"gpu_threads", "256"}};
}

void expectBackend(GpuCollectives& g, const std::string& want) {
  if (g.switchBackend() != want)
    throw std::runtime_error("switch backend is \"" + g.switchBackend() + "\", expected \"" + want + "\"");
}

/// Counts around the LL threshold, odd ones, and ones spanning several
/// 64 KiB rounds (100003 floats: 7 rounds).
std::vector<size_t> switchCounts(int n, size_t E) {
  const size_t ll = kLL / (n - 1) / E;
  return {ll + 1, 1001, 4097, 16384, 100003};
}

void switchSweep(GpuCollectives& g, int rank, int n, cudaStream_t s) {
  expectBackend(g, "peers");
  for (DataType t : {DataType::Float32, DataType::Float16, DataType::BFloat16}) {
    const std::vector<size_t> counts = switchCounts(n, dataTypeSize(t));
    const std::vector<ReduceOp> ops =
        t == DataType::Float32 ? std::vector<ReduceOp>{ReduceOp::Sum}
                               : std::vector<ReduceOp>{ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max};
    for (size_t count : counts)
      for (ReduceOp op : ops)
        for (bool inPlace : {false, true}) {
          checkReducing(g, Reducing::AllReduce, t, op, count, inPlace, 0, rank, n, s);
          checkMoving(g, Moving::AllGather, t, count, inPlace, 0, rank, n, s);
        }
  }
  // Other collectives between switch calls keep their own state.
  reducingMatrix(g, rank, n, s, {DataType::Int32}, {ReduceOp::Sum}, {7, 100003});
  checkReducing(g, Reducing::AllReduce, DataType::Float16, ReduceOp::Max, 100003, false, 0, rank, n, s);
}

}  // namespace

TEST(GpuSwitch, PeersBackendAllReduceAndAllGatherTwoRanks) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(2, switchSettings("peers"), switchSweep);
}

TEST(GpuSwitch, PeersBackendAllReduceAndAllGatherThreeRanks) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(3, switchSettings("peers"), switchSweep);
}

TEST(GpuSwitch, PeersBackendWithSmallChunksTwoRanks) {
  PB_REQUIRE_GPU_NO_INIT();
  Settings s = switchSettings("peers");
  s["gpu_switch_chunk_bytes"] = "1040";  // cells of 1040 bytes: many rounds, odd multiples of 16
  runGpuRanks(2, s, switchSweep);
}

TEST(GpuSwitch, PeersBackendWithRecvAlignedDifferentlyFromSend) {
  PB_REQUIRE_GPU_NO_INIT();
  // recv 4 bytes past a 16-byte boundary: copy-out goes byte by byte, the
  // next round's copy-in in 16-byte words (a block must sync between them).
  runGpuRanks(2, switchSettings("peers"), [](GpuCollectives& g, int rank, int n, cudaStream_t s) {
    expectBackend(g, "peers");
    const size_t count = 100003;
    const DataType t = DataType::Float32;
    DevBuf in(count * 4), out(count * 4 + 16);
    for (int rep = 0; rep < 3; ++rep) {
      in.upload(inputs(count, rep, rank, t, ReduceOp::Sum));
      out.poison();
      g.allReduce(in.p, out.p + 4, count, t, ReduceOp::Sum, s);
      sync(s, g);
      expectValues(out.download(4, count * 4), count, t, ReduceOp::Sum,
                   [&](size_t i) { return expectedValue(rep + i, n, t, ReduceOp::Sum); },
                   "allreduce into recv + 4, repeat " + std::to_string(rep));
    }
  });
}

TEST(GpuSwitch, SizesThatDifferBetweenRanksFailOnEveryRank) {
  PB_REQUIRE_GPU_NO_INIT();
  auto results = runRanks(2, std::chrono::seconds(110), [](int rank, int n, const UniqueId& id) {
    check(cudaSetDevice(0), "cudaSetDevice");
    setenv("PLUGBOARD_TRANSPORTS", "cudaipc,ethernet", 1);
    Communicator comm(loopbackBootstrap(rank, n, id));
    try {
      SwitchChannel channel(comm, rank == 0 ? 4096 : 8192, SwitchMode::Peers);
      throw std::runtime_error("a SwitchChannel of different sizes was built");
    } catch (const Error& e) {
      if (std::string(e.what()).find("rank 0: 4096, rank 1: 8192") == std::string::npos)
        throw std::runtime_error(std::string("the error does not name both sizes: ") + e.what());
    }
    // The communicator still works after the refusal.
    SwitchChannel channel(comm, 8192, SwitchMode::Peers);
  });
  expectAllPassed(results);
}

TEST(GpuSwitch, AutoTakesNoSwitchAlgorithmsWithoutMulticast) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(2, switchSettings("auto"), [](GpuCollectives& g, int rank, int n, cudaStream_t s) {
    expectBackend(g, "");
    checkReducing(g, Reducing::AllReduce, DataType::Float32, ReduceOp::Sum, 100003, false, 0, rank, n, s);
  }, std::chrono::seconds(110), [](int, Settings&) {
    // Only restricts: whatever the machine says, this test runs without multicast.
    setenv("PLUGBOARD_NVLS_ENABLE", "0", 1);
  });
}

TEST(GpuSwitch, MulticastAskedForIsRefusedByNameWhenDisabled) {
  PB_REQUIRE_GPU_NO_INIT();
  if (!std::filesystem::exists(std::string(PLUGBOARD_TEST_PLUGIN_DIR) + "/libplugboard-nvls.so"))
    GTEST_SKIP() << "the nvls plugin is not built here (its refusal is what this test reads)";
  auto results = runRanks(2, std::chrono::seconds(110), [](int rank, int n, const UniqueId& id) {
    check(cudaSetDevice(0), "cudaSetDevice");
    setenv("NCCL_NVLS_ENABLE", "0", 1);  // restricts only (the lent machines set it already)
    Communicator comm(loopbackBootstrap(rank, n, id));
    try {
      SwitchChannel channel(comm, 1 << 20, SwitchMode::Multicast);
      throw std::runtime_error("SwitchMode::Multicast succeeded with NCCL_NVLS_ENABLE=0");
    } catch (const Error& e) {
      // The nvls plugin (built beside the library) refuses by the variable's name, on every rank.
      const std::string what = e.what();
      for (const char* want : {"disabled by NCCL_NVLS_ENABLE=0", "rank 0: nvls", "rank 1: nvls"})
        if (what.find(want) == std::string::npos)
          throw std::runtime_error(std::string("refusal lacks \"") + want + "\": " + what);
    }
  });
  expectAllPassed(results);
}

namespace switch_test {

/// Each rank writes (rank + 1) * (i + 1) as floats; rank r reduces and
/// broadcasts slice r; then every rank checks the sum everywhere. Twice
/// (16-byte vectors, then single floats), so the barrier counters are reused.
__global__ void sliceSumKernel(SwitchChannelDeviceHandle sw, uint64_t floats, unsigned* wrong, unsigned* failed) {
  float* mine = reinterpret_cast<float*>(sw.local);
  const uint64_t words = floats / 4, slice = words / sw.nranks;
  for (int round = 1; round <= 2; ++round) {
    for (uint64_t i = threadIdx.x; i < floats; i += blockDim.x) mine[i] = float((sw.rank + 1) * round) * (i + 1);
    __syncthreads();
    if (threadIdx.x == 0) {
      sw.arrive(0);
      if (!sw.wait(0, kDefaultWaitTimeoutNs, nullptr)) atomicAdd(failed, 1u);
    }
    __syncthreads();
    if (round == 1) {  // 16-byte vectors
      for (uint64_t w = sw.rank * slice + threadIdx.x; w < (sw.rank + 1) * slice; w += blockDim.x)
        sw.broadcast(16 * w, sw.reduce<SwitchType::Float32, SwitchOp::Sum>(16 * w));
    } else {  // one float at a time
      for (uint64_t f = 4 * sw.rank * slice + threadIdx.x; f < 4 * (sw.rank + 1) * slice; f += blockDim.x)
        sw.broadcast(4 * f, sw.reduce<SwitchType::Float32, SwitchOp::Sum, 1>(4 * f));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      sw.arrive(0);
      if (!sw.wait(0, kDefaultWaitTimeoutNs, nullptr)) atomicAdd(failed, 1u);
    }
    __syncthreads();
    const float ranksSum = float(sw.nranks * (sw.nranks + 1) / 2 * round);
    for (uint64_t i = threadIdx.x; i < slice * 4 * sw.nranks; i += blockDim.x)
      if (mine[i] != ranksSum * (i + 1)) atomicAdd(wrong, 1u);
    __syncthreads();
    if (threadIdx.x == 0) {  // nobody rewrites its buffer while another still checks
      sw.arrive(0);
      if (!sw.wait(0, kDefaultWaitTimeoutNs, nullptr)) atomicAdd(failed, 1u);
    }
    __syncthreads();
  }
}

}  // namespace switch_test

TEST(GpuSwitch, DeviceReduceBroadcastAndBarrierOverPeers) {
  PB_REQUIRE_GPU_NO_INIT();
  auto results = runRanks(3, std::chrono::seconds(110), [](int rank, int n, const UniqueId& id) {
    int devices = 0;
    check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
    check(cudaSetDevice(rank % devices), "cudaSetDevice");
    setenv("PLUGBOARD_TRANSPORTS", "cudaipc,ethernet", 1);
    Communicator comm(loopbackBootstrap(rank, n, id));
    SwitchChannel channel(comm, 3 * 4096 * sizeof(float), SwitchMode::Peers);
    if (channel.backend() != SwitchBackend::Peers) throw std::runtime_error("not the peers backend");
    unsigned* counters = nullptr;
    check(cudaMalloc(&counters, 2 * sizeof(unsigned)), "cudaMalloc");
    check(cudaMemset(counters, 0, 2 * sizeof(unsigned)), "cudaMemset");
    switch_test::sliceSumKernel<<<1, 256>>>(channel.deviceHandle(), 3 * 4096, counters, counters + 1);
    check(cudaDeviceSynchronize(), "sliceSumKernel");
    unsigned host[2];
    check(cudaMemcpy(host, counters, sizeof(host), cudaMemcpyDeviceToHost), "download");
    cudaFree(counters);
    if (host[0] || host[1])
      throw std::runtime_error(std::to_string(host[0]) + " wrong floats, " + std::to_string(host[1]) + " failed waits");
  });
  expectAllPassed(results);
}
