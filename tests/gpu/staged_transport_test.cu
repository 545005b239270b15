// CUDA memory over transports that move host memory only (ethernet, and
// ucx / libfabric over tcp where they were built): the core stages it
// through pinned host slots. Checks PortChannels moving GPU buffers between
// two processes, and the write/signal ordering of plain connection calls in
// every direction (GPU->GPU, GPU->host, host->GPU).
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstring>
#include <vector>

#include "comm_fixture.hpp"
#include "gpu_test_util.hpp"
#include "multiproc.hpp"
#include "plugboard/gpu/port_channel.hpp"
#include "port_ping_pong.cuh"

using namespace plugboard;
using namespace plugboard::test;

namespace {

/// Only `transport`, over loopback TCP, with small staging slots so the
/// tests wrap both rings many times.
void useTransport(const std::string& transport) {
  setenv("PLUGBOARD_TRANSPORTS", transport.c_str(), 1);
  setenv("UCX_TLS", "tcp", 1);
  setenv("PLUGBOARD_LIBFABRIC_PROVIDER", "tcp", 1);
  setenv("PLUGBOARD_LIBFABRIC_IFACE", "lo", 1);
  setenv("PLUGBOARD_STAGING_CHUNK_BYTES", "65536", 1);
  setenv("PLUGBOARD_STAGING_SLOTS", "3", 1);
}

bool pluginBuilt(const std::string& transport) {
  struct stat st;
  return ::stat((std::string(PLUGBOARD_TEST_PLUGIN_DIR) + "/libplugboard-" + transport + ".so").c_str(), &st) == 0;
}

class GpuStaging : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!pluginBuilt(GetParam())) GTEST_SKIP() << GetParam() << " plugin was not built (its headers were not found)";
  }
};

void selectDevice(int rank) {
  int devices = 0;
  cudaGetDeviceCount(&devices);
  if (devices == 0 || cudaSetDevice(rank % devices) != cudaSuccess) throw std::runtime_error("cudaSetDevice failed");
}

uint8_t patternByte(int rank, int round, uint64_t i) { return static_cast<uint8_t>(rank * 41 + round * 7 + i * 5 + (i >> 12)); }

std::vector<uint8_t> pattern(int rank, int round, uint64_t n) {
  std::vector<uint8_t> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = patternByte(rank, round, i);
  return v;
}

void expectBytes(const std::vector<uint8_t>& got, int rank, int round, const char* what) {
  for (uint64_t i = 0; i < got.size(); ++i)
    if (got[i] != patternByte(rank, round, i))
      throw std::runtime_error(std::string(what) + ": byte " + std::to_string(i) + " of " + std::to_string(got.size()) +
                               " is wrong in round " + std::to_string(round));
}

}  // namespace

TEST_P(GpuStaging, PortChannelMovesGpuBuffersBetweenProcesses) {
  PB_REQUIRE_GPU_NO_INIT();
  const std::string transport = GetParam();
  auto results = runRanks(2, std::chrono::seconds(150), [&](int rank, int n, const UniqueId& id) {
    selectDevice(rank);
    useTransport(transport);
    Communicator comm(loopbackBootstrap(rank, n, id));
    // ethernet never takes CUDA memory; ucx/libfabric would where built with GPU support.
    if (transport == "ethernet" && comm.selectionReason(1 - rank, MemoryKind::Cuda).find("staged") == std::string::npos)
      throw std::runtime_error("expected staged CUDA memory: " + comm.selectionReason(1 - rank, MemoryKind::Cuda));
    auto conn = comm.connectAll(MemoryKind::Cuda).at(1 - rank);
    if (conn->transport() != transport) throw std::runtime_error("expected " + transport + ", got " + conn->transport());
    // 1 byte, an odd size inside one chunk, and kHalf (64 chunks of 64 KiB through 3 slots).
    pingPongOverPortChannel(comm, conn, {1, 4099, 65536 + 17, kHalf});
  });
  expectAllPassed(results);
}

// Rank 0 writes to rank 1 and signals a host semaphore after each write; the
// semaphore must not be seen before the staged data is in rank 1's memory.
TEST_P(GpuStaging, WritesThenSignalArriveInOrderInEveryDirection) {
  PB_REQUIRE_GPU_NO_INIT();
  const std::string transport = GetParam();
  auto results = runRanks(2, std::chrono::seconds(150), [&](int rank, int n, const UniqueId& id) {
    selectDevice(rank);
    useTransport(transport);
    Communicator comm(loopbackBootstrap(rank, n, id));
    const int peer = 1 - rank;
    auto conn = comm.connectAll(MemoryKind::Cuda).at(peer);
    comm.connectAll(MemoryKind::Host);  // the same ethernet connection serves host memory
    constexpr uint64_t kBytes = 1 << 20;
    char* gpu = nullptr;
    if (cudaMalloc(&gpu, kBytes) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
    std::vector<char> host(kBytes);
    RegisteredMemory gpuMem = comm.registerMemory(gpu, kBytes, MemoryKind::Cuda);
    RegisteredMemory hostMem = comm.registerMemory(host.data(), kBytes, MemoryKind::Host);
    comm.sendMemory(gpuMem, peer, 0);
    comm.sendMemory(hostMem, peer, 1);
    RemoteMemory peerGpu = comm.recvMemory(peer, 0), peerHost = comm.recvMemory(peer, 1);
    Host2HostSemaphore sem(comm, conn);
    const uint64_t sizes[] = {8, 65536 * 3 + 5, kBytes - 64};
    for (int round = 0; round < 6; ++round) {
      const uint64_t size = sizes[round % 3];
      const int direction = round % 3;  // 0: GPU->GPU, 1: GPU->host, 2: host->GPU
      if (rank == 0) {
        std::vector<uint8_t> data = pattern(rank, round, size);
        if (direction == 2) std::memcpy(host.data(), data.data(), size);
        else cudaMemcpy(gpu, data.data(), size, cudaMemcpyHostToDevice);
        // A pageable-source cudaMemcpy may return before its DMA lands; a
        // write's source must be complete, as for any transport.
        cudaDeviceSynchronize();
        const RegisteredMemory& src = direction == 2 ? hostMem : gpuMem;
        const RemoteMemory& dst = direction == 1 ? peerHost : peerGpu;
        conn->write(dst, 64, src, 0, size);
        sem.signal();
        sem.wait();  // rank 1 checked: the buffers may be refilled
      } else {
        sem.wait();
        std::vector<uint8_t> got(size);
        if (direction == 1) std::memcpy(got.data(), host.data() + 64, size);
        else cudaMemcpy(got.data(), gpu + 64, size, cudaMemcpyDeviceToHost);
        expectBytes(got, 0, round, direction == 0 ? "GPU->GPU" : direction == 1 ? "GPU->host" : "host->GPU");
        sem.signal();
      }
    }
    conn->flush();
    comm.bootstrap().barrier();
    cudaFree(gpu);
  });
  expectAllPassed(results);
}

INSTANTIATE_TEST_SUITE_P(Transports, GpuStaging, ::testing::Values("ethernet", "ucx", "libfabric"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });
