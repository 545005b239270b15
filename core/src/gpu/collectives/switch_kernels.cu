// SwitchChannel collectives (NCCL's NVLS algorithms): allreduce as a
// reduce-scatter by reduce() and an all-gather by broadcast() on the
// group buffer, allgather by broadcast(). The same code runs on the
// multicast and the peers backends (switch_channel_device.hpp).
//
// Geometry, fixed for the channel whatever the call: each rank's buffer is
// cut into nranks x blocks cells of a.cell bytes (gpu_switch_bytes /
// (nranks x blocks), or gpu_switch_chunk_bytes if smaller), cell (s, b) at
// (s * blocks + b) * a.cell. Block b of every rank only ever touches cells
// (., b) of any buffer and meets only block b of the other ranks at the
// barriers (slot b). So blocks never wait for one another, and no block
// can touch bytes another block of its rank still uses from an earlier
// round or call (a geometry that changed with the message size let a
// block's new piece overlap a slower block's old one: wrong results).
//
// A call runs in rounds of at most nranks x blocks x cellCap bytes; a
// round puts c bytes in each cell (c a multiple of 16), message bytes
// [(s * blocks + b) * c, + c) of the round in cell (s, b).
//
// Buffer invariants (any sequence of these calls, any mix), per block:
//  - allreduce: copy-in (own buffer) -> barrier -> reduce + broadcast of
//    cells (this rank, b) (every buffer) -> barrier -> copy-out (own).
//    Writes into other ranks' buffers come after a barrier that every rank
//    reached after its previous copy-out.
//  - allgather: barrier -> broadcast of this rank's block into cells
//    (this rank, b) of every buffer -> barrier -> copy-out. The leading
//    barrier keeps the broadcast behind every rank's previous copy-out.
#include <string>

#include "gpu/collectives/kernels.hpp"
#include "gpu/collectives/pipe_device.cuh"
#include "gpu/cuda_check.hpp"
#include "plugboard/gpu/switch_channel_device.hpp"

namespace plugboard::gpucoll {
namespace {

__device__ inline uint64_t roundUp16(uint64_t v) { return (v + 15) & ~uint64_t(15); }
__device__ inline uint64_t minU64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/// Offset of cell (s, b) in every rank's buffer.
__device__ inline uint64_t cellAt(int s, int b, int blocks, uint64_t cellCap) {
  return (static_cast<uint64_t>(s) * blocks + b) * cellCap;
}

/// A round of `bytes` (> 0) over `cells` cells: c bytes per cell (a multiple of 16).
__device__ inline uint64_t perCell(uint64_t bytes, uint64_t cells) { return roundUp16((bytes + cells - 1) / cells); }

/// Message bytes of cell number k (k = s * blocks + b) in a round of `bytes` with c per cell.
__device__ inline uint64_t cellBytes(uint64_t k, uint64_t c, uint64_t bytes) {
  return k * c >= bytes ? 0 : minU64(c, bytes - k * c);
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
  const uint64_t cap = a.cell, cells = static_cast<uint64_t>(n) * G;
  for (uint64_t done = 0; done < a.bytes;) {
    const uint64_t bytes = minU64(a.bytes - done, cells * cap), per = perCell(bytes, cells);
    for (int s = 0; s < n; ++s) {  // copy-in: cells (s, b)
      const uint64_t k = static_cast<uint64_t>(s) * G + b, len = cellBytes(k, per, bytes);
      if (len) blockCopy(sw.local + cellAt(s, b, G, cap), a.send + done + k * per, len);
    }
    if (!groupBarrier(c, sw, a.coll, &fail)) return;
    const uint64_t mine = cellAt(c.rank, b, G, cap);
    const uint64_t len = roundUp16(cellBytes(static_cast<uint64_t>(c.rank) * G + b, per, bytes));
    for (uint64_t off = mine + 16 * threadIdx.x; off < mine + len; off += 16 * blockDim.x)
      sw.broadcast(off, sw.template reduce<T, Op>(off));
    if (!groupBarrier(c, sw, a.coll, &fail)) return;
    for (int s = 0; s < n; ++s) {  // copy-out: cells (s, b)
      const uint64_t k = static_cast<uint64_t>(s) * G + b, len = cellBytes(k, per, bytes);
      if (len) blockCopy(a.recv + done + k * per, sw.local + cellAt(s, b, G, cap), len);
    }
    // The next round's copy-in rewrites these cells, possibly with threads
    // mapped to other bytes (blockCopy's split follows the pointers' alignment).
    __syncthreads();
    done += bytes;
  }
}

__global__ void __launch_bounds__(kMaxBlockThreads)
    switchAllGatherKernel(DeviceCtx c, SwitchChannelDeviceHandle sw, SwitchCallArgs a) {
  __shared__ int fail;
  if (threadIdx.x == 0) fail = 0;
  const int n = c.nranks, G = gridDim.x, b = blockIdx.x;
  const uint64_t cap = a.cell;
  for (uint64_t done = 0; done < a.bytes;) {  // a.bytes: one rank's block
    const uint64_t bytes = minU64(a.bytes - done, static_cast<uint64_t>(G) * cap), per = perCell(bytes, G);
    const uint64_t len = cellBytes(b, per, bytes), from = done + b * per;
    if (!groupBarrier(c, sw, a.coll, &fail)) return;
    const uint64_t mine = cellAt(c.rank, b, G, cap);
    for (uint64_t off = 16 * threadIdx.x; off < len; off += 16 * blockDim.x)
      sw.broadcast(mine + off, loadWord(a.send + from + off, len - off));
    if (!groupBarrier(c, sw, a.coll, &fail)) return;
    for (int s = 0; s < n; ++s)
      if (len) blockCopy(a.recv + s * a.bytes + from, sw.local + cellAt(s, b, G, cap), len);
    done += bytes;
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

void preloadSwitchKernels(uint32_t threads, uint32_t* perSM) {
  const void* kernels[] = {
      reinterpret_cast<const void*>(switchAllReduceKernel<SwitchType::Float32, SwitchOp::Sum>),
      reinterpret_cast<const void*>(switchAllReduceKernel<SwitchType::Float16, SwitchOp::Sum>),
      reinterpret_cast<const void*>(switchAllReduceKernel<SwitchType::Float16, SwitchOp::Min>),
      reinterpret_cast<const void*>(switchAllReduceKernel<SwitchType::Float16, SwitchOp::Max>),
      reinterpret_cast<const void*>(switchAllReduceKernel<SwitchType::BFloat16, SwitchOp::Sum>),
      reinterpret_cast<const void*>(switchAllReduceKernel<SwitchType::BFloat16, SwitchOp::Min>),
      reinterpret_cast<const void*>(switchAllReduceKernel<SwitchType::BFloat16, SwitchOp::Max>),
      reinterpret_cast<const void*>(switchAllGatherKernel)};
  for (const void* k : kernels) loadKernel(k, threads, 0, perSM);
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
