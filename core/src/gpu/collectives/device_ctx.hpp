// State the collective kernels share with the host: the scratch layout
// (identical on every rank) and the per-rank device context passed by value
// to every kernel. Plain structs, compiled by both g++ and nvcc.
#pragma once

#include <cstdint>

#include "plugboard/gpu/fifo_device.hpp"  // PB_HOST_DEVICE_INLINE, FifoDeviceHandle

namespace plugboard::gpucoll {

/// Most threads per block of every collective kernel (they are compiled
/// with __launch_bounds__ of it, so their registers fit a full block).
inline constexpr uint32_t kMaxBlockThreads = 512;

/// Which collective a kernel runs (recorded with a failed wait).
enum class Coll : uint32_t { AllReduce = 1, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll, Send, Recv, SendRecv };

/// Its name in messages ("allreduce"; "a collective" for an unknown value). Host code.
const char* collName(uint32_t coll);

/// Kinds of inbound counter per (source, block): data posted, slots released.
enum CounterKind : uint32_t { kData = 0, kAck = 1 };

/// Byte layout of each rank's scratch allocation (one registration):
///  - counters: inbound uint64 per [source rank][block][kind]; the source
///    adds to them through its mapping (Device2DeviceSemaphore protocol).
///  - ll: LL16 packets per [source rank][parity] of llHalf bytes each; the
///    parity alternates with the LL call counter (double buffering).
///  - p2p: LL16 packets of send / recv per [source rank][parity] of p2pHalf
///    bytes each; the parity alternates with the pair's p2p LL call count.
///  - p2pAcks: uint64 per [peer]: how many of this rank's p2p LL calls to
///    peer the peer has finished reading (the peer stores it here).
///  - pipes: per [source rank] perSource bytes, per [block] perBlock bytes,
///    `slots` slots of slotBytes: what the source sends this rank on that block.
/// Entries for source == this rank are unused.
///
/// A rank with unmapped peers also has a port area in pinned host memory
/// mapped into the device, registered with the transports (so the network
/// transport moves its bytes itself, with no CUDA stream work that could
/// queue behind the kernel waiting for them):
///  - port pipes at 0: per [source rank] the same geometry as pipes; an
///    unmapped source's proxy puts its messages there.
///  - outbox at `outbox`: per [destination rank] the same geometry: where
///    this rank writes what it sends an unmapped peer before the proxy puts
///    it into the peer's port pipe slot of the same (block, slot).
/// The layouts are functions of settings, nranks and "some pair is
/// unmapped" only, so they are the same on every rank and a sender computes
/// offsets in the receiver's areas.
struct ScratchLayout {
  uint64_t counters = 0;
  uint64_t ll = 0, llHalf = 0;
  uint64_t p2p = 0, p2pHalf = 0, p2pAcks = 0;  ///< p2pHalf 0: no p2p LL area (some pair unmapped).
  uint64_t pipes = 0, perSource = 0, perBlock = 0, slotBytes = 0;
  uint64_t outbox = 0;     ///< In the port area; 0: none (every pair of the communicator mapped).
  uint64_t portTotal = 0;  ///< Bytes of the port area.
  uint32_t slots = 0;
  /// Over a PortChannel pipe the receiver returns slots in batches of
  /// ackBatch (one signal adding ackBatch after every ackBatch-th message),
  /// so acks cost one proxy request per batch. ackBatch <= slots / 2 (or 1):
  /// a sender then waits at most for messages sent slots / 2 earlier.
  uint32_t ackBatch = 1;
  uint64_t total = 0;      ///< Bytes of the scratch.
};

/// One PortChannel of a pipe to an unmapped peer, as the owner thread uses
/// it: the channel id in the service's Fifo and the channel's inbound
/// counter (the peer's proxy adds to it) with this side's consumed count.
struct PortPipe {
  uint64_t* inbound = nullptr;   ///< Mapped host: signals received (read across PCIe).
  uint64_t* expected = nullptr;  ///< Device: signals consumed by waits.
  uint64_t* seen = nullptr;      ///< Device: the largest *inbound a wait has read (batched acks
                                 ///< then cost no PCIe read until the batch is used up).
  uint32_t channel = 0;          ///< Id in the PortChannelService.
};

/// Everything a collective kernel needs besides its arguments. The state
/// array (device memory, this rank only) holds, by index:
///   [0, 2nG)     expected counts of the inbound counters (same order)
///   [2nG, 3nG)   messages sent to [peer][block]   (slot = seq % slots)
///   [3nG, 4nG)   messages received from [peer][block]
///   [4nG, 4nG+G) LL calls made, per block (all equal between calls)
///   [4nG+G, 5nG+G)   p2p LL calls sent to [peer][block]      (all blocks equal between calls)
///   [5nG+G, 6nG+G)   p2p LL calls received from [peer][block] (same)
///   [6nG+G, 6nG+G+n) blocks of the current p2p LL receive from [peer] done
/// Invariant: only the owner thread of (peer, block) writes its entries, and
/// only that thread waits on the (peer, block) counters: one waiter per semaphore.
/// A peer whose remote[] entry is null is unmapped: its pipes use the
/// outbox and the PortChannels ports[(peer * blocks + block) * 2 + kind].
struct DeviceCtx {
  char* local = nullptr;               ///< This rank's scratch.
  char* port = nullptr;                ///< Device alias of this rank's port area (null: no unmapped peer).
  char* const* remote = nullptr;       ///< Device array [nranks]: peers' scratch mapped here (null: unmapped).
  const PortPipe* ports = nullptr;     ///< Device array [nranks][blocks][2] (entries of unmapped peers only).
  FifoDeviceHandle fifo{};             ///< The PortChannelService's queue (when some peer is unmapped).
  volatile uint32_t* portAbort = nullptr;  ///< Mapped host: the service's abort flag (proxy failed).
  uint64_t* state = nullptr;           ///< Device array described above.
  volatile uint32_t* abortFlag = nullptr;  ///< Mapped host: non-zero ends every wait.
  uint32_t* errors = nullptr;          ///< Mapped host [nranks]: SemaphoreDeviceError per peer.
  uint32_t* first = nullptr;           ///< Mapped host: first failure, see encodeFailure().
  int64_t waitTimeoutNs = 0;           ///< Bound of every device wait (gpu_wait_timeout).
  ScratchLayout layout;
  int rank = 0, nranks = 0, blocks = 0;
};

/// First-failure word: (peer + 1) << 16 | collective << 8 | SemaphoreDeviceError.
PB_HOST_DEVICE_INLINE uint32_t encodeFailure(int peer, Coll coll, uint32_t code) {
  return (static_cast<uint32_t>(peer + 1) << 16) | (static_cast<uint32_t>(coll) << 8) | (code & 0xff);
}

/// A PreMulSum scalar as the kernels take it: none, or *device read when
/// the kernel runs, or the first bytes of hostBits (the call's type).
struct PreMulArgs {
  bool on = false;
  const void* device = nullptr;
  uint64_t hostBits = 0;
};

/// Arguments of the reducing pipeline kernel (allreduce, reducescatter, reduce).
struct ReduceArgs {
  const char* send;
  char* recv;
  uint64_t count;       ///< Elements (allreduce/reduce: total; reducescatter: per rank).
  uint64_t chunkElems;  ///< Pipeline chunk in elements (a multiple of 16 bytes).
  uint64_t unitElems;   ///< Segment boundaries fall on multiples of it (16 bytes).
  Coll coll;            ///< AllReduce, ReduceScatter or Reduce.
  int root;
  bool oneShot;         ///< AllReduce / Reduce: whole buffer to every receiver, no gather.
  uint32_t divisor;     ///< Results are divided by it (avg: the rank count; else 1).
  PreMulArgs preMul;    ///< Sum only: this rank's send is scaled first (PreMulSum).
};

/// Arguments of the byte-moving pipeline kernel.
struct MoveArgs {
  const char* src;
  char* dst;
  uint64_t bytes;       ///< Per peer block.
  uint64_t chunkBytes;  ///< Pipeline chunk (multiple of 16).
  Coll coll;            ///< AllGather, Broadcast, AllToAll, Send or Recv.
  int peer;             ///< Root (Broadcast) or peer (Send/Recv).
};

/// Arguments of the point-to-point LL kernel: either direction may be empty.
struct P2PLLArgs {
  const char* src;
  char* dst;
  uint64_t sendBytes, recvBytes;
  int sendPeer, recvPeer;  ///< Valid ranks even for an empty direction (their counters are read).
  Coll coll;               ///< Send, Recv or SendRecv (named by a failed wait).
};

/// Arguments of the SwitchChannel kernels (switch_kernels.cu).
struct SwitchCallArgs {
  const char* send;
  char* recv;
  uint64_t bytes;  ///< AllReduce: the whole buffer; AllGather: one rank's block.
  uint64_t cell;   ///< Bytes of each (rank, block) cell (a multiple of 16, the same on every rank).
  Coll coll;       ///< AllReduce or AllGather (named by a failed wait).
};

/// Words of the state array (see DeviceCtx).
PB_HOST_DEVICE_INLINE uint64_t stateWords(uint64_t nranks, uint64_t blocks) { return 6 * nranks * blocks + blocks + nranks; }

/// Arguments of the fused send/receive kernel: each direction is chunked
/// exactly as a plain Send / Recv of the same bytes (same chunk, chunk j on
/// block j % G), so its messages match the peer's pipe whichever call the
/// peer makes for it. bytes == 0: no traffic in that direction.
struct SendRecvArgs {
  const char* src;
  char* dst;
  uint64_t sendBytes, sendChunk;  ///< To sendPeer.
  uint64_t recvBytes, recvChunk;  ///< From recvPeer.
  int sendPeer, recvPeer;
};

}  // namespace plugboard::gpucoll
