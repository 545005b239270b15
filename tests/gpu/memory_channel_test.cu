// MemoryChannel and device-to-device semaphores between two processes
// (one GPU each where there are two, else both on GPU 0), over cudaipc:
// data written by one process's kernel is checked by the other's.
#include <gtest/gtest.h>

#include <cstdlib>

#include "comm_fixture.hpp"
#include "gpu_test_util.hpp"
#include "multiproc.hpp"
#include "plugboard/gpu/memory_channel.hpp"

using namespace plugboard;
using namespace plugboard::test;

namespace {

constexpr uint64_t kHalf = 8 << 20;  // buffer = [outgoing half | incoming half]

__device__ uint8_t pattern(int rank, uint32_t round, uint64_t i) {
  return static_cast<uint8_t>(rank * 37 + round * 11 + i * 7 + (i >> 9));
}

// Each round: fill the outgoing half, put it into the peer's incoming half
// at odd offsets, signal, wait for the peer's data, check it, then a second
// signal/wait pair so neither side overwrites what the other still reads.
__global__ void pingPongKernel(MemoryChannelDeviceHandle ch, int rank, int peer, uint32_t rounds, uint64_t bytes,
                               uint64_t dstSkew, uint64_t srcSkew, unsigned long long* wrong, unsigned* failed) {
  const uint32_t tid = threadIdx.x, n = blockDim.x;
  for (uint32_t r = 1; r <= rounds; ++r) {
    for (uint64_t i = tid; i < bytes; i += n) ch.local[srcSkew + i] = pattern(rank, r, i);
    __syncthreads();
    ch.put(kHalf + dstSkew, srcSkew, bytes, tid, n);
    __syncthreads();
    if (tid == 0) {
      ch.signal();
      if (!ch.wait()) atomicAdd(failed, 1u);
    }
    __syncthreads();
    for (uint64_t i = tid; i < bytes; i += n)
      if (static_cast<uint8_t>(ch.local[kHalf + dstSkew + i]) != pattern(peer, r, i)) atomicAdd(wrong, 1ull);
    __syncthreads();
    if (tid == 0) {
      ch.signal();
      if (!ch.wait()) atomicAdd(failed, 1u);
    }
    __syncthreads();
  }
}

// LL16 then LL8 packets into the peer's incoming half; the reader waits on flags only.
__global__ void packetKernel(MemoryChannelDeviceHandle ch, int rank, int peer, uint32_t rounds, uint64_t bytes,
                             unsigned long long* wrong, unsigned* failed) {
  const uint32_t tid = threadIdx.x, n = blockDim.x;
  const uint64_t packets = kHalf / 2, out = kHalf + kHalf / 2;  // packet area, then unpacked data
  for (uint32_t r = 1; r <= rounds; ++r) {
    for (uint64_t i = tid; i < bytes; i += n) ch.local[i] = pattern(rank, r, i);
    __syncthreads();
    bool ll16 = r % 2;
    if (ll16) ch.putPackets16(packets, 0, bytes, tid, n, r);
    else ch.putPackets8(packets, 0, bytes, tid, n, r);
    bool ok = ll16 ? ch.getPackets16(out, packets, bytes, tid, n, r) : ch.getPackets8(out, packets, bytes, tid, n, r);
    if (!ok) atomicAdd(failed, 1u);
    __syncthreads();
    for (uint64_t i = tid; i < bytes; i += n)
      if (static_cast<uint8_t>(ch.local[out + i]) != pattern(peer, r, i)) atomicAdd(wrong, 1ull);
    __syncthreads();
    if (tid == 0) {  // both done reading before the next round's packets
      ch.signal();
      if (!ch.wait()) atomicAdd(failed, 1u);
    }
    __syncthreads();
  }
}

__global__ void waitOnceKernel(MemoryChannelDeviceHandle ch, int64_t timeoutNs, unsigned* failed) {
  if (!ch.wait(timeoutNs)) atomicAdd(failed, 1u);
}

struct Counters {
  unsigned long long* wrong = nullptr;
  unsigned* failed = nullptr;
  Counters() {
    cudaMalloc(&wrong, sizeof(*wrong));
    cudaMalloc(&failed, sizeof(*failed));
    cudaMemset(wrong, 0, sizeof(*wrong));
    cudaMemset(failed, 0, sizeof(*failed));
  }
  ~Counters() {
    cudaFree(wrong);
    cudaFree(failed);
  }
  void check(const char* what) const {
    unsigned long long w = 0;
    unsigned f = 0;
    cudaMemcpy(&w, wrong, sizeof(w), cudaMemcpyDeviceToHost);
    cudaMemcpy(&f, failed, sizeof(f), cudaMemcpyDeviceToHost);
    if (w || f) throw std::runtime_error(std::string(what) + ": " + std::to_string(w) + " wrong bytes, " +
                                         std::to_string(f) + " failed waits");
  }
};

using Body = std::function<void(MemoryChannel&, Device2DeviceSemaphore&, int rank, int peer)>;

// Two ranks, a CUDA-memory connection over cudaipc, one channel each way.
void runPair(const Body& body) {
  auto results = runRanks(2, std::chrono::seconds(120), [&](int rank, int n, const UniqueId& id) {
    int devices = 0;
    cudaGetDeviceCount(&devices);
    if (cudaSetDevice(rank % devices) != cudaSuccess) throw std::runtime_error("cudaSetDevice failed");
    setenv("PLUGBOARD_TRANSPORTS", "cudaipc,ethernet", 1);
    Communicator comm(loopbackBootstrap(rank, n, id));
    const int peer = 1 - rank;
    auto conn = comm.connectAll(MemoryKind::Cuda).at(peer);
    if (conn->transport() != "cudaipc") throw std::runtime_error("CUDA memory went over " + conn->transport());
    char* buf = nullptr;
    if (cudaMalloc(&buf, 2 * kHalf) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
    cudaMemset(buf, 0, 2 * kHalf);
    {
      RegisteredMemory local = comm.registerMemory(buf, 2 * kHalf, MemoryKind::Cuda);
      comm.sendMemory(local, peer);
      RemoteMemory remote = comm.recvMemory(peer);
      auto sem = std::make_shared<Device2DeviceSemaphore>(comm, conn);
      MemoryChannel channel(sem, local, remote);
      body(channel, *sem, rank, peer);
      comm.bootstrap().barrier();
    }
    // Every mapping of the peer's buffer is released above; free ours only
    // once the peer has released its mapping of it too.
    comm.bootstrap().barrier();
    cudaFree(buf);
  });
  expectAllPassed(results);
}

}  // namespace

TEST(GpuMemoryChannel, PutAtAnyAlignmentAndSemaphoreOrderingOverManyRounds) {
  PB_REQUIRE_GPU_NO_INIT();
  runPair([](MemoryChannel& ch, Device2DeviceSemaphore& sem, int rank, int peer) {
    Counters c;
    const uint64_t cases[][3] = {{4 << 20, 0, 0}, {1000003, 3, 5}, {77777, 8, 0}, {1, 1, 2}, {0, 0, 0}};
    for (const auto& k : cases) {
      pingPongKernel<<<1, 512>>>(ch.deviceHandle(), rank, peer, 50, k[0], k[1], k[2], c.wrong, c.failed);
      if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("ping-pong kernel failed");
      c.check(("put of " + std::to_string(k[0]) + " bytes").c_str());
    }
    if (sem.deviceError()) throw std::runtime_error("semaphore error " + std::to_string(sem.deviceError()));
  });
}

TEST(GpuMemoryChannel, LL16AndLL8PacketsArriveWithoutASignal) {
  PB_REQUIRE_GPU_NO_INIT();
  runPair([](MemoryChannel& ch, Device2DeviceSemaphore&, int rank, int peer) {
    Counters c;
    packetKernel<<<1, 256>>>(ch.deviceHandle(), rank, peer, 40, 1 << 16, c.wrong, c.failed);
    if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("packet kernel failed");
    c.check("packets");
  });
}

TEST(GpuMemoryChannel, WaitWithoutSignalEndsInReportedError) {
  PB_REQUIRE_GPU_NO_INIT();
  runPair([](MemoryChannel& ch, Device2DeviceSemaphore& sem, int, int) {
    Counters c;
    auto h = ch.deviceHandle();
    // Nobody signals: a bounded wait must return false and record a timeout.
    waitOnceKernel<<<1, 1>>>(h, 100000000, c.failed);  // 0.1 s
    if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("wait kernel failed");
    unsigned f = 0;
    cudaMemcpy(&f, c.failed, sizeof(f), cudaMemcpyDeviceToHost);
    if (f != 1) throw std::runtime_error("the unsignalled wait did not fail");
    if (sem.deviceError() != kSemaphoreWaitTimeout) throw std::runtime_error("no timeout recorded");
  });
}
