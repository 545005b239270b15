// Byte-moving collectives (allgather, broadcast, alltoall, send, recv) and
// the fused sendRecv: kernels not templated on the element type. Block b
// moves chunks b, b + G, ... of every peer block through the pipes
// (pipe_device.cuh).
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

__global__ void moveKernel(DeviceCtx c, MoveArgs a) {
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

/// sendRecv: every block serves both directions, so each direction gets
/// the whole grid's issue slots (the receive copy is local and short next
/// to the remote store of the send). Iteration i of block b sends chunk
/// i = b + kG to sendPeer, then receives chunk i from recvPeer. Sending
/// first matters: if every rank of a ring waited for its predecessor's
/// chunk before sending its own, none would start. The send of chunk i
/// only waits for the ack of message i - slots on that pipe, which the
/// receiver gave in an earlier iteration, so the waits never form a cycle.
/// In place (src == dst, equal counts) is safe: chunk i is read (into the
/// slot or the outbox) by this block before this block overwrites it.
__global__ void sendRecvKernel(DeviceCtx c, SendRecvArgs a) {
  BlockPipes s = loadPipes(c);
  const uint32_t tid = threadIdx.x, nt = blockDim.x;
  for (uint64_t i = blockIdx.x;; i += gridDim.x) {
    const uint64_t sendLen = chunkLen(i, a.sendChunk, a.sendBytes), recvLen = chunkLen(i, a.recvChunk, a.recvBytes);
    if (sendLen == 0 && recvLen == 0) break;  // uniform over the block
    if (sendLen) {
      auto sendTo = [&](int p) -> uint64_t { return p == a.sendPeer ? sendLen : 0; };
      if (!waitStage(c, s, sendTo, Nobody{}, Coll::SendRecv)) break;
      copyBytes(sendSlot(c, s, a.sendPeer), a.src + i * a.sendChunk, sendLen, tid, nt);
      signalStage(c, s, sendTo, Nobody{}, Coll::SendRecv);
    }
    if (recvLen) {
      auto recvFrom = [&](int q) { return q == a.recvPeer; };
      if (!waitStage(c, s, Nobody{}, recvFrom, Coll::SendRecv)) break;
      copyBytes(a.dst + i * a.recvChunk, recvSlot(c, s, a.recvPeer), recvLen, tid, nt);
      signalStage(c, s, Nobody{}, recvFrom, Coll::SendRecv);
    }
  }
  storePipes(c, s);
}

uint32_t gridFor(uint64_t bytes, uint64_t chunk, int blocks) {
  const uint64_t chunks = (bytes + chunk - 1) / chunk;
  return static_cast<uint32_t>(chunks < static_cast<uint64_t>(blocks) ? chunks : blocks);
}

}  // namespace

void launchMove(const DeviceCtx& c, const MoveArgs& a, uint32_t threads, cudaStream_t stream) {
  moveKernel<<<gridFor(a.bytes, a.chunkBytes, c.blocks), threads, pipesSharedBytes(c), stream>>>(c, a);
  PB_CUDA_CHECK(cudaGetLastError());
}

void launchSendRecv(const DeviceCtx& c, const SendRecvArgs& a, uint32_t threads, cudaStream_t stream) {
  // The grid covers the longer direction; a block past one direction's end
  // leaves that pipe alone, as the plain Send / Recv grid would.
  const uint32_t sendGrid = a.sendBytes ? gridFor(a.sendBytes, a.sendChunk, c.blocks) : 0;
  const uint32_t recvGrid = a.recvBytes ? gridFor(a.recvBytes, a.recvChunk, c.blocks) : 0;
  sendRecvKernel<<<sendGrid > recvGrid ? sendGrid : recvGrid, threads, pipesSharedBytes(c), stream>>>(c, a);
  PB_CUDA_CHECK(cudaGetLastError());
}

void preloadMoveKernels() {
  cudaFuncAttributes attr;
  PB_CUDA_CHECK(cudaFuncGetAttributes(&attr, moveKernel));
  PB_CUDA_CHECK(cudaFuncGetAttributes(&attr, sendRecvKernel));
}

}  // namespace plugboard::gpucoll
