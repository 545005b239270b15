// The relayed call's kernel: one block copies the input into the relay's
// pinned data area, posts the call to the host thread (relay_words.hpp),
// waits for it to be done and copies the result out; a small call goes as
// packets instead. One launch per call, no Fifo, no proxy: the host runs
// the collective on host buffers.
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

/// Why a relayed call's wait must end now (kSemaphoreOk: keep waiting):
/// the host failed or the communicator aborted (kSemaphoreAborted), or
/// gpu_wait_timeout passed.
__device__ uint32_t relayWaitEnds(const DeviceCtx& c, const RelayDevice& r, WaitClock& clock) {
  if (r.words->failed || *c.abortFlag || (c.portAbort && *c.portAbort)) return kSemaphoreAborted;
  return clock.expired() ? kSemaphoreWaitTimeout : kSemaphoreOk;
}

/// Records in the relay's words that call seq's wait ended for `why`.
__device__ void recordRelayError(const RelayDevice& r, uint64_t seq, uint32_t coll, uint32_t why) {
  r.words->deviceErrorCall = seq;
  r.words->deviceErrorColl = coll;
  cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_system);
  r.words->deviceError = why;
}

/// Thread 0: waits until the host has done call `seq`. kSemaphoreOk, or why
/// not (recorded in the relay's words).
__device__ uint32_t awaitDone(const DeviceCtx& c, const RelayDevice& r, uint64_t seq, uint32_t coll) {
  WaitClock clock(c.waitTimeoutNs);
  for (int64_t spins = 0; r.words->done < seq; ++spins) {
    if (!WaitClock::checkNow(spins)) continue;
    if (const uint32_t why = relayWaitEnds(c, r, clock)) {
      recordRelayError(r, seq, coll, why);
      return why;
    }
  }
  cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_system);
  return kSemaphoreOk;
}

/// Word i (4 bytes, zero past the end) of `bytes` bytes at src, which may be unaligned.
__device__ uint32_t loadWord(const char* src, uint64_t bytes, uint64_t i) {
  const uint64_t at = 4 * i;
  if (at + 4 <= bytes && (reinterpret_cast<uintptr_t>(src + at) & 3) == 0)
    return *reinterpret_cast<const uint32_t*>(src + at);
  uint32_t w = 0;
  for (uint64_t b = 0; b < 4 && at + b < bytes; ++b) w |= static_cast<uint32_t>(static_cast<uint8_t>(src[at + b])) << (8 * b);
  return w;
}

/// Stores word i of `bytes` bytes at dst (the part before the end).
__device__ void storeWord(char* dst, uint64_t bytes, uint64_t i, uint32_t w) {
  const uint64_t at = 4 * i;
  if (at + 4 <= bytes && (reinterpret_cast<uintptr_t>(dst + at) & 3) == 0) {
    *reinterpret_cast<uint32_t*>(dst + at) = w;
    return;
  }
  for (uint64_t b = 0; b < 4 && at + b < bytes; ++b) dst[at + b] = static_cast<char>(w >> (8 * b));
}

/// Out-packets every thread polls at once (two 64-byte lines).
constexpr uint64_t kRelayDirectPackets = 16;

/// Loads out-packet i until it carries flag (true, *word its data), or
/// until the wait must end: false, with the block's *why set (by this
/// thread or, seen here, another).
__device__ bool awaitOutPacket(const DeviceCtx& c, const RelayDevice& r, uint64_t i, uint32_t flag, WaitClock& clock,
                               uint32_t* why, uint32_t* word) {
  for (int64_t spins = 0;; ++spins) {
    const uint64_t p = *reinterpret_cast<volatile uint64_t*>(&r.outPackets[i]);
    if (static_cast<uint32_t>(p >> 32) == flag) {
      *word = static_cast<uint32_t>(p);
      return true;
    }
    if (*static_cast<volatile uint32_t*>(why)) return false;
    if (!WaitClock::checkNow(spins)) continue;
    if (const uint32_t ends = relayWaitEnds(c, r, clock)) {
      atomicCAS(why, kSemaphoreOk, ends);
      return false;
    }
  }
}

/// A call as packets (relay_words.hpp): every thread stores its packets of
/// the header and input, then loads its out-packets until they carry the
/// call's flag and stores their words; no fence on either side, one PCIe
/// round trip from the host's result to the kernel's end.
__device__ void relayPackets(const DeviceCtx& c, const RelayDevice& r, const RelayArgs& a, uint64_t seq) {
  __shared__ uint32_t why;
  if (threadIdx.x == 0) why = kSemaphoreOk;
  const uint32_t flag = relayFlag(seq);
  const RelayHeader h{a.call, static_cast<uint32_t>(a.inOffset), static_cast<uint32_t>(a.inBytes),
                      static_cast<uint32_t>(a.outOffset), static_cast<uint32_t>(a.outBytes)};
  const uint64_t in = kRelayHeaderPackets + (a.inBytes + 3) / 4;
  for (uint64_t i = threadIdx.x; i < in; i += blockDim.x) {
    const uint32_t w = i < kRelayHeaderPackets ? h.word(static_cast<int>(i)) : loadWord(a.send, a.inBytes, i - kRelayHeaderPackets);
    *reinterpret_cast<volatile uint64_t*>(&r.inPackets[i]) = relayPacket(w, flag);
  }
  __syncthreads();  // `why` set before anyone reads it
  const uint64_t out = a.outBytes ? (a.outBytes + 3) / 4 : 1;  // one packet at least: "done"
  WaitClock clock(c.waitTimeoutNs);
  // Past two lines of results, thread 0 alone polls the last packet (the
  // host stores them in order), then every thread reads its own: the
  // others do not keep loading lines the host is still writing.
  if (out > kRelayDirectPackets) {
    uint32_t last = 0;
    if (threadIdx.x == 0) awaitOutPacket(c, r, out - 1, flag, clock, &why, &last);
    __syncthreads();
  }
  for (uint64_t i = threadIdx.x; i < out; i += blockDim.x) {
    uint32_t w = 0;
    if (awaitOutPacket(c, r, i, flag, clock, &why, &w) && a.outBytes) storeWord(a.recv, a.outBytes, i, w);
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  if (why != kSemaphoreOk) return recordRelayError(r, seq, a.call.coll, why);  // the relay is failed for good
  *r.calls = seq;
}

__global__ void __launch_bounds__(kMaxBlockThreads) relayKernel(DeviceCtx c, RelayDevice r, RelayArgs a) {
  __shared__ uint32_t why;
  const uint64_t seq = *r.calls + 1;
  if (!a.inArea && a.inBytes <= kRelayPacketBytes && a.outBytes <= kRelayPacketBytes) return relayPackets(c, r, a, seq);
  bool wrote = false;
  if (threadIdx.x == 0) {
    r.words->call.count = a.call.count;
    r.words->call.type = a.call.type;
    r.words->call.op = a.call.op;
    r.words->call.coll = a.call.coll;
    r.words->call.root = a.call.root;
    r.words->call.recvCount = a.call.recvCount;
    r.words->call.recvPeer = a.call.recvPeer;
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
    why = awaitDone(c, r, seq, a.call.coll);
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
