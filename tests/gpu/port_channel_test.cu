// PortChannels: kernels ask the host proxy (through the Fifo) to put and
// signal over cudaipc; the peer's kernel waits and checks the data.
#include <gtest/gtest.h>

#include "comm_fixture.hpp"
#include "gpu_test_util.hpp"
#include "multiproc.hpp"
#include "plugboard/gpu/port_channel.hpp"

using namespace plugboard;
using namespace plugboard::test;

namespace {

constexpr uint64_t kHalf = 4 << 20;
constexpr int64_t kSpins = 1ll << 26;  // a few seconds: a hang reports itself well inside the test timeout

__device__ uint8_t portPattern(int rank, uint32_t round, uint64_t i) {
  return static_cast<uint8_t>(rank * 29 + round * 13 + i * 3 + (i >> 10));
}

// Round r: fill the outgoing half, putWithSignalAndFlush into the peer's
// incoming half, wait for the peer's data, check it, then signal/wait once
// more so nobody refills before the other side has read.
__global__ void portPingPong(PortChannelDeviceHandle ch, char* buf, int rank, int peer, uint32_t rounds, uint64_t bytes,
                             unsigned long long* wrong, unsigned* failed) {
  const uint32_t tid = threadIdx.x, n = blockDim.x;
  for (uint32_t r = 1; r <= rounds; ++r) {
    for (uint64_t i = tid; i < bytes; i += n) buf[i] = portPattern(rank, r, i);
    __syncthreads();
    if (tid == 0) {
      __threadfence_system();  // the proxy's copy reads what the block wrote
      if (!ch.putWithSignalAndFlush(kHalf, 0, bytes, kSpins) || !ch.wait(kSpins)) atomicAdd(failed, 1u);
    }
    __syncthreads();
    for (uint64_t i = tid; i < bytes; i += n)
      if (static_cast<uint8_t>(buf[kHalf + i]) != portPattern(peer, r, i)) atomicAdd(wrong, 1ull);
    __syncthreads();
    if (tid == 0 && (!ch.signal() || !ch.flush(kSpins) || !ch.wait(kSpins))) atomicAdd(failed, 1u);
    __syncthreads();
  }
}

}  // namespace

TEST(GpuPortChannel, TriggerEncodingRoundTrips) {
  ProxyTrigger t = makePortTrigger(kPortPut | kPortSignal, 513, 0xfedcba98, 0x12345678, 0x7fffffff);
  PortTriggerFields f = decodePortTrigger(t);
  EXPECT_EQ(f.request, uint64_t(kPortPut | kPortSignal));
  EXPECT_EQ(f.channel, 513u);
  EXPECT_EQ(f.dstOffset, 0xfedcba98u);
  EXPECT_EQ(f.srcOffset, 0x12345678u);
  EXPECT_EQ(f.size, 0x7fffffffu);
  EXPECT_EQ(t.snd & kTriggerValidBit, 0u) << "encoding must leave the valid bit to push()";
}

TEST(GpuPortChannel, PutSignalFlushThroughTheProxyOverCudaIpc) {
  PB_REQUIRE_GPU_NO_INIT();
  auto results = runRanks(2, std::chrono::seconds(120), [](int rank, int n, const UniqueId& id) {
    int devices = 0;
    cudaGetDeviceCount(&devices);
    if (cudaSetDevice(rank % devices) != cudaSuccess) throw std::runtime_error("cudaSetDevice failed");
    setenv("PLUGBOARD_TRANSPORTS", "cudaipc,ethernet", 1);
    Communicator comm(loopbackBootstrap(rank, n, id));
    const int peer = 1 - rank;
    auto conn = comm.connectAll(MemoryKind::Cuda).at(peer);
    char* buf = nullptr;
    unsigned long long* wrong = nullptr;
    unsigned* failed = nullptr;
    if (cudaMalloc(&buf, 2 * kHalf) != cudaSuccess || cudaMalloc(&wrong, 8) != cudaSuccess || cudaMalloc(&failed, 4) != cudaSuccess)
      throw std::runtime_error("cudaMalloc failed");
    cudaMemset(wrong, 0, 8);
    cudaMemset(failed, 0, 4);
    {
      RegisteredMemory local = comm.registerMemory(buf, 2 * kHalf, MemoryKind::Cuda);
      comm.sendMemory(local, peer);
      RemoteMemory remote = comm.recvMemory(peer);
      PortChannelService service(comm);
      PortChannel ch = service.addChannel(conn, local, remote);
      for (uint64_t bytes : {uint64_t(1), uint64_t(4099), kHalf}) {
        portPingPong<<<1, 256>>>(ch.deviceHandle(), buf, rank, peer, 20, bytes, wrong, failed);
        if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("port kernel failed");
        service.checkErrors();
      }
      unsigned long long w = 0;
      unsigned f = 0;
      cudaMemcpy(&w, wrong, 8, cudaMemcpyDeviceToHost);
      cudaMemcpy(&f, failed, 4, cudaMemcpyDeviceToHost);
      if (w || f) throw std::runtime_error(std::to_string(w) + " wrong bytes, " + std::to_string(f) + " failed requests");
      comm.bootstrap().barrier();
    }
    // Every mapping of the peer's buffer is released above; free ours only
    // once the peer has released its mapping of it too.
    comm.bootstrap().barrier();
    cudaFree(buf);
    cudaFree(wrong);
    cudaFree(failed);
  });
  expectAllPassed(results);
}
