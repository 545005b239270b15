// Two ranks, one GPU each (GPU 0 and 1), over cudaipc:
//  - MemoryChannel put bandwidth (all SMs, 16-byte stores into the peer's
//    mapped buffer) against cudaMemcpyAsync of the same bytes into the same
//    peer buffer (the copy engine, as cudaMemcpyPeerAsync), same run;
//  - device-to-device semaphore signal+wait round trip.
// Rank 0 prints "name value" lines; both ranks must run (fork before CUDA).
#include <cstdio>
#include <vector>

#include "plugboard/communicator.hpp"
#include "plugboard/error.hpp"
#include "plugboard/gpu/device_wait.hpp"
#include "plugboard/gpu/memory_channel.hpp"
#include "plugboard/gpu/port_channel.hpp"
#include "two_ranks.hpp"

using namespace plugboard;

namespace {

__global__ void putKernel(MemoryChannelDeviceHandle ch, uint64_t bytes) {
  ch.put(0, 0, bytes, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}

// One thread asks the proxy for a put of `bytes` and waits until it is done.
__global__ void portPutKernel(PortChannelDeviceHandle ch, uint64_t bytes, unsigned* failed) {
  if (!ch.putWithSignalAndFlush(0, 0, bytes)) *failed = 1;
}

// LL16: payload bytes go out as 16-byte packets carrying 8 bytes each.
__global__ void ll16PutKernel(MemoryChannelDeviceHandle ch, uint64_t bytes, uint32_t flag) {
  ch.putPackets16(0, 0, bytes, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x, flag);
}

__global__ void pingPong(MemoryChannelDeviceHandle ch, int rank, int iters, uint64_t* ns, unsigned* failed) {
  uint64_t start = globalTimerNs();
  for (int i = 0; i < iters; ++i) {
    if (rank == 0) {
      ch.signal();
      if (!ch.wait()) { *failed = 1; return; }
    } else {
      if (!ch.wait()) { *failed = 1; return; }
      ch.signal();
    }
  }
  *ns = globalTimerNs() - start;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(ErrorCode::System, std::string(what) + ": " + cudaGetErrorString(e));
}

/// Mean milliseconds per launch of fn over iters, after warm-up.
template <typename Fn>
float timeIt(Fn fn, int iters) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 3; ++i) fn();
  cudaEventRecord(a);
  for (int i = 0; i < iters; ++i) fn();
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  return ms / iters;
}

int rankMain(int rank, const UniqueId& id) {
  check(cudaSetDevice(rank), "cudaSetDevice");
  setenv("PLUGBOARD_TRANSPORTS", "cudaipc,ethernet", 1);
  auto boot = std::make_shared<TcpBootstrap>(rank, 2, id, std::chrono::seconds(60), "lo");
  Communicator comm(boot);
  const int peer = 1 - rank;
  auto conn = comm.connectAll(MemoryKind::Cuda).at(peer);
  const uint64_t maxBytes = 1ull << 30;
  char* buf = nullptr;
  check(cudaMalloc(&buf, maxBytes), "cudaMalloc");
  check(cudaMemset(buf, rank + 1, maxBytes), "cudaMemset");
  uint64_t* ns;
  unsigned* failed;
  check(cudaMalloc(&ns, 8), "cudaMalloc");
  check(cudaMalloc(&failed, 4), "cudaMalloc");
  cudaMemset(failed, 0, 4);
  {
    RegisteredMemory local = comm.registerMemory(buf, maxBytes, MemoryKind::Cuda);
    comm.sendMemory(local, peer);
    RemoteMemory remote = comm.recvMemory(peer);
    auto sem = std::make_shared<Device2DeviceSemaphore>(comm, conn);
    MemoryChannel ch(sem, local, remote);
    auto h = ch.deviceHandle();
    comm.bootstrap().barrier();
    if (rank == 0) {
      cudaDeviceProp prop;
      cudaGetDeviceProperties(&prop, 0);
      std::printf("# channel_bench: %s x2, MemoryChannel put vs copy engine into the same peer buffer\n", prop.name);
      for (uint64_t bytes = 64ull << 20; bytes <= maxBytes; bytes *= 4) {
        float put = timeIt([&] { putKernel<<<prop.multiProcessorCount * 2, 1024>>>(h, bytes); }, 10);
        float ce = timeIt([&] { cudaMemcpyAsync(h.remote, buf, bytes, cudaMemcpyDeviceToDevice); }, 10);
        std::printf("memchan_put_GBps_%lluMiB %.1f\ncopy_engine_GBps_%lluMiB %.1f\nmemchan_over_copy_engine_%lluMiB %.3f\n",
                    (unsigned long long)(bytes >> 20), bytes / put / 1e6, (unsigned long long)(bytes >> 20),
                    bytes / ce / 1e6, (unsigned long long)(bytes >> 20), ce / put);
      }
      check(cudaGetLastError(), "put kernels");
      uint32_t flag = 0;
      for (uint64_t bytes = 16ull << 20; bytes <= (256ull << 20); bytes *= 4) {
        float ll = timeIt([&] { ll16PutKernel<<<prop.multiProcessorCount * 2, 1024>>>(h, bytes, ++flag); }, 10);
        std::printf("ll16_put_payload_GBps_%lluMiB %.1f\n", (unsigned long long)(bytes >> 20), bytes / ll / 1e6);
      }
      check(cudaGetLastError(), "LL16 kernels");
    }
    comm.bootstrap().barrier();
    {
      // PortChannel: the proxy thread turns each request into a copy-engine
      // write over cudaipc; rank 1 only has to keep its proxy alive.
      PortChannelService service(comm);
      PortChannel port = service.addChannel(conn, local, remote);
      if (rank == 0) {
        for (uint64_t bytes = 64ull << 20; bytes <= maxBytes; bytes *= 4) {
          float pt = timeIt([&] { portPutKernel<<<1, 1>>>(port.deviceHandle(), bytes, failed); }, 10);
          std::printf("portchan_put_GBps_%lluMiB %.1f\n", (unsigned long long)(bytes >> 20), bytes / pt / 1e6);
        }
        check(cudaDeviceSynchronize(), "port kernels");
        service.checkErrors();
        unsigned f = 0;
        cudaMemcpy(&f, failed, 4, cudaMemcpyDeviceToHost);
        if (f) throw Error(ErrorCode::Timeout, "a port channel request did not complete");
      }
      comm.bootstrap().barrier();
    }
    comm.bootstrap().barrier();
    const int iters = 10000;
    pingPong<<<1, 1>>>(h, rank, iters, ns, failed);
    check(cudaDeviceSynchronize(), "ping-pong");
    uint64_t t = 0;
    unsigned f = 0;
    cudaMemcpy(&t, ns, 8, cudaMemcpyDeviceToHost);
    cudaMemcpy(&f, failed, 4, cudaMemcpyDeviceToHost);
    if (f) throw Error(ErrorCode::Timeout, "semaphore ping-pong timed out");
    if (rank == 0) std::printf("d2d_semaphore_roundtrip_us %.3f\n", t / 1000.0 / iters);
    comm.bootstrap().barrier();
  }
  comm.bootstrap().barrier();
  cudaFree(buf);
  return 0;
}

}  // namespace

int main() {
  return bench::runTwoRanks(rankMain);
}
