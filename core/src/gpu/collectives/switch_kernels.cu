// SwitchChannel collectives (NCCL's NVLS algorithms): allreduce as a
// reduce-scatter by reduce() and an all-gather by broadcast() on the
// group buffer, allgather by broadcast(). The same code runs on the
// multicast and the peers backends (switch_channel_device.hpp).
//
// A call runs in rounds that fit the buffer. In a round every rank owns
// one 16-byte aligned slice of the buffer; block b of every rank handles
// piece b of every slice and meets only block b of the other ranks at the
// barriers (slot b), so blocks never wait for each other.
//
// Buffer invariants (any sequence of these calls, any mix):
//  - allreduce: copy-in (own buffer) -> barrier -> reduce + broadcast of
//    this rank's slice (every buffer) -> barrier -> copy-out (own buffer).
//    Writes into other ranks' buffers come after a barrier that every rank
//    reached after its previous copy-out.
//  - allgather: barrier -> broadcast of this rank's block (every buffer,
//    at this rank's slice) -> barrier -> copy-out. The leading barrier
//    keeps the broadcast behind every rank's previous copy-out.
#include <string>

#include "gpu/collectives/kernels.hpp"
#include "gpu/collectives/pipe_device.cuh"
#include "gpu/cuda_check.hpp"
#include "plugboard/gpu/switch_channel_device.hpp"

namespace plugboard::gpucoll {
namespace {

/// Round geometry: slice (per rank) and piece (per block) in bytes, both
/// multiples of 16; bytes of data in the round.
struct Round {
  uint64_t slice, piece, bytes;
};

__device__ inline uint64_t roundUp16(uint64_t v) { return (v + 15) & ~uint64_t(15); }

/// One round of `remaining` bytes spread over `ways` slices of at most sliceCap.
__device__ inline Round roundOf(uint64_t remaining, uint64_t sliceCap, int ways, int blocks) {
  uint64_t slice = roundUp16((remaining + ways - 1) / ways);
  if (slice > sliceCap) slice = sliceCap;
  const uint64_t bytes = remaining < slice * ways ? remaining : slice * ways;
  return {slice, roundUp16((slice + blocks - 1) / blocks), bytes};
}

/// Bytes [lo, hi) of piece `b` of a slice of `slice` bytes.
__device__ inline void pieceRange(const Round& r, int b, uint64_t* lo, uint64_t* hi) {
  const uint64_t a = r.piece * b, e = r.piece * (b + 1);
  *lo = a < r.slice ? a : r.slice;
  *hi = e < r.slice ? e : r.slice;
}

/// Copies bytes with the block's threads: 16-byte words where both ends
/// are 16-aligned, bytes otherwise.
__device__ inline void blockCopy(char* dst, const char* src, uint64_t bytes) {
  if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15) == 0) {
    const uint64_t words = bytes / 16;
    for (uint64_t i = threadIdx.x; i < words; i += blockDim.x)
      reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
    for (uint64_t i = words * 16 + threadIdx.x; i < bytes; i += blockDim.x) dst[i] = src[i];
    return;
  }
  for (uint64_t i = threadIdx.x; i < bytes; i += blockDim.x) dst[i] = src[i];
}

/// Up to 16 bytes at src (any alignment) as one vector; bytes past `valid` are 0.
__device__ inline SwitchVec<4> loadWord(const char* src, uint64_t valid) {
  if (valid >= 16 && (reinterpret_cast<uintptr_t>(src) & 15) == 0) return *reinterpret_cast<const SwitchVec<4>*>(src);
  SwitchVec<4> w{{0, 0, 0, 0}};
  char* bytes = reinterpret_cast<char*>(w.w);
  for (uint64_t i = 0; i < 16 && i < valid; ++i) bytes[i] = src[i];
  return w;
}

/// Block barrier of the group at slot blockIdx.x. False (recorded, every
/// thread told) when the wait timed out or was aborted.
__device__ inline bool groupBarrier(const DeviceCtx& c, const SwitchChannelDeviceHandle& sw, Coll coll, int* fail) {
  __syncthreads();
  if (threadIdx.x == 0) {
    sw.arrive(blockIdx.x);
    if (!sw.wait(blockIdx.x, c.waitTimeoutNs, c.abortFlag)) {
      atomicCAS(c.first, 0u, encodeFailure(-1, coll, *c.abortFlag ? kSemaphoreAborted : kSemaphoreWaitTimeout));
      __threadfence_system();
      *c.abortFlag = 1;
      *fail = 1;
    }
  }
  __syncthreads();
  return !*fail;
}

template <SwitchType T, SwitchOp Op>
__global__ void __launch_bounds__(kMaxBlockThreads)
    switchAllReduceKernel(DeviceCtx c, SwitchChannelDeviceHandle sw, SwitchCallArgs a) {
  __shared__ int fail;
  if (threadIdx.x == 0) fail = 0;
  const int n = c.nranks, G = gridDim.x, b = blockIdx.x;
  const uint64_t sliceCap = sw.dataBytes / n / 16 * 16;
  for (uint64_t done = 0; done < a.bytes;) {
    const Round r = roundOf(a.bytes - done, sliceCap, n, G);
    uint64_t lo, hi;
    pieceRange(r, b, &lo, &hi);
    for (int s = 0; s < n; ++s) {  // copy-in: piece b of every slice
      const uint64_t at = s * r.slice + lo, end = s * r.slice + hi < r.bytes ? s * r.slice + hi : r.bytes;
      if (at < end) blockCopy(sw.local + at, a.send + done + at, end - at);
    }
    if (!groupBarrier(c, sw, a.coll, &fail)) return;
    const uint64_t mine = c.rank * r.slice, padEnd = roundUp16(r.bytes);
    for (uint64_t off = mine + lo + 16 * threadIdx.x; off < mine + hi && off < padEnd; off += 16 * blockDim.x)
      sw.broadcast(off, sw.template reduce<T, Op>(off));
    if (!groupBarrier(c, sw, a.coll, &fail)) return;
    for (int s = 0; s < n; ++s) {  // copy-out: piece b of every slice
      const uint64_t at = s * r.slice + lo, end = s * r.slice + hi < r.bytes ? s * r.slice + hi : r.bytes;
      if (at < end) blockCopy(a.recv + done + at, sw.local + at, end - at);
    }
    done += r.bytes;
  }
}

__global__ void __launch_bounds__(kMaxBlockThreads)
    switchAllGatherKernel(DeviceCtx c, SwitchChannelDeviceHandle sw, SwitchCallArgs a) {
  __shared__ int fail;
  if (threadIdx.x == 0) fail = 0;
  const int n = c.nranks, G = gridDim.x, b = blockIdx.x;
  const uint64_t sliceCap = sw.dataBytes / n / 16 * 16;
  for (uint64_t done = 0; done < a.bytes;) {
    const Round r = roundOf(a.bytes - done, sliceCap, 1, G);  // one slice: this rank's block
    uint64_t lo, hi;
    pieceRange(r, b, &lo, &hi);
    if (!groupBarrier(c, sw, a.coll, &fail)) return;
    if (hi > r.bytes) hi = r.bytes;  // the slice is padded to 16 bytes; the block's data is not
    const uint64_t mine = c.rank * sliceCap;
    for (uint64_t off = lo + 16 * threadIdx.x; off < hi; off += 16 * blockDim.x)
      sw.broadcast(mine + off, loadWord(a.send + done + off, hi - off));
    if (!groupBarrier(c, sw, a.coll, &fail)) return;
    for (int s = 0; s < n; ++s)
      if (lo < hi) blockCopy(a.recv + s * a.bytes + done + lo, sw.local + s * sliceCap + lo, hi - lo);
    done += r.bytes;
  }
}

template <SwitchType T, SwitchOp Op>
void launchAllReduce(const DeviceCtx& c, const SwitchChannelDeviceHandle& sw, const SwitchCallArgs& a,
                     uint32_t threads, cudaStream_t stream) {
  switchAllReduceKernel<T, Op><<<c.blocks, threads, 0, stream>>>(c, sw, a);
}

template <SwitchType T>
void launchAllReduceOp(const DeviceCtx& c, const SwitchChannelDeviceHandle& sw, const SwitchCallArgs& a, ReduceOp op,
                       uint32_t threads, cudaStream_t stream) {
  if constexpr (T == SwitchType::Float32) {
    launchAllReduce<T, SwitchOp::Sum>(c, sw, a, threads, stream);
  } else {
    if (op == ReduceOp::Sum) launchAllReduce<T, SwitchOp::Sum>(c, sw, a, threads, stream);
    else if (op == ReduceOp::Min) launchAllReduce<T, SwitchOp::Min>(c, sw, a, threads, stream);
    else launchAllReduce<T, SwitchOp::Max>(c, sw, a, threads, stream);
  }
}

}  // namespace

void preloadSwitchKernels() {
  cudaFuncAttributes attr;
  PB_CUDA_CHECK(cudaFuncGetAttributes(&attr, switchAllReduceKernel<SwitchType::Float32, SwitchOp::Sum>));
  PB_CUDA_CHECK(cudaFuncGetAttributes(&attr, switchAllReduceKernel<SwitchType::Float16, SwitchOp::Sum>));
  PB_CUDA_CHECK(cudaFuncGetAttributes(&attr, switchAllReduceKernel<SwitchType::Float16, SwitchOp::Min>));
  PB_CUDA_CHECK(cudaFuncGetAttributes(&attr, switchAllReduceKernel<SwitchType::Float16, SwitchOp::Max>));
  PB_CUDA_CHECK(cudaFuncGetAttributes(&attr, switchAllReduceKernel<SwitchType::BFloat16, SwitchOp::Sum>));
  PB_CUDA_CHECK(cudaFuncGetAttributes(&attr, switchAllReduceKernel<SwitchType::BFloat16, SwitchOp::Min>));
  PB_CUDA_CHECK(cudaFuncGetAttributes(&attr, switchAllReduceKernel<SwitchType::BFloat16, SwitchOp::Max>));
  PB_CUDA_CHECK(cudaFuncGetAttributes(&attr, switchAllGatherKernel));
}

void launchSwitchAllReduce(const DeviceCtx& c, const SwitchChannelDeviceHandle& sw, const SwitchCallArgs& a,
                           DataType type, ReduceOp op, uint32_t threads, cudaStream_t stream) {
  if (type == DataType::Float32) launchAllReduceOp<SwitchType::Float32>(c, sw, a, op, threads, stream);
  else if (type == DataType::Float16) launchAllReduceOp<SwitchType::Float16>(c, sw, a, op, threads, stream);
  else launchAllReduceOp<SwitchType::BFloat16>(c, sw, a, op, threads, stream);
  PB_CUDA_CHECK(cudaGetLastError());
}

void launchSwitchAllGather(const DeviceCtx& c, const SwitchChannelDeviceHandle& sw, const SwitchCallArgs& a,
                           uint32_t threads, cudaStream_t stream) {
  switchAllGatherKernel<<<c.blocks, threads, 0, stream>>>(c, sw, a);
  PB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace plugboard::gpucoll
