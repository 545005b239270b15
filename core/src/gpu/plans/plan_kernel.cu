// The GPU plan executor's kernels: one plan kernel per call, where plan
// thread block t, slice s runs as CUDA block t * slices + s, operation by
// operation, with a block barrier after each (so an operation sees the
// earlier ones' data, and a signal publishes every thread's writes: its
// release at system scope follows the barrier, and is cumulative). A run
// of put_packets counts as one operation (putPackets).
//
// Start handshake (no peer writes into this rank's buffers before this
// call's kernel has begun, hence before the stream work ahead of it): each
// block signals and waits once on its channels' (c, s) before its first
// operation; plans whose channels are shared by thread blocks get a
// handshake kernel first instead. End: the last block of slice s to finish
// copies slice s of every output chunk not kept there to the caller's
// output (an operation only ever maps slice s to slice s, so the slice is
// complete).
//
// Waits are done by one thread per counter; a wait that times out or is
// aborted records the first failure in PlanStatus and ends its block. Loads
// that may read what a peer wrote bypass L1 (__ldcg in copyBytes,
// reduceElems, loadElem and loadPayloadCg).
//
// LL plans: every thread stores and polls its own packets (plan_device.hpp);
// a poll that times out or is aborted ends that thread's part of the
// operation, and the block ends after it.
#include <cuda/atomic>

#include "gpu/collectives/ll_packet.cuh"
#include "gpu/collectives/pipe_device.cuh"  // copyBytes
#include "gpu/collectives/reduce_ops.cuh"
#include "gpu/collectives/type_dispatch.cuh"
#include "gpu/cuda_check.hpp"
#include "gpu/plans/plan_kernel.hpp"

namespace plugboard::gpuplan {
namespace {

using gpucoll::copyBytes;

__device__ void recordFailure(const PlanArgs& a, uint32_t code, int tb, int op, int channel, int slice,
                              int packetChunk = -1) {
  if (atomicCAS(&a.status->code, 0u, code) != 0u) return;
  a.status->threadBlock = tb;
  a.status->op = op;
  a.status->channel = channel;
  a.status->slice = slice;
  a.status->packetChunk = packetChunk;
  __threadfence_system();
}

/// Waits until counter reaches ++expected; kPlanOk, or why it gave up.
__device__ uint32_t waitCounter(const PlanArgs& a, uint64_t* counter, uint64_t* expected) {
  const uint64_t target = ++*expected;
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> in(*counter);
  WaitClock clock(a.timeoutNs);
  for (int64_t spins = 0; in.load(cuda::memory_order_relaxed) < target; ++spins) {
    if (!WaitClock::checkNow(spins)) continue;
    if (*a.abortFlag) return kPlanAborted;
    if (clock.expired()) return kPlanWaitTimeout;
  }
  cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_system);
  return kPlanOk;
}

__device__ void signalCounter(uint64_t* remote) {
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> out(*remote);
  out.fetch_add(1, cuda::memory_order_release);
}

/// Signal on (channel, slice): thread 0 only.
__device__ uint32_t signalOn(const PlanArgs& a, int c, uint32_t s) {
  const DevChannel& ch = a.channels[c];
  if (ch.port < 0) {
    signalCounter(ch.remoteInbound + s);
    return kPlanOk;
  }
  return a.ports[ch.port + s].signal() ? kPlanOk : kPlanFifoFailed;
}

/// Wait on (channel, slice): thread 0 only.
__device__ uint32_t waitOn(const PlanArgs& a, int c, uint32_t s) {
  const DevChannel& ch = a.channels[c];
  if (ch.port < 0) {
    const uint64_t i = static_cast<uint64_t>(c) * a.slices + s;
    return waitCounter(a, a.inbound + i, a.expected + i);
  }
  const PortChannelDeviceHandle& p = a.ports[ch.port + s];
  if (p.wait(a.timeoutNs)) return kPlanOk;
  return *a.abortFlag ? kPlanAborted : kPlanWaitTimeout;
}

/// Byte range [lo, lo + len) of slice s within a chunk.
struct SliceRange {
  uint64_t lo, len;
};
__device__ __forceinline__ SliceRange sliceOf(const PlanArgs& a, uint32_t s) {
  const uint64_t lo = s * a.sliceBytes;
  if (lo >= a.chunkBytes) return {0, 0};
  const uint64_t hi = lo + a.sliceBytes < a.chunkBytes ? lo + a.sliceBytes : a.chunkBytes;
  return {lo, hi - lo};
}

__device__ __forceinline__ char* at(const PlanArgs& a, const DevChunk& c, uint32_t k, uint64_t lo) {
  return a.local[c.buffer] + (c.index + k) * a.chunkBytes + lo;
}

/// A put's data: mapped stores (memory channel) or one proxy request per chunk (port).
__device__ uint32_t put(const PlanArgs& a, const DevOp& o, uint32_t s, SliceRange r) {
  const DevChannel& ch = a.channels[o.channel];
  if (ch.port < 0) {
    for (uint32_t k = 0; k < o.src.size; ++k)
      copyBytes(ch.remote[o.dst.buffer] + (o.dst.index + k) * a.chunkBytes + r.lo, at(a, o.src, k, r.lo), r.len,
                threadIdx.x, blockDim.x);
    return kPlanOk;
  }
  // The proxy's transport reads the source outside the GPU's memory model:
  // every thread's earlier writes are made visible to it before the request.
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x != 0 || r.len == 0) return kPlanOk;
  const PortChannelDeviceHandle& p = a.ports[ch.port + s];
  for (uint32_t k = 0; k < o.src.size; ++k) {
    const uint64_t dst = a.storageOffset[o.dst.buffer] + (o.dst.index + k) * a.chunkBytes + r.lo;
    const uint64_t src = a.storageOffset[o.src.buffer] + (o.src.index + k) * a.chunkBytes + r.lo;
    if (!p.put(dst, src, r.len)) return kPlanFifoFailed;
  }
  return kPlanOk;
}

/// get (memory channels only, the loader checks): this slice of the
/// peer's src chunks, through its mapping, into this rank's dst.
__device__ uint32_t get(const PlanArgs& a, const DevOp& o, SliceRange r) {
  const DevChannel& ch = a.channels[o.channel];
  for (uint32_t k = 0; k < o.src.size; ++k)
    copyBytes(at(a, o.dst, k, r.lo), ch.remote[o.src.buffer] + (o.src.index + k) * a.chunkBytes + r.lo, r.len,
              threadIdx.x, blockDim.x);
  return kPlanOk;
}

template <typename T, typename Op>
__device__ void reduce(const PlanArgs& a, const DevOp& o, SliceRange r) {
  const char* src[kMaxReduceSources];
  for (uint32_t k = 0; k < o.dst.size; ++k) {
    for (uint32_t i = 0; i < o.nsrcs; ++i) src[i] = at(a, a.srcs[o.srcsAt + i], k, r.lo);
    char* dst = at(a, o.dst, k, r.lo);
    gpucoll::reduceElems<T, Op>(&dst, 1, src, static_cast<int>(o.nsrcs), r.len / sizeof(T), threadIdx.x, blockDim.x, 1);
  }
}

/// This call's LL flag and packets half, and the packets chunk a failed poll waited for.
struct LlCall {
  uint32_t flag;
  uint64_t half;
  int32_t failedChunk;
};

/// Packets chunk `index` of this call's half of the packets buffer at base.
__device__ __forceinline__ char* packetsAt(const PlanArgs& a, char* base, uint64_t index, const LlCall& ll) {
  return base + ll.half + index * a.packetStride;
}

/// The 8 bytes of payload unit u of a chunk of `bytes` (zero past the end), through L2.
__device__ __forceinline__ uint2 loadPayloadCg(const char* src, uint64_t u, uint64_t bytes) {
  const char* p = src + 8 * u;
  if (8 * u + 8 <= bytes && (reinterpret_cast<uintptr_t>(p) % 8) == 0) return __ldcg(reinterpret_cast<const uint2*>(p));
  uint2 v = make_uint2(0, 0);
  char* out = reinterpret_cast<char*>(&v);
  for (uint64_t k = 0; k < 8 && 8 * u + k < bytes; ++k) out[k] = static_cast<char>(__ldcg(reinterpret_cast<const unsigned char*>(p + k)));
  return v;
}

/// Polls one packet until its flags are this call's; kPlanOk or why it gave up.
__device__ uint32_t pollPacket(const PlanArgs& a, const char* p, uint32_t flag, uint2& out) {
  WaitClock clock(a.timeoutNs);
  for (int64_t spins = 0;; ++spins) {
    if (gpucoll::tryLoadPacket(p, flag, out)) return kPlanOk;
    if (!WaitClock::checkNow(spins)) continue;
    if (*a.abortFlag) return kPlanAborted;
    if (clock.expired()) return kPlanWaitTimeout;
  }
}

/// Most consecutive put_packet operations of a thread block run as one pass.
constexpr uint32_t kMaxFusedPutPackets = 8;

/// True when both operations send the same single chunk.
__device__ __forceinline__ bool sameSource(const DevOp& x, const DevOp& y) {
  return x.src.size == 1 && y.src.size == 1 && x.src.buffer == y.src.buffer && x.src.index == y.src.index;
}

/// put_packet ops[0, n) over memory channels, consecutive in a thread block,
/// as one pass: slice r of each src as packets into the peer's packets
/// chunks. None reads what another writes, so no block barrier separates
/// them; a unit of a source is loaded once for the operations that send it
/// in a row (the one-shot's put to every peer).
__device__ uint32_t putPackets(const PlanArgs& a, const DevOp* ops, uint32_t n, SliceRange r, const LlCall& ll) {
  const uint64_t first = r.lo / 8, end = (r.lo + r.len + 7) / 8;
  for (uint64_t u = first + threadIdx.x; u < end; u += blockDim.x) {
    uint2 v = make_uint2(0, 0);
    for (uint32_t j = 0; j < n; ++j) {
      const DevOp& o = ops[j];
      char* dst = packetsAt(a, a.channels[o.channel].remote[kPackets], o.dst.index, ll) + 16 * u;
      const bool reuse = j > 0 && sameSource(o, ops[j - 1]);
      for (uint32_t k = 0; k < o.src.size; ++k) {
        if (!reuse) v = loadPayloadCg(at(a, o.src, k, 0), u, a.chunkBytes);
        gpucoll::storePacket(dst + k * a.packetStride, v, ll.flag);
      }
    }
  }
  return kPlanOk;
}

/// reduce_packet: dst = op over the data sources and then the packets
/// (each polled until it is this call's), 8 payload bytes per thread step.
template <typename T, typename Op>
__device__ uint32_t reducePackets(const PlanArgs& a, const DevOp& o, SliceRange r, LlCall& ll) {
  using A = typename gpucoll::Acc<T>::type;
  constexpr uint32_t kPer = 8 / sizeof(T);
  const uint64_t first = r.lo / 8, end = (r.lo + r.len + 7) / 8;
  for (uint32_t k = 0; k < o.dst.size; ++k) {
    char* dst = at(a, o.dst, k, 0);
    for (uint64_t u = first + threadIdx.x; u < end; u += blockDim.x) {
      A acc[kPer];
      for (uint32_t i = 0; i < o.nsrcs + o.npackets; ++i) {
        const DevChunk& c = a.srcs[o.srcsAt + i];
        uint2 v;
        if (i < o.nsrcs) {
          v = loadPayloadCg(at(a, c, k, 0), u, a.chunkBytes);
        } else if (const uint32_t code = pollPacket(a, packetsAt(a, a.local[kPackets], c.index + k, ll) + 16 * u, ll.flag, v);
                   code != kPlanOk) {
          ll.failedChunk = static_cast<int32_t>(c.index + k);
          return code;
        }
        const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
        for (uint32_t j = 0; j < kPer; ++j)
          acc[j] = i == 0 ? gpucoll::Acc<T>::in(e[j]) : Op::template apply<T, A>(acc[j], gpucoll::Acc<T>::in(e[j]));
      }
      uint2 out;
      T* e = reinterpret_cast<T*>(&out);
#pragma unroll
      for (uint32_t j = 0; j < kPer; ++j) e[j] = gpucoll::finish<T>(acc[j], 1);
      gpucoll::storeResult(dst, u, a.chunkBytes, out);
    }
  }
  return kPlanOk;
}

/// A barrier, by thread 0 after the block's earlier operations: counts this
/// block in (slice s of the group) and waits until the group's last block
/// has come, which opens the round. The round is read before arriving, so
/// a block cannot miss the opening.
__device__ uint32_t barrierWait(const PlanArgs& a, const DevOp& o, uint32_t s) {
  PlanBarrier& b = a.barriers[static_cast<uint64_t>(o.barrier) * a.slices + s];
  cuda::atomic_ref<uint32_t, cuda::thread_scope_device> count(b.count), round(b.round);
  __threadfence();  // the block's writes (every thread's, after the barrier that ended the last op) first
  const uint32_t mine = round.load(cuda::memory_order_acquire);
  if (count.fetch_add(1, cuda::memory_order_acq_rel) == o.parties - 1) {
    count.store(0, cuda::memory_order_relaxed);  // before the round opens: the next round counts from 0
    round.fetch_add(1, cuda::memory_order_acq_rel);
    return kPlanOk;
  }
  WaitClock clock(a.timeoutNs);
  for (int64_t spins = 0; round.load(cuda::memory_order_acquire) == mine; ++spins) {
    if (!WaitClock::checkNow(spins)) continue;
    if (*a.abortFlag) return kPlanAborted;
    if (clock.expired()) return kPlanWaitTimeout;
  }
  __threadfence();
  return kPlanOk;
}

/// (T, Op) as a switch channel reduces it; kReduces false where it cannot
/// (the executor refuses such calls, so those kernels never reach a switch op).
template <typename T, typename Op>
struct SwitchKind {
  static constexpr bool kReduces = false;
};
template <SwitchType Ty, SwitchOp O>
struct SwitchKindOf {
  static constexpr bool kReduces = true;
  static constexpr SwitchType kType = Ty;
  static constexpr SwitchOp kOp = O;
};
template <> struct SwitchKind<float, gpucoll::OpSum> : SwitchKindOf<SwitchType::Float32, SwitchOp::Sum> {};
template <> struct SwitchKind<__half, gpucoll::OpSum> : SwitchKindOf<SwitchType::Float16, SwitchOp::Sum> {};
template <> struct SwitchKind<__half, gpucoll::OpMin> : SwitchKindOf<SwitchType::Float16, SwitchOp::Min> {};
template <> struct SwitchKind<__half, gpucoll::OpMax> : SwitchKindOf<SwitchType::Float16, SwitchOp::Max> {};
template <> struct SwitchKind<__nv_bfloat16, gpucoll::OpSum> : SwitchKindOf<SwitchType::BFloat16, SwitchOp::Sum> {};
template <> struct SwitchKind<__nv_bfloat16, gpucoll::OpMin> : SwitchKindOf<SwitchType::BFloat16, SwitchOp::Min> {};
template <> struct SwitchKind<__nv_bfloat16, gpucoll::OpMax> : SwitchKindOf<SwitchType::BFloat16, SwitchOp::Max> {};

/// Multicast accesses and ordinary ones reach the same bytes by different
/// addresses: order them (each thread, around its switch accesses).
__device__ __forceinline__ void aliasFence(const SwitchChannelDeviceHandle& sw) {
  if (sw.multicast) asm volatile("fence.proxy.alias;" ::: "memory");
}

/// switch_reduce (reduce) or switch_broadcast: this slice of every chunk,
/// 4 x Words bytes per thread step. Offsets in the switch channel's buffer
/// are the chunks' offsets in the bound buffer.
template <typename T, typename Op, int Words>
__device__ void switchOp(const PlanArgs& a, const DevOp& o, SliceRange r, bool reduce) {
  using K = SwitchKind<T, Op>;
  const SwitchChannelDeviceHandle& sw = a.switches[o.channel];
  constexpr uint64_t kVec = 4 * Words;
  aliasFence(sw);
  for (uint32_t k = 0; k < o.src.size; ++k) {
    const DevChunk& group = reduce ? o.src : o.dst;
    const uint64_t at0 = (group.index + k) * a.chunkBytes + r.lo;
    char* mine = at(a, reduce ? o.dst : o.src, k, r.lo);
    for (uint64_t off = threadIdx.x * kVec; off < r.len; off += uint64_t(blockDim.x) * kVec) {
      if (reduce) {
        if constexpr (K::kReduces)
          *reinterpret_cast<SwitchVec<Words>*>(mine + off) = sw.template reduce<K::kType, K::kOp, Words>(at0 + off);
      } else {
        sw.broadcast<Words>(at0 + off, SwitchChannelDeviceHandle::loadCg<Words>(mine + off));
      }
    }
  }
  aliasFence(sw);
}

template <typename T, typename Op>
__device__ void switchOp(const PlanArgs& a, const DevOp& o, SliceRange r) {
  const bool reduce = o.kind == OpKind::SwitchReduce;
  if (a.switchWords == 4) switchOp<T, Op, 4>(a, o, r, reduce);
  else if (a.switchWords == 2) switchOp<T, Op, 2>(a, o, r, reduce);
  else switchOp<T, Op, 1>(a, o, r, reduce);
}

/// One operation of this block; kPlanOk or the failure (a thread's view:
/// thread 0's for channel operations, each thread's own for packet polls).
template <typename T, typename Op>
__device__ uint32_t runOp(const PlanArgs& a, const DevOp& o, uint32_t s, SliceRange r, LlCall& ll) {
  switch (o.kind) {
    case OpKind::Put: return put(a, o, s, r);
    case OpKind::Signal:
      // Puts of a port channel go before its signal in the Fifo: the proxy
      // keeps a channel's order. Mapped stores: the barrier before this op.
      return threadIdx.x == 0 ? signalOn(a, o.channel, s) : kPlanOk;
    case OpKind::Wait: return threadIdx.x == 0 ? waitOn(a, o.channel, s) : kPlanOk;
    case OpKind::Flush: {
      if (threadIdx.x != 0) return kPlanOk;
      const PortChannelDeviceHandle& p = a.ports[a.channels[o.channel].port + s];
      return p.flush(a.timeoutNs) ? kPlanOk : (*a.abortFlag ? kPlanAborted : kPlanWaitTimeout);
    }
    case OpKind::Copy:
      for (uint32_t k = 0; k < o.src.size; ++k)
        copyBytes(at(a, o.dst, k, r.lo), at(a, o.src, k, r.lo), r.len, threadIdx.x, blockDim.x);
      return kPlanOk;
    case OpKind::Reduce: reduce<T, Op>(a, o, r); return kPlanOk;
    case OpKind::PutPacket: return putPackets(a, &o, 1, r, ll);
    case OpKind::ReducePacket: return reducePackets<T, Op>(a, o, r, ll);
    case OpKind::Barrier: return threadIdx.x == 0 ? barrierWait(a, o, s) : kPlanOk;
    case OpKind::Get: return get(a, o, r);
    case OpKind::SwitchReduce:
    case OpKind::SwitchBroadcast: switchOp<T, Op>(a, o, r); return kPlanOk;
  }
  return kPlanOk;
}

/// Thread i signals, then waits on, this block's i-th handshake channel
/// (slice s): each counter has one waiting thread. Returns this thread's
/// failure, or kPlanOk.
__device__ uint32_t blockHandshake(const PlanArgs& a, const DevThreadBlock& t, uint32_t s) {
  uint32_t failed = kPlanOk;
  for (uint32_t i = threadIdx.x; i < t.handshakeCount; i += blockDim.x) {
    const int c = a.handshakes[t.handshakeStart + i];
    uint32_t code = signalOn(a, c, s);
    if (code == kPlanOk) code = waitOn(a, c, s);
    if (code != kPlanOk) {
      recordFailure(a, code, -1, -1, c, static_cast<int>(s));
      failed = code;
    }
  }
  return failed;
}

/// The last block of slice s to finish moves slice s of every output chunk
/// not already there to the caller's output (dividing for avg, in place for
/// a chunk that is; each thread reads the elements it writes).
template <typename T>
__device__ void finishSlice(const PlanArgs& a, uint32_t s, SliceRange r) {
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();  // this block's writes (and the peers' data it waited for) before the count
    cuda::atomic_ref<uint32_t, cuda::thread_scope_device> done(a.sliceDone[s]);
    last = done.fetch_add(1, cuda::memory_order_acq_rel) == a.threadBlockCount - 1;
    if (last) done.store(0, cuda::memory_order_relaxed);  // no other block of this launch counts it again
  }
  __syncthreads();
  if (!last || r.len == 0) return;
  __threadfence();
  char* to = a.userOutput ? a.userOutput : a.local[kOutput];
  for (uint32_t k = 0; k < a.outputChunks; ++k) {
    const char* src = a.local[a.outputHomes[k]] + k * a.chunkBytes + r.lo;
    char* dst = to + k * a.chunkBytes + r.lo;
    if (a.divisor == 1) {
      if (src == dst) continue;  // a chunk kept in the caller's output
      copyBytes(dst, src, r.len, threadIdx.x, blockDim.x);
      continue;
    }
    for (uint64_t i = threadIdx.x; i < r.len / sizeof(T); i += blockDim.x) {
      const T v = gpucoll::loadElem<T>(src, i);
      reinterpret_cast<T*>(dst)[i] = gpucoll::finish<T>(gpucoll::Acc<T>::in(v), a.divisor);
    }
  }
}

/// Operations of a thread block held in shared memory (more are read from
/// global memory one by one).
constexpr uint32_t kSharedOps = 32;

template <typename T, typename Op>
__global__ void __launch_bounds__(kMaxThreads, 1) planKernel(PlanArgs a) {
  const uint32_t tb = blockIdx.x / a.activeSlices, s = blockIdx.x % a.activeSlices;
  const DevThreadBlock t = a.threadBlocks[tb];
  const SliceRange r = sliceOf(a, s);
  // LL: every thread reads this block's call count; thread 0 writes it back
  // after the last barrier (only this block uses it).
  uint64_t* counter = a.calls ? a.calls + static_cast<uint64_t>(tb) * a.slices + s : nullptr;
  const uint64_t call = counter ? *counter + 1 : 0;
  LlCall ll{counter ? gpucoll::llFlag(call) : 0u, (call & 1) * a.packetHalfBytes, -1};
  // The block's operations, loaded together: one memory latency before the
  // first operation instead of one per operation.
  __shared__ DevOp ops[kSharedOps];
  const bool held = t.opCount <= kSharedOps;
  if (held)
    for (uint32_t i = threadIdx.x; i < t.opCount; i += blockDim.x) ops[i] = a.ops[t.opStart + i];
  __syncthreads();
  if (a.blocksHandshake && __syncthreads_or(blockHandshake(a, t, s) != kPlanOk)) return;
  const DevOp* list = held ? ops : a.ops + t.opStart;
  for (uint32_t i = 0; i < t.opCount; ++i) {
    const DevOp o = list[i];
    uint32_t last = i;  // a run of put_packets goes as one operation
    if (o.kind == OpKind::PutPacket)
      while (last + 1 < t.opCount && last + 1 - i < kMaxFusedPutPackets && list[last + 1].kind == OpKind::PutPacket) ++last;
    const uint32_t code = last > i ? putPackets(a, list + i, last - i + 1, r, ll) : runOp<T, Op>(a, o, s, r, ll);
    if (code != kPlanOk)
      recordFailure(a, code, static_cast<int>(tb), static_cast<int>(i), o.channel, static_cast<int>(s), ll.failedChunk);
    if (__syncthreads_or(code != kPlanOk)) return;
    i = last;
  }
  if (counter && threadIdx.x == 0) *counter = call;
  if (a.userOutput || a.divisor != 1) finishSlice<T>(a, s, r);
}

/// Thread i signals, then waits on, (channel, slice) i: no peer writes into
/// this rank's buffers before this launch (and the stream work before it)
/// has begun.
__global__ void handshakeKernel(PlanArgs a) {
  const uint32_t n = a.channelCount * a.slices;
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int c = static_cast<int>(i / a.slices);
    const uint32_t s = i % a.slices;
    uint32_t code = signalOn(a, c, s);
    if (code == kPlanOk) code = waitOn(a, c, s);
    if (code != kPlanOk) recordFailure(a, code, -1, -1, c, static_cast<int>(s));
  }
}

}  // namespace

void launchHandshake(const PlanArgs& a, cudaStream_t stream) {
  const uint32_t n = a.channelCount * a.slices;
  const uint32_t threads = n < 32 ? 32 : (n > 1024 ? 1024 : (n + 31) / 32 * 32);
  handshakeKernel<<<1, threads, 0, stream>>>(a);
  PB_CUDA_CHECK(cudaGetLastError());
}

void launchPlan(const PlanArgs& a, DataType type, ReduceOp op, uint32_t threads, cudaStream_t stream) {
  const uint32_t blocks = a.threadBlockCount * a.activeSlices;
  gpucoll::dispatchTypeOp(type, op, [&](auto t, auto o) {
    planKernel<decltype(t), decltype(o)><<<blocks, threads, 0, stream>>>(a);
  });
  PB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace plugboard::gpuplan
