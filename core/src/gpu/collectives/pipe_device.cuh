// Device side of the collectives' per-(peer, block) pipes over
// MemoryChannel-style mappings: a sender writes a chunk into a slot of the
// receiver's scratch and signals its data counter; the receiver waits, reads
// the slot and signals the sender's ack counter, which returns the slot.
//
// Invariants every kernel relies on:
//  - Messages on the pipe (me -> p, block b) are numbered by seq; message
//    seq uses slot seq % slots. Both ends count the same messages because
//    every rank runs the same calls with the same grid.
//  - Before sending message seq >= slots the sender consumes one ack (the
//    one for message seq - slots): slots are never overwritten unread.
//  - One owner thread per peer in each block (threadIdx.x == p mod
//    blockDim.x) does every wait and signal for that peer: one waiting
//    thread per semaphore. Everything else is block-wide, between barriers.
//  - Writes into a peer's slot are fenced system-wide by every writing
//    thread before the barrier that precedes the owner's signal.
#pragma once

#include <cstdint>

#include "gpu/collectives/device_ctx.hpp"
#include "plugboard/gpu/semaphore_device.hpp"

namespace plugboard::gpucoll {

/// Block-shared pipe state: seq counters [send peers | recv peers], the
/// pointers a reduction stage uses, and the failure flag.
struct BlockPipes {
  uint64_t* seq;   // [2 * nranks]
  char** ptrs;     // [2 * nranks]
  int* fail;       // set by an owner whose wait failed
  int* ndst;       // outputs of the current reduction stage
};

/// Sets up BlockPipes in dynamic shared memory (32 * nranks + 16 bytes) and
/// loads this block's seq counters. Ends with a barrier.
__device__ inline BlockPipes loadPipes(const DeviceCtx& c) {
  extern __shared__ uint64_t pbShared[];
  const int n = c.nranks, G = c.blocks, b = blockIdx.x;
  BlockPipes s{pbShared, reinterpret_cast<char**>(pbShared + 2 * n), reinterpret_cast<int*>(pbShared + 4 * n),
                reinterpret_cast<int*>(pbShared + 4 * n) + 1};
  for (int p = threadIdx.x; p < n; p += blockDim.x) {
    s.seq[p] = c.state[2 * n * G + p * G + b];
    s.seq[n + p] = c.state[3 * n * G + p * G + b];
  }
  if (threadIdx.x == 0) *s.fail = 0;
  __syncthreads();
  return s;
}

/// Writes this block's seq counters back for the next call.
__device__ inline void storePipes(const DeviceCtx& c, const BlockPipes& s) {
  __syncthreads();
  const int n = c.nranks, G = c.blocks, b = blockIdx.x;
  for (int p = threadIdx.x; p < n; p += blockDim.x) {
    c.state[2 * n * G + p * G + b] = s.seq[p];
    c.state[3 * n * G + p * G + b] = s.seq[n + p];
  }
}

__device__ __forceinline__ uint64_t counterIndex(const DeviceCtx& c, int source, int block, uint32_t kind) {
  return (static_cast<uint64_t>(source) * c.blocks + block) * 2 + kind;
}

/// The semaphore of (peer, this block, kind): waits read this rank's
/// inbound counter from peer; signals add to peer's counter from this rank.
__device__ __forceinline__ Device2DeviceSemaphoreDeviceHandle semaphore(const DeviceCtx& c, int peer, uint32_t kind) {
  uint64_t* counters = reinterpret_cast<uint64_t*>(c.local + c.layout.counters);
  uint64_t* remoteCounters = reinterpret_cast<uint64_t*>(c.remote[peer] + c.layout.counters);
  const uint64_t in = counterIndex(c, peer, blockIdx.x, kind), out = counterIndex(c, c.rank, blockIdx.x, kind);
  return Device2DeviceSemaphoreDeviceHandle{counters + in, remoteCounters + out, c.state + in, c.abortFlag,
                                            c.errors + peer};
}

/// Records a failed wait: the first failure names peer and collective;
/// a timeout also aborts this rank's other waits so the kernel ends soon.
__device__ inline void recordFailure(const DeviceCtx& c, int peer, Coll coll, uint32_t code) {
  atomicCAS(c.errors + peer, 0u, code);
  atomicCAS(c.first, 0u, encodeFailure(peer, coll, code));
  __threadfence_system();
  *c.abortFlag = 1;
}

/// Owner thread: waits for the next count on (peer, kind); false on failure (recorded).
__device__ inline bool waitPeer(const DeviceCtx& c, int peer, uint32_t kind, Coll coll) {
  if (semaphore(c, peer, kind).wait(c.maxSpins)) return true;
  recordFailure(c, peer, coll, *c.abortFlag ? kSemaphoreAborted : kSemaphoreWaitTimeout);
  return false;
}

/// Slot of the pipe (me -> peer, this block) for the next message, in the peer's scratch.
__device__ __forceinline__ char* sendSlot(const DeviceCtx& c, const BlockPipes& s, int peer) {
  const ScratchLayout& L = c.layout;
  return c.remote[peer] + L.pipes + c.rank * L.perSource + blockIdx.x * L.perBlock +
         (s.seq[peer] % L.slots) * L.slotBytes;
}

/// Slot of the pipe (peer -> me, this block) holding the next message, in this rank's scratch.
__device__ __forceinline__ char* recvSlot(const DeviceCtx& c, const BlockPipes& s, int peer) {
  const ScratchLayout& L = c.layout;
  return c.local + L.pipes + peer * L.perSource + blockIdx.x * L.perBlock +
         (s.seq[c.nranks + peer] % L.slots) * L.slotBytes;
}

/// Stage start, all threads: owners take a free slot for every peer
/// sendTo(p) and wait for the next message from every peer recvFrom(p).
/// Ends with a barrier; false (uniformly) once any wait of the block failed.
template <typename SendTo, typename RecvFrom>
__device__ bool waitStage(const DeviceCtx& c, const BlockPipes& s, SendTo sendTo, RecvFrom recvFrom, Coll coll) {
  for (int p = threadIdx.x; p < c.nranks; p += blockDim.x) {
    if (p == c.rank) continue;
    bool ok = true;
    if (sendTo(p) && s.seq[p] >= c.layout.slots) ok = waitPeer(c, p, kAck, coll);
    if (ok && recvFrom(p)) ok = waitPeer(c, p, kData, coll);
    if (!ok) *s.fail = 1;
  }
  __syncthreads();
  return *s.fail == 0;
}

/// Stage end, all threads: publishes what the block wrote (system fence by
/// every thread, barrier), then owners signal data to every sendTo(p) and
/// return the slot of every ackTo(p), advancing the seq counters.
template <typename SendTo, typename AckTo>
__device__ void signalStage(const DeviceCtx& c, const BlockPipes& s, SendTo sendTo, AckTo ackTo) {
  __threadfence_system();
  __syncthreads();
  for (int p = threadIdx.x; p < c.nranks; p += blockDim.x) {
    if (p == c.rank) continue;
    if (sendTo(p)) {
      semaphore(c, p, kData).signal();
      ++s.seq[p];
    }
    if (ackTo(p)) {
      semaphore(c, p, kAck).signal();
      ++s.seq[c.nranks + p];
    }
  }
}

/// Cooperative copy of bytes, any alignment: 16-byte words where source and
/// destination are co-aligned (after a byte head), else 4-byte or byte words.
/// Loads bypass L1 (the source may be a slot a peer rewrites).
__device__ inline void copyBytes(char* dst, const char* src, uint64_t bytes, uint32_t tid, uint32_t n) {
  const uintptr_t d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  uint64_t done = 0;
  if ((d % 16) == (s % 16)) {
    uint64_t head = (16 - d % 16) % 16;
    if (head > bytes) head = bytes;
    for (uint64_t i = tid; i < head; i += n) dst[i] = __ldcg(src + i);
    const uint64_t words = (bytes - head) / 16;
    int4* wd = reinterpret_cast<int4*>(dst + head);
    const int4* ws = reinterpret_cast<const int4*>(src + head);
    for (uint64_t i = tid; i < words; i += n) wd[i] = __ldcg(ws + i);
    done = head + words * 16;
  } else if ((d % 4) == 0 && (s % 4) == 0) {
    const uint64_t words = bytes / 4;
    for (uint64_t i = tid; i < words; i += n)
      reinterpret_cast<unsigned*>(dst)[i] = __ldcg(reinterpret_cast<const unsigned*>(src) + i);
    done = words * 4;
  }
  for (uint64_t i = done + tid; i < bytes; i += n) dst[i] = __ldcg(src + i);
}

/// A predicate that is always false (stages that only send or only receive).
struct Nobody {
  __device__ bool operator()(int) const { return false; }
};

}  // namespace plugboard::gpucoll
