// Byte-moving collectives (allgather, broadcast, alltoall, send, recv) and
// the fused sendRecv: kernels not templated on the element type. Block b
// moves chunks b, b + G, ... of every peer block through the pipes
// (pipe_device.cuh).
#include <climits>

#include "gpu/collectives/kernels.hpp"
#include "gpu/collectives/pipe_device.cuh"
#include "gpu/cuda_check.hpp"

namespace plugboard::gpucoll {
namespace {

/// Does this rank send its data to p / receive p's data, in collective a?
struct Roles {
  const MoveArgs& a;
  int rank;
  __device__ bool sendTo(int p) const {
    switch (a.coll) {
      case Coll::AllGather: case Coll::AllToAll: return p != rank;
      case Coll::Broadcast: return rank == a.peer && p != rank;
      case Coll::Send: return p == a.peer;
      default: return false;
    }
  }
  __device__ bool recvFrom(int q) const {
    switch (a.coll) {
      case Coll::AllGather: case Coll::AllToAll: return q != rank;
      case Coll::Broadcast: return rank != a.peer && q == a.peer;
      case Coll::Recv: return q == a.peer;
      default: return false;
    }
  }
  /// Offset in src of the block for peer p, and in dst of the block from q.
  __device__ uint64_t srcOffset(int p) const { return a.coll == Coll::AllToAll ? p * a.bytes : 0; }
  __device__ uint64_t dstOffset(int q) const {
    return (a.coll == Coll::AllGather || a.coll == Coll::AllToAll) ? q * a.bytes : 0;
  }
  /// This rank's own block, copied locally unless in place (null: none).
  __device__ const char* localSrc() const {
    if (a.coll == Coll::AllGather || a.coll == Coll::AllToAll) return a.src + srcOffset(rank);
    if (a.coll == Coll::Broadcast && rank == a.peer) return a.src;
    return nullptr;
  }
  __device__ char* localDst() const { return a.dst + dstOffset(rank); }
};

__global__ void __launch_bounds__(kMaxBlockThreads, 1) moveKernel(DeviceCtx c, MoveArgs a) {
  BlockPipes s = loadPipes(c);
  const Roles r{a, c.rank};
  auto recvFrom = [&](int q) { return r.recvFrom(q); };
  const uint32_t tid = threadIdx.x, nt = blockDim.x;
  for (uint64_t off = blockIdx.x * a.chunkBytes; off < a.bytes; off += gridDim.x * a.chunkBytes) {
    const uint64_t len = a.bytes - off < a.chunkBytes ? a.bytes - off : a.chunkBytes;
    auto sendTo = [&](int p) -> uint64_t { return r.sendTo(p) ? len : 0; };
    if (!waitStage(c, s, sendTo, Nobody{}, a.coll)) break;
    for (int p = 0; p < c.nranks; ++p)
      if (p != c.rank && r.sendTo(p)) copyBytes(sendSlot(c, s, p), a.src + r.srcOffset(p) + off, len, tid, nt);
    const char* own = r.localSrc();
    if (own && own != r.localDst()) copyBytes(r.localDst() + off, own + off, len, tid, nt);
    signalStage(c, s, sendTo, Nobody{}, a.coll);
    if (!waitStage(c, s, Nobody{}, recvFrom, a.coll)) break;
    for (int q = 0; q < c.nranks; ++q)
      if (q != c.rank && r.recvFrom(q)) copyBytes(a.dst + r.dstOffset(q) + off, recvSlot(c, s, q), len, tid, nt);
    signalStage(c, s, Nobody{}, recvFrom, a.coll);
  }
  storePipes(c, s);
}

/// Length of chunk i of a direction (0: past its end).
__device__ __forceinline__ uint64_t chunkLen(uint64_t i, uint64_t chunk, uint64_t bytes) {
  const uint64_t off = i * chunk;
  if (off >= bytes) return 0;
  return bytes - off < chunk ? bytes - off : chunk;
}

/// Barrier of `threads` threads (a multiple of 32) on named barrier `id` (>= 1).
__device__ __forceinline__ void groupBarrier(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

/// The sending half of a sendRecv block (threads [0, nt)): chunk
/// i = b + kG to sendPeer for k = 0, 1, ...; thread 0 owns the pipe. It
/// waits only for acks, so it runs up to `slots` chunks ahead of the peer.
/// Ends with *s.sent = INT_MAX (or *s.fail set) so the receiving half never
/// waits for it in vain.
__device__ void sendHalf(const DeviceCtx& c, const BlockPipes& s, const SendRecvArgs& a, uint32_t tid, uint32_t nt) {
  const int p = a.sendPeer;
  for (uint64_t i = blockIdx.x;; i += gridDim.x) {
    const uint64_t len = chunkLen(i, a.sendChunk, a.sendBytes);
    if (len == 0) break;
    if (tid == 0 && s.seq[p] >= c.layout.slots && !waitPeer(c, p, kAck, Coll::SendRecv))
      halfFlag(s.fail).exchange(1, cuda::memory_order_release);
    groupBarrier(1, nt);
    if (*s.fail) return;  // uniform: only thread 0 writes it, before the barrier
    copyBytes(sendSlot(c, s, p), a.src + i * a.sendChunk, len, tid, nt);
    fenceForProxy(c);
    groupBarrier(1, nt);
    if (tid == 0) {
      if (!viaPort(c, p)) semaphore(c, p, kData).signal();
      else if (!putToPeer(c, p, s.seq[p], len, Coll::SendRecv)) halfFlag(s.fail).exchange(1, cuda::memory_order_release);
      ++s.seq[p];
      halfFlag(s.sent).fetch_add(1, cuda::memory_order_release);  // this half read chunk k (its barrier above)
    }
  }
  if (tid == 0) halfFlag(s.sent).exchange(INT_MAX, cuda::memory_order_release);
}

/// The receiving half (threads [0, nt) of its own numbering): chunk
/// i = b + kG from recvPeer; thread 0 owns the pipe. In place (src == dst)
/// it writes chunk k only after the sending half has read chunk k.
__device__ void recvHalf(const DeviceCtx& c, const BlockPipes& s, const SendRecvArgs& a, uint32_t tid, uint32_t nt) {
  const int q = a.recvPeer;
  const bool inPlace = a.src == a.dst;
  int k = 0;
  for (uint64_t i = blockIdx.x;; i += gridDim.x, ++k) {
    const uint64_t len = chunkLen(i, a.recvChunk, a.recvBytes);
    if (len == 0) break;
    if (tid == 0) {
      if (!waitPeer(c, q, kData, Coll::SendRecv)) *s.recvFail = 1;
      while (inPlace && halfFlag(s.sent).load(cuda::memory_order_acquire) <= k &&
             !halfFlag(s.fail).load(cuda::memory_order_relaxed)) {
      }
      if (halfFlag(s.fail).load(cuda::memory_order_acquire)) *s.recvFail = 1;
    }
    groupBarrier(2, nt);
    if (*s.recvFail) return;
    copyBytes(a.dst + i * a.recvChunk, recvSlot(c, s, q), len, tid, nt);
    fenceForProxy(c);
    groupBarrier(2, nt);
    if (tid == 0 && !returnSlot(c, s, q, Coll::SendRecv)) *s.recvFail = 1;
  }
}

/// sendRecv: each block splits into a sending and a receiving half (warp
/// multiples, named barriers 1 and 2), so both directions stream at once
/// and neither waits for the other. The waits cannot form a cycle: a
/// sending half waits only for acks of its own earlier messages, a
/// receiving half only for data (and, in place, for its own block's
/// sending half, which depends on acks the peer gives for older chunks).
/// Each direction is chunked exactly as a plain Send / Recv (chunk i on
/// block i % G), so the peer may call either. Each half's owner thread,
/// the only one that advanced its pipe's counter, writes it back (no
/// storePipes: the halves share no barrier after their loops, and
/// racecheck reported the owner's last advance against another thread's
/// read of it across storePipes' __syncthreads).
__global__ void __launch_bounds__(kMaxBlockThreads, 1) sendRecvKernel(DeviceCtx c, SendRecvArgs a) {
  BlockPipes s = loadPipes(c);
  const uint32_t sendThreads = blockDim.x / 64 * 32;  // a warp multiple, >= 32 (blockDim >= 64)
  if (threadIdx.x < sendThreads) {
    sendHalf(c, s, a, threadIdx.x, sendThreads);
    if (threadIdx.x == 0 && a.sendBytes) storePipe(c, s, a.sendPeer);
  } else {
    recvHalf(c, s, a, threadIdx.x - sendThreads, blockDim.x - sendThreads);
    if (threadIdx.x == sendThreads && a.recvBytes) storePipe(c, s, c.nranks + a.recvPeer);
  }
}

uint32_t gridFor(uint64_t bytes, uint64_t chunk, int blocks) {
  const uint64_t chunks = (bytes + chunk - 1) / chunk;
  return static_cast<uint32_t>(chunks < static_cast<uint64_t>(blocks) ? chunks : blocks);
}

}  // namespace

void launchMove(const DeviceCtx& c, const MoveArgs& a, uint32_t threads, cudaStream_t stream) {
  moveKernel<<<gridFor(a.bytes, a.chunkBytes, c.blocks), threads, pipesSharedBytes(c.nranks), stream>>>(c, a);
  PB_CUDA_CHECK(cudaGetLastError());
}

void launchSendRecv(const DeviceCtx& c, const SendRecvArgs& a, uint32_t threads, cudaStream_t stream) {
  // The grid covers the longer direction; a block past one direction's end
  // leaves that pipe alone, as the plain Send / Recv grid would.
  const uint32_t sendGrid = a.sendBytes ? gridFor(a.sendBytes, a.sendChunk, c.blocks) : 0;
  const uint32_t recvGrid = a.recvBytes ? gridFor(a.recvBytes, a.recvChunk, c.blocks) : 0;
  sendRecvKernel<<<sendGrid > recvGrid ? sendGrid : recvGrid, threads, pipesSharedBytes(c.nranks), stream>>>(c, a);
  PB_CUDA_CHECK(cudaGetLastError());
}

void preloadMoveKernels(uint32_t threads, size_t shared, uint32_t* perSM) {
  loadKernel(reinterpret_cast<const void*>(moveKernel), threads, shared, perSM);
  loadKernel(reinterpret_cast<const void*>(sendRecvKernel), threads, shared, perSM);
}

}  // namespace plugboard::gpucoll
