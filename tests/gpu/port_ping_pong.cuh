// The PortChannel ping-pong kernel shared by the PortChannel tests (over
// cudaipc and over a staged network transport).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "plugboard/gpu/port_channel.hpp"

namespace plugboard::test {
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

/// Both ranks: a buffer of two halves, one PortChannel over conn, 20
/// ping-pong rounds per size; throws on any wrong byte or failed request.
void pingPongOverPortChannel(Communicator& comm, std::shared_ptr<Connection> conn, std::vector<uint64_t> sizes) {
  const int rank = comm.rank(), peer = conn->remoteRank();
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
    for (uint64_t bytes : sizes) {
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
}

}  // namespace
}  // namespace plugboard::test
