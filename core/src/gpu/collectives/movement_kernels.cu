// Byte-moving collectives (allgather, broadcast, alltoall, send, recv):
// one kernel, not templated on the element type. Block b moves chunks
// b, b + G, ... of every peer block through the pipes (pipe_device.cuh).
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

}  // namespace

void launchMove(const DeviceCtx& c, const MoveArgs& a, uint32_t threads, cudaStream_t stream) {
  const uint64_t chunks = (a.bytes + a.chunkBytes - 1) / a.chunkBytes;
  const uint32_t grid = static_cast<uint32_t>(chunks < static_cast<uint64_t>(c.blocks) ? chunks : c.blocks);
  moveKernel<<<grid, threads, pipesSharedBytes(c), stream>>>(c, a);
  PB_CUDA_CHECK(cudaGetLastError());
}

void preloadMoveKernels() {
  cudaFuncAttributes attr;
  PB_CUDA_CHECK(cudaFuncGetAttributes(&attr, moveKernel));
}

}  // namespace plugboard::gpucoll
