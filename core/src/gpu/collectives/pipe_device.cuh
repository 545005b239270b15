// Device side of the collectives' per-(peer, block) pipes. Over a mapped
// pair (MemoryChannel style) a sender writes a chunk into a slot of the
// receiver's scratch and signals its data counter; the receiver waits,
// reads the slot and signals the sender's ack counter, which returns the
// slot. Over an unmapped pair (PortChannel) the sender writes the chunk
// into the same slot of its own outbox and the owner thread asks the proxy
// to put it into the receiver's port-area slot and signal the pipe's data
// channel; the receiver acks by a signal on the pipe's ack channel, one
// per layout.ackBatch messages (adding ackBatch). Outbox,
// port pipes and the channels' inbound counters are pinned host memory
// mapped into the device: the transport reads and writes them itself.
//
// Invariants every kernel relies on:
//  - Messages on the pipe (me -> p, block b) are numbered by seq; message
//    seq uses slot seq % slots. Both ends count the same messages because
//    every rank runs the same calls with the same grid.
//  - Before sending message seq >= slots the sender consumes one ack (the
//    one for message seq - slots): slots are never overwritten unread.
//    Outbox slots follow the same rule: the ack of message seq - slots
//    means its data reached the receiver, so the proxy's transport has
//    finished reading that outbox slot (no flush per message is needed).
//  - One owner thread per peer in each block (threadIdx.x == p mod
//    blockDim.x) does every wait and signal for that peer: one waiting
//    thread per semaphore (per PortChannel inbound counter likewise), and
//    one pushing thread per channel, so a channel's requests stay in order.
//  - Writes into a peer's slot precede a block barrier, then the owner's
//    signal, a release at system scope: the release is cumulative, so it
//    publishes every thread's writes (one fence per signal, not per
//    thread). Outbox writes are read by the proxy's transport (CPU or
//    NIC), outside the GPU's memory model: with an outbox every writing
//    thread also fences system-wide before that barrier (fenceForProxy).
#pragma once

#include <cstdint>

#include <cuda/atomic>

#include "gpu/collectives/device_ctx.hpp"
#include "plugboard/gpu/port_channel_device.hpp"
#include "plugboard/gpu/semaphore_device.hpp"

namespace plugboard::gpucoll {

/// Block-shared pipe state: seq counters [send peers | recv peers], the
/// pointers a reduction stage uses, and the failure flag. sendRecv splits
/// the block into a sending and a receiving half: `fail` is the sending
/// half's, `recvFail` the receiving half's, `sent` the sending half's
/// completed chunks.
struct BlockPipes {
  uint64_t* seq;   // [2 * nranks]
  char** ptrs;     // [2 * nranks]
  int* fail;       // set by an owner whose wait failed
  int* ndst;       // outputs of the current reduction stage
  int* recvFail;   // sendRecv: set by the receiving half's owner
  int* sent;       // sendRecv: chunks the sending half has read from src (halfFlag)
};

/// sendRecv's flags between its halves (`sent`, and `fail` as the receiving
/// half reads it): one half's thread 0 writes, the other's reads, with no
/// barrier both halves pass, so they are block-scope atomics (release by
/// the writer after its half's barrier, acquire by the reader).
__device__ __forceinline__ cuda::atomic_ref<int, cuda::thread_scope_block> halfFlag(int* flag) {
  return cuda::atomic_ref<int, cuda::thread_scope_block>(*flag);
}

/// Sets up BlockPipes in dynamic shared memory (32 * nranks + 16 bytes) and
/// loads this block's seq counters. Ends with a barrier.
__device__ inline BlockPipes loadPipes(const DeviceCtx& c) {
  extern __shared__ uint64_t pbShared[];
  const int n = c.nranks, G = c.blocks, b = blockIdx.x;
  int* words = reinterpret_cast<int*>(pbShared + 4 * n);
  BlockPipes s{pbShared, reinterpret_cast<char**>(pbShared + 2 * n), words, words + 1, words + 2, words + 3};
  for (int p = threadIdx.x; p < n; p += blockDim.x) {
    s.seq[p] = c.state[2 * n * G + p * G + b];
    s.seq[n + p] = c.state[3 * n * G + p * G + b];
  }
  if (threadIdx.x == 0) *s.fail = *s.recvFail = *s.sent = 0;
  __syncthreads();
  return s;
}

/// Writes seq counter i of this block (i < nranks: the send pipe to peer i,
/// else the receive pipe from peer i - nranks) back for the next call.
__device__ __forceinline__ void storePipe(const DeviceCtx& c, const BlockPipes& s, int i) {
  c.state[static_cast<uint64_t>(2 * c.nranks + i) * c.blocks + blockIdx.x] = s.seq[i];
}

/// Writes this block's seq counters back for the next call.
__device__ inline void storePipes(const DeviceCtx& c, const BlockPipes& s) {
  __syncthreads();
  for (int p = threadIdx.x; p < c.nranks; p += blockDim.x) {
    storePipe(c, s, p);
    storePipe(c, s, c.nranks + p);
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

/// True when peer's scratch is not mapped here: its pipes go through PortChannels.
__device__ __forceinline__ bool viaPort(const DeviceCtx& c, int peer) { return c.remote[peer] == nullptr; }

/// The PortChannel of (peer, this block, kind); only for unmapped peers.
__device__ __forceinline__ const PortPipe& portPipe(const DeviceCtx& c, int peer, uint32_t kind) {
  return c.ports[counterIndex(c, peer, blockIdx.x, kind)];
}

/// Owner thread: waits for the next signal on a PortChannel's inbound
/// counter. Ends early when this rank's collectives or the proxy aborted.
/// A count already seen (an earlier acquire read it) needs no PCIe read.
__device__ inline uint32_t waitPort(const DeviceCtx& c, const PortPipe& pp) {
  const uint64_t target = ++*pp.expected;
  if (*pp.seen >= target) return kSemaphoreOk;
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> in(*pp.inbound);
  WaitClock clock(c.waitTimeoutNs);
  for (int64_t spins = 0;; ++spins) {
    const uint64_t now = in.load(cuda::memory_order_acquire);
    if (now >= target) {
      *pp.seen = now;
      return kSemaphoreOk;
    }
    if (!WaitClock::checkNow(spins)) continue;
    if (*c.abortFlag || *c.portAbort) return kSemaphoreAborted;
    if (clock.expired()) return kSemaphoreWaitTimeout;
  }
}

/// Owner thread: waits for the next count on (peer, kind); false on failure (recorded).
__device__ inline bool waitPeer(const DeviceCtx& c, int peer, uint32_t kind, Coll coll) {
  if (!viaPort(c, peer)) {
    if (semaphore(c, peer, kind).wait(c.waitTimeoutNs)) return true;
    recordFailure(c, peer, coll, *c.abortFlag ? kSemaphoreAborted : kSemaphoreWaitTimeout);
    return false;
  }
  const uint32_t code = waitPort(c, portPipe(c, peer, kind));
  if (code == kSemaphoreOk) return true;
  recordFailure(c, peer, coll, code);
  return false;
}

/// Byte offset of slot `seq % slots` of the pipe (source -> dest, this
/// block) in the destination's scratch (area = pipes, indexed by source),
/// its port area (area = 0, indexed by source) or in the source's outbox
/// (area = outbox, indexed by dest).
__device__ __forceinline__ uint64_t slotOffset(const DeviceCtx& c, uint64_t area, int index, uint64_t seq) {
  const ScratchLayout& L = c.layout;
  return area + index * L.perSource + blockIdx.x * L.perBlock + (seq % L.slots) * L.slotBytes;
}

/// Owner thread: asks the proxy to put `bytes` of the outbox slot of
/// message seq into the peer's pipe slot and signal its data channel.
/// False on failure (recorded: the Fifo stayed full or the proxy aborted).
__device__ inline bool putToPeer(const DeviceCtx& c, int peer, uint64_t seq, uint64_t bytes, Coll coll) {
  const uint64_t dst = slotOffset(c, 0, c.rank, seq), src = slotOffset(c, c.layout.outbox, peer, seq);
  const ProxyTrigger t = makePortTrigger(kPortPut | kPortSignal, portPipe(c, peer, kData).channel, dst, src, bytes);
  if (c.fifo.push(t, c.waitTimeoutNs) != kFifoPushFailed) return true;
  recordFailure(c, peer, coll, (*c.abortFlag || *c.portAbort) ? kSemaphoreAborted : kSemaphoreWaitTimeout);
  return false;
}

/// Owner thread, after reading the next message from peer: returns its
/// slot (the mapped semaphore's signal, or over a PortChannel one signal
/// per ackBatch messages) and advances the receive seq. False on failure
/// (recorded).
__device__ inline bool returnSlot(const DeviceCtx& c, const BlockPipes& s, int peer, Coll coll) {
  const uint64_t received = ++s.seq[c.nranks + peer];
  if (!viaPort(c, peer)) {
    semaphore(c, peer, kAck).signal();
    return true;
  }
  const uint32_t batch = c.layout.ackBatch;
  if (received % batch) return true;
  const ProxyTrigger t = makePortTrigger(kPortSignal, portPipe(c, peer, kAck).channel, 0, 0, batch);
  if (c.fifo.push(t, c.waitTimeoutNs) != kFifoPushFailed) return true;
  recordFailure(c, peer, coll, (*c.abortFlag || *c.portAbort) ? kSemaphoreAborted : kSemaphoreWaitTimeout);
  return false;
}

/// Where to write the next message of the pipe (me -> peer, this block):
/// the slot in the peer's scratch, or for an unmapped peer the same slot of
/// this rank's outbox.
__device__ __forceinline__ char* sendSlot(const DeviceCtx& c, const BlockPipes& s, int peer) {
  char* const remote = c.remote[peer];
  if (remote == nullptr) return c.port + slotOffset(c, c.layout.outbox, peer, s.seq[peer]);
  return remote + slotOffset(c, c.layout.pipes, c.rank, s.seq[peer]);
}

/// Slot of the pipe (peer -> me, this block) holding the next message, in
/// this rank's scratch (or port area, for an unmapped peer).
__device__ __forceinline__ char* recvSlot(const DeviceCtx& c, const BlockPipes& s, int peer) {
  const uint64_t seq = s.seq[c.nranks + peer];
  if (viaPort(c, peer)) return c.port + slotOffset(c, 0, peer, seq);
  return c.local + slotOffset(c, c.layout.pipes, peer, seq);
}

/// Stage start, all threads: owners take a free slot for every peer
/// sendTo(p) and wait for the next message from every peer recvFrom(p).
/// (sendTo(p) is the bytes of the stage's message to p; 0: none.)
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

/// Each writing thread, before the barrier ahead of a signal: a release
/// fence at system scope when the communicator has an outbox (see the
/// invariants above); over mapped pipes the signal's cumulative release is
/// enough. Release, not sequentially consistent: it only has to order this
/// thread's outbox writes before the owner's push, never a later load.
__device__ __forceinline__ void fenceForProxy(const DeviceCtx& c) {
  if (c.layout.outbox) cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_system);
}

/// Stage end, all threads: publishes what the block wrote (fenceForProxy,
/// barrier), then owners signal data to every sendTo(p)
/// (sendTo(p) bytes; an unmapped peer gets them put from the outbox) and
/// return the slot of every ackTo(p), advancing the seq counters. A failed
/// Fifo push is recorded and fails the block's next waitStage.
template <typename SendTo, typename AckTo>
__device__ void signalStage(const DeviceCtx& c, const BlockPipes& s, SendTo sendTo, AckTo ackTo, Coll coll) {
  fenceForProxy(c);
  __syncthreads();
  for (int p = threadIdx.x; p < c.nranks; p += blockDim.x) {
    if (p == c.rank) continue;
    const bool port = viaPort(c, p);
    if (const uint64_t bytes = sendTo(p)) {
      if (!port) semaphore(c, p, kData).signal();
      else if (!putToPeer(c, p, s.seq[p], bytes, coll)) *s.fail = 1;
      ++s.seq[p];
    }
    if (ackTo(p) && !returnSlot(c, s, p, coll)) *s.fail = 1;
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
    // kBatch loads in flight per thread before its stores: the stores may
    // alias later loads as far as the compiler knows, so a plain loop would
    // keep one load in flight.
    constexpr uint32_t kBatch = 4;
    uint64_t i = tid;
    for (; i + (kBatch - 1) * n < words; i += kBatch * n) {
      int4 v[kBatch];
#pragma unroll
      for (uint32_t k = 0; k < kBatch; ++k) v[k] = __ldcg(ws + i + k * n);
#pragma unroll
      for (uint32_t k = 0; k < kBatch; ++k) wd[i + k * n] = v[k];
    }
    for (; i < words; i += n) wd[i] = __ldcg(ws + i);
    done = head + words * 16;
  } else if ((d % 4) == 0 && (s % 4) == 0) {
    const uint64_t words = bytes / 4;
    for (uint64_t i = tid; i < words; i += n)
      reinterpret_cast<unsigned*>(dst)[i] = __ldcg(reinterpret_cast<const unsigned*>(src) + i);
    done = words * 4;
  }
  for (uint64_t i = done + tid; i < bytes; i += n) dst[i] = __ldcg(src + i);
}

/// A predicate that is always false / zero bytes (stages that only send or only receive).
struct Nobody {
  __device__ uint64_t operator()(int) const { return 0; }
};

}  // namespace plugboard::gpucoll
