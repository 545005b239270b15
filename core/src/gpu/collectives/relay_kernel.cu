// The relayed call's kernel: one block copies the input into the relay's
// pinned data area, posts the call to the host thread (relay_words.hpp),
// waits for it to be done and copies the result out. One launch per call,
// no Fifo, no proxy: the host runs the collective on host buffers.
#include <cuda/atomic>

#include "gpu/collectives/kernels.hpp"
#include "gpu/cuda_check.hpp"
#include "plugboard/gpu/device_wait.hpp"
#include "plugboard/gpu/semaphore_device.hpp"

namespace plugboard::gpucoll {
namespace {

/// Loads in flight per thread: host memory is a PCIe round trip away.
constexpr int kRelayUnroll = 4;

/// Block-wide copy; 16-byte vectors with kRelayUnroll loads issued before
/// their stores when both ends allow it, bytes otherwise (and for the tail).
/// True when this thread stored anything.
__device__ bool relayCopy(char* dst, const char* src, uint64_t bytes) {
  uint64_t head = 0;
  if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15) == 0) {
    const uint64_t n = bytes / 16, stride = blockDim.x;
    auto* d = reinterpret_cast<uint4*>(dst);
    const auto* s = reinterpret_cast<const uint4*>(src);
    for (uint64_t i = threadIdx.x; i < n; i += kRelayUnroll * stride) {
      uint4 v[kRelayUnroll];
#pragma unroll
      for (int k = 0; k < kRelayUnroll; ++k)
        if (i + k * stride < n) v[k] = s[i + k * stride];
#pragma unroll
      for (int k = 0; k < kRelayUnroll; ++k)
        if (i + k * stride < n) d[i + k * stride] = v[k];
    }
    head = n * 16;
  }
  for (uint64_t i = head + threadIdx.x; i < bytes; i += blockDim.x) dst[i] = src[i];
  return threadIdx.x < bytes / 16 || head + threadIdx.x < bytes;
}

/// Thread 0: waits until the host has done call `seq`. kSemaphoreOk, or why
/// not (recorded in the relay's words): the host failed or the communicator
/// aborted (kSemaphoreAborted), or gpu_wait_timeout passed.
__device__ uint32_t awaitDone(const DeviceCtx& c, const RelayDevice& r, uint64_t seq) {
  WaitClock clock(c.waitTimeoutNs);
  uint32_t why = kSemaphoreOk;
  for (int64_t spins = 0; r.words->done < seq; ++spins) {
    if (!WaitClock::checkNow(spins)) continue;
    if (r.words->failed || *c.abortFlag || (c.portAbort && *c.portAbort)) why = kSemaphoreAborted;
    else if (clock.expired()) why = kSemaphoreWaitTimeout;
    if (why == kSemaphoreOk) continue;
    r.words->deviceErrorCall = seq;
    cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_system);
    r.words->deviceError = why;
    return why;
  }
  cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_system);
  return kSemaphoreOk;
}

__global__ void __launch_bounds__(kMaxBlockThreads) relayKernel(DeviceCtx c, RelayDevice r, RelayArgs a) {
  __shared__ uint32_t why;
  const uint64_t seq = *r.calls + 1;
  bool wrote = false;
  if (threadIdx.x == 0) {
    r.words->call.count = a.call.count;
    r.words->call.type = a.call.type;
    r.words->call.op = a.call.op;
    r.words->call.coll = a.call.coll;
    r.words->call.root = a.call.root;
    wrote = true;
  }
  if (a.inBytes) wrote |= relayCopy(r.data + a.inOffset, a.send, a.inBytes);
  // The host reads the call and the data after seeing `posted`: each
  // writer's fence makes its stores visible before the barrier, after
  // which thread 0 posts (one fence per writer, none for idle threads).
  if (wrote) __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) {
    r.words->posted = seq;
    why = awaitDone(c, r, seq);
  }
  __syncthreads();
  if (why != kSemaphoreOk) return;  // the relay is failed for good (GpuCollectives reports it)
  if (a.outBytes) relayCopy(a.recv, r.data + a.outOffset, a.outBytes);
  if (threadIdx.x == 0) *r.calls = seq;
}

}  // namespace

void launchRelay(const DeviceCtx& c, const RelayDevice& r, const RelayArgs& a, uint32_t threads, cudaStream_t stream) {
  relayKernel<<<1, threads, 0, stream>>>(c, r, a);
  PB_CUDA_CHECK(cudaGetLastError());
}

void preloadRelayKernel(uint32_t threads) {
  uint32_t perSM = kMaxBlockThreads;  // not a cap: one block never waits on another
  loadKernel(reinterpret_cast<const void*>(relayKernel), threads, 0, &perSM);
}

}  // namespace plugboard::gpucoll
