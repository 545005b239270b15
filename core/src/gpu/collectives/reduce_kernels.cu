// Pipelined reducing collectives, one kernel per (type, op):
//  - allreduce (two-shot): rank j owns segment j; every rank sends segment j
//    to rank j (reduce-scatter), rank j reduces it in rank order and writes
//    the result to its recv and, in the same pass, into every peer's slot
//    (all-gather; for an unmapped peer its outbox slot, which the proxy
//    puts); peers copy it out.
//  - reduce: the same, but the reduced segments go to the root only.
//  - reducescatter: segment j is block j of send (count elements); no gather.
//  - one-shot allreduce / reduce (ReduceArgs::oneShot): every segment is
//    the whole buffer; every rank (reduce: every non-root) sends it to every
//    peer (reduce: the root), and each receiver reduces it into its recv.
//    One hop instead of two, at (n - 1) times two-shot's bytes per rank
//    over 2 (n - 1) / n: the same bytes on 2 ranks.
// PreMulSum (a Sum with ReduceArgs::preMul on): this rank's send is scaled
// as it is read, in stage 1's copies and as stage 2's own operand, so the
// call makes no scaling pass of its own.
// Chunk c of every segment belongs to block c mod G. Per block and step c
// the messages on pipe (me -> p) are: the reduce-scatter chunk c of
// segment p, then (two-shot only) the gathered chunk c of segment me; the
// receiver handles them in the same order. Every wait depends only on
// earlier steps or on sends of the same stage, so no ordering of ranks
// deadlocks.
#include "gpu/collectives/kernels.hpp"
#include "gpu/collectives/pipe_device.cuh"
#include "gpu/collectives/type_dispatch.cuh"
#include "gpu/cuda_check.hpp"

namespace plugboard::gpucoll {
namespace {

/// Segment j of a reducing collective, in elements of send.
struct Segments {
  const ReduceArgs& a;
  int n;
  /// Segment j's first element in send (and, except reducescatter, in recv).
  __device__ uint64_t start(int j) const {
    if (a.oneShot) return 0;
    if (a.coll == Coll::ReduceScatter) return j * a.count;
    const uint64_t units = (a.count + a.unitElems - 1) / a.unitElems, base = units / n, rem = units % n;
    const uint64_t first = (j * base + (j < static_cast<int64_t>(rem) ? j : rem)) * a.unitElems;
    return first < a.count ? first : a.count;
  }
  __device__ uint64_t length(int j) const {
    if (a.oneShot || a.coll == Coll::ReduceScatter) return a.count;
    return (j + 1 == n ? a.count : start(j + 1)) - start(j);
  }
  /// Elements of chunk c of segment j (0 when the segment has no chunk c).
  __device__ uint64_t chunk(int j, uint64_t c) const {
    const uint64_t len = length(j), off = c * a.chunkElems;
    return off >= len ? 0 : (len - off < a.chunkElems ? len - off : a.chunkElems);
  }
};

/// Stage 1's copy of send bytes into a peer's slot, scaled for a PreMulSum.
template <typename T, typename Op>
__device__ __forceinline__ void copyOwn(char* dst, const char* src, uint64_t elems, bool scaled, T scale, uint32_t tid,
                                        uint32_t nt) {
  if constexpr (std::is_same_v<Op, OpSum>) {
    if (scaled) return reduceElems<T, OpSum, true>(&dst, 1, &src, 1, elems, tid, nt, 1, 0, scale);
  }
  copyBytes(dst, src, elems * sizeof(T), tid, nt);
}

template <typename T, typename Op>
__global__ void __launch_bounds__(kMaxBlockThreads, 1) reduceKernel(DeviceCtx c, ReduceArgs a) {
  constexpr uint64_t E = sizeof(T);
  BlockPipes s = loadPipes(c);
  const Segments seg{a, c.nranks};
  const int me = c.rank, n = c.nranks;
  const bool toRoot = a.coll == Coll::Reduce;
  // Two-shot allreduce gathers to every peer, two-shot reduce to the root.
  const bool gatherAll = a.coll == Coll::AllReduce && !a.oneShot, gatherRoot = toRoot && !a.oneShot;
  // A one-shot reduce's non-roots only send.
  const bool reduces = !(a.oneShot && toRoot && me != a.root);
  const uint32_t tid = threadIdx.x, nt = blockDim.x;
  T scale{};
  const bool scaled = preMulScalar<T, Op>(a.preMul, &scale);
  const uint64_t steps = (seg.length(0) + a.chunkElems - 1) / a.chunkElems;  // segment 0 is the longest
  for (uint64_t c0 = blockIdx.x; c0 < steps; c0 += gridDim.x) {
    const uint64_t off = c0 * a.chunkElems;
    // Stage 1: chunk c0 of segment p to its owner p (one-shot reduce: the root only).
    auto rsTo = [&](int p) -> uint64_t {
      return p != me && !(a.oneShot && toRoot && p != a.root) ? seg.chunk(p, c0) * E : 0;
    };
    if (!waitStage(c, s, rsTo, Nobody{}, a.coll)) break;
    for (int p = 0; p < n; ++p)
      if (rsTo(p)) copyOwn<T, Op>(sendSlot(c, s, p), a.send + (seg.start(p) + off) * E, seg.chunk(p, c0), scaled, scale, tid, nt);
    signalStage(c, s, rsTo, Nobody{}, a.coll);
    // Stage 2: reduce chunk c0 of my segment; write it out (and gather it).
    const uint64_t mine = seg.chunk(me, c0);
    if (mine > 0 && reduces) {
      auto fromPeer = [&](int q) { return q != me; };
      auto gatherTo = [&](int p) -> uint64_t { return p != me && (gatherAll || (gatherRoot && p == a.root)) ? mine * E : 0; };
      if (!waitStage(c, s, gatherTo, fromPeer, a.coll)) break;
      int ndst = 0;
      if (tid == 0) {
        const uint64_t first = seg.start(me) + off;
        for (int q = 0; q < n; ++q) s.ptrs[q] = q == me ? const_cast<char*>(a.send) + first * E : recvSlot(c, s, q);
        char** dst = s.ptrs + n;
        if (a.coll == Coll::ReduceScatter) dst[ndst++] = a.recv + off * E;
        else if (!toRoot || me == a.root) dst[ndst++] = a.recv + first * E;
        for (int p = 0; p < n; ++p)
          if (gatherTo(p)) dst[ndst++] = sendSlot(c, s, p);
        *s.ndst = ndst;
      }
      __syncthreads();
      ndst = *s.ndst;
      if constexpr (std::is_same_v<Op, OpSum>) {
        if (scaled) reduceElems<T, OpSum, true>(s.ptrs + n, ndst, s.ptrs, n, mine, tid, nt, a.divisor, me, scale);
        else reduceElems<T, Op>(s.ptrs + n, ndst, s.ptrs, n, mine, tid, nt, a.divisor);
      } else {
        reduceElems<T, Op>(s.ptrs + n, ndst, s.ptrs, n, mine, tid, nt, a.divisor);
      }
      signalStage(c, s, gatherTo, fromPeer, a.coll);
    }
    // Stage 3: gathered chunks of the other segments.
    if (gatherAll || (gatherRoot && me == a.root)) {
      auto gatherFrom = [&](int q) { return q != me && seg.chunk(q, c0) > 0; };
      if (!waitStage(c, s, Nobody{}, gatherFrom, a.coll)) break;
      for (int q = 0; q < n; ++q)
        if (gatherFrom(q)) copyBytes(a.recv + (seg.start(q) + off) * E, recvSlot(c, s, q), seg.chunk(q, c0) * E, tid, nt);
      signalStage(c, s, Nobody{}, gatherFrom, a.coll);
    }
  }
  storePipes(c, s);
}

}  // namespace

void launchReduce(const DeviceCtx& c, const ReduceArgs& a, DataType type, ReduceOp op, uint32_t threads,
                  cudaStream_t stream) {
  // Segment 0 is the longest: its chunk count is the number of steps.
  uint64_t longest = a.count;
  if (a.coll != Coll::ReduceScatter && !a.oneShot) {
    const uint64_t units = (a.count + a.unitElems - 1) / a.unitElems;
    longest = ((units + c.nranks - 1) / c.nranks) * a.unitElems;
    if (longest > a.count) longest = a.count;
  }
  const uint64_t steps = (longest + a.chunkElems - 1) / a.chunkElems;
  const uint32_t grid = static_cast<uint32_t>(steps < static_cast<uint64_t>(c.blocks) ? steps : c.blocks);
  if (grid == 0) return;
  dispatchTypeOp(type, op, [&](auto t, auto o) {
    reduceKernel<decltype(t), decltype(o)><<<grid, threads, pipesSharedBytes(c.nranks), stream>>>(c, a);
  });
  PB_CUDA_CHECK(cudaGetLastError());
}

void preloadReduceKernels(uint32_t threads, size_t shared, uint32_t* perSM) {
  for (DataType t : kAllTypes)
    for (ReduceOp op : kKernelOps)
      dispatchTypeOp(t, op, [&](auto tv, auto ov) {
        loadKernel(reinterpret_cast<const void*>(reduceKernel<decltype(tv), decltype(ov)>), threads, shared, perSM);
      });
}

}  // namespace plugboard::gpucoll
