// Point-to-point LL16 kernel for small send, recv and sendRecv: the sender
// stores its payload as LL16 packets straight into the receiver's p2p area
// for this rank, the receiver polls them into its output. One kernel does
// either direction or both (a sendRecv whose directions are both small).
//
// Invariants:
//  - Every pair is mapped (dispatch takes this path only then).
//  - Calls between a pair are numbered per direction (k = 1, 2, ...) by
//    device counters, one per (peer, block), all equal between calls (block
//    b reads and advances entry b; block 0 advances the entries of blocks
//    this call's grid does not run), so captured graphs get fresh numbers.
//    Sender and receiver count the same calls: both take this path for the
//    same byte count.
//  - Call k uses the receiver's area parity k % 2 with flag llFlag(k). Unlike
//    the collective LL kernel, a pair's p2p calls are not all-to-all, so the
//    sender may run ahead: before storing call k it waits until the
//    receiver has finished reading call k - 2 (same parity). The receiver's
//    last block to finish reading call k stores k into the sender's ack word
//    for this pair (blocks count themselves in a per-peer state word, reset
//    by that last block). So at most two calls per direction and pair are
//    outstanding; a third send waits (bounded by gpu_wait_timeout).
//  - Thread t sends packet i and later receives packet i (same grid for
//    equal sizes), so an in-place sendRecv of equal counts reads each input
//    byte before overwriting it.
#include "gpu/collectives/kernels.hpp"
#include "gpu/collectives/ll_packet.cuh"
#include "gpu/cuda_check.hpp"

namespace plugboard::gpucoll {
namespace {

/// The p2p part of the state array (see DeviceCtx).
struct P2PState {
  uint64_t* sent;      ///< [peer][block]
  uint64_t* received;  ///< [peer][block]
  uint64_t* done;      ///< [peer]: blocks of the current receive that finished reading

  __device__ explicit P2PState(const DeviceCtx& c) {
    const uint64_t nG = static_cast<uint64_t>(c.nranks) * c.blocks;
    sent = c.state + 4 * nG + c.blocks;
    received = sent + nG;
    done = received + nG;
  }
};

/// Thread 0: waits until `peer` acknowledged reading our call k - 2 to it.
__device__ bool waitForCredit(const DeviceCtx& c, int peer, uint64_t k, Coll coll) {
  if (k <= 2) return true;
  const volatile uint64_t* ack = reinterpret_cast<const uint64_t*>(c.local + c.layout.p2pAcks) + peer;
  WaitClock clock(c.waitTimeoutNs);
  for (int64_t spins = 0;; ++spins) {
    if (*ack >= k - 2) return true;
    if (!WaitClock::checkNow(spins)) continue;
    if (*c.abortFlag || clock.expired()) {
      recordFailure(c, peer, coll, *c.abortFlag ? kSemaphoreAborted : kSemaphoreWaitTimeout);
      return false;
    }
  }
}

/// Offset of (source, parity) in a p2p area.
__device__ __forceinline__ uint64_t p2pOffset(const DeviceCtx& c, int source, uint64_t k) {
  return c.layout.p2p + (2ull * source + (k & 1)) * c.layout.p2pHalf;
}

/// The sending half: call k's packets into the peer's area for this rank.
__device__ bool sendPackets(const DeviceCtx& c, const P2PLLArgs& a, uint64_t k, int* fail) {
  if (threadIdx.x == 0 && !waitForCredit(c, a.sendPeer, k, a.coll)) *fail = 1;
  __syncthreads();
  if (*fail) return false;
  const uint32_t flag = llFlag(k);
  char* dst = c.remote[a.sendPeer] + p2pOffset(c, c.rank, k);
  const uint64_t packets = (a.sendBytes + 7) / 8, gsize = gridDim.x * blockDim.x;
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < packets; i += gsize)
    storePacket(dst + 16 * i, loadPayload(a.src, i, a.sendBytes), flag);
  return true;
}

/// The receiving half: polls call k's packets into dst, then the last block
/// to finish tells the sender the area is free again.
__device__ bool receivePackets(const DeviceCtx& c, const P2PLLArgs& a, const P2PState& st, uint64_t k) {
  const uint32_t flag = llFlag(k);
  const char* src = c.local + p2pOffset(c, a.recvPeer, k);
  const uint64_t packets = (a.recvBytes + 7) / 8, gsize = gridDim.x * blockDim.x;
  bool ok = true;
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; ok && i < packets; i += gsize) {
    uint2 v;
    ok = pollPacket(c, src + 16 * i, flag, a.recvPeer, a.coll, v);
    if (ok) storeResult(a.dst, i, a.recvBytes, v);
  }
  if (!__syncthreads_and(ok)) return false;
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(reinterpret_cast<unsigned long long*>(st.done + a.recvPeer), 1ull) == gridDim.x - 1) {
      st.done[a.recvPeer] = 0;
      __threadfence_system();
      volatile uint64_t* ack = reinterpret_cast<uint64_t*>(c.remote[a.recvPeer] + c.layout.p2pAcks) + c.rank;
      *ack = k;
    }
  }
  return true;
}

/// Block 0 carries a counter array's entries of the blocks not in this grid.
__device__ void advanceIdleBlocks(const DeviceCtx& c, uint64_t* entries, uint64_t k) {
  if (blockIdx.x != 0) return;
  for (uint32_t b = gridDim.x + threadIdx.x; b < static_cast<uint32_t>(c.blocks); b += blockDim.x) entries[b] = k;
}

__global__ void __launch_bounds__(kMaxBlockThreads, 1) p2pLLKernel(DeviceCtx c, P2PLLArgs a) {
  __shared__ int fail;
  const P2PState st(c);
  const uint32_t b = blockIdx.x;
  uint64_t* sent = st.sent + static_cast<uint64_t>(a.sendPeer) * c.blocks;
  uint64_t* received = st.received + static_cast<uint64_t>(a.recvPeer) * c.blocks;
  const uint64_t sendK = sent[b] + 1, recvK = received[b] + 1;
  if (threadIdx.x == 0) fail = 0;
  __syncthreads();
  if (a.sendBytes && !sendPackets(c, a, sendK, &fail)) return;
  if (a.recvBytes && !receivePackets(c, a, st, recvK)) return;
  __syncthreads();  // every thread of the block read its entries
  if (a.sendBytes) {
    if (threadIdx.x == 0) sent[b] = sendK;
    advanceIdleBlocks(c, sent, sendK);
  }
  if (a.recvBytes) {
    if (threadIdx.x == 0) received[b] = recvK;
    advanceIdleBlocks(c, received, recvK);
  }
}

}  // namespace

void launchP2PLL(const DeviceCtx& c, const P2PLLArgs& a, uint32_t threads, cudaStream_t stream) {
  const uint64_t bytes = a.sendBytes > a.recvBytes ? a.sendBytes : a.recvBytes;
  const uint64_t needed = ((bytes + 7) / 8 + threads - 1) / threads;
  const uint32_t grid = static_cast<uint32_t>(needed < static_cast<uint64_t>(c.blocks) ? needed : c.blocks);
  p2pLLKernel<<<grid, threads, 0, stream>>>(c, a);
  PB_CUDA_CHECK(cudaGetLastError());
}

void preloadP2PLLKernel(uint32_t threads, uint32_t* perSM) {
  loadKernel(reinterpret_cast<const void*>(p2pLLKernel), threads, 0, perSM);
}

}  // namespace plugboard::gpucoll
