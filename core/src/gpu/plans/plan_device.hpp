// What the GPU plan executor hands its kernels: a rank's plan flattened
// into arrays (operations, thread blocks, reduce sources), its channels and
// the call's buffers. Plain structs, compiled by both g++ and nvcc.
//
// Slices: every plan thread block runs as `slices` CUDA blocks; slice s of
// an operation moves bytes [s * sliceBytes, (s + 1) * sliceBytes) of each
// of its chunks (sliceBytes a multiple of 16). Every operation maps a
// chunk's bytes to the same bytes of another chunk, so slice s of the whole
// plan depends only on slice s: each slice is the plan on a narrower chunk,
// with semaphores of its own, and the plan's order (and race freedom) holds
// for each. A slice holds at least 8 bytes per thread (one LL payload unit
// each), so a small call runs fewer slices than the executor has: only
// slices [0, activeSlices) are launched, on every rank alike (the count is
// a function of the call's size), and the others' counters stay as they are.
//
// LL plans (protocol "ll"): put_packet stores LL16 packets (8 payload bytes,
// two copies of the call's flag) through the peer mapping into the peer's
// packets buffer; reduce_packet polls them. Slice s moves packets
// [lo / 8, (lo + len + 7) / 8) of a chunk. The packets buffer has two halves,
// used by odd and even calls; the call number is counted per CUDA block in
// device memory (graph replays count too).
#pragma once

#include <cstdint>

#include "plugboard/gpu/port_channel_device.hpp"
#include "plugboard/gpu/switch_channel_device.hpp"

namespace plugboard::gpuplan {

/// Most threads per block of the plan kernel (its __launch_bounds__).
inline constexpr uint32_t kMaxThreads = 512;
/// Most sources of one reduce operation.
inline constexpr uint32_t kMaxReduceSources = 32;

/// In plan.hpp's PlanOp::Kind order (the executor casts).
enum class OpKind : uint8_t { Put, Signal, Wait, Flush, Copy, Reduce, PutPacket, ReducePacket, Barrier, Get, SwitchReduce,
                              SwitchBroadcast };
/// Most switch channels of a plan (one per buffer it may bind: output, scratch).
inline constexpr uint32_t kMaxSwitches = 2;
/// In plan.hpp's PlanChunk::Buffer order, then kCallerOutput: an output
/// chunk that only this rank's thread blocks touch (chunksInStorage
/// false), kept in the caller's output when the call allows (PlanArgs::local).
enum Buffer : uint8_t { kInput = 0, kOutput = 1, kScratch = 2, kPackets = 3, kCallerOutput = 4 };

/// Chunks [index, index + size) of one of this rank's buffers.
struct DevChunk {
  uint64_t index;
  uint32_t size;
  uint8_t buffer;
};

/// One operation (plan.hpp's PlanOp). Reduce's sources are
/// srcs[srcsAt, srcsAt + nsrcs) of PlanArgs::srcs; reduce_packet's packets
/// chunks follow them, npackets of them.
struct DevOp {
  OpKind kind;
  int32_t channel;  ///< Put, get, put_packet, signal, wait, flush; the switch channel of switch_reduce / _broadcast.
  DevChunk dst, src;
  uint32_t srcsAt, nsrcs, npackets;
  uint32_t barrier, parties;  ///< Barrier: its group (PlanArgs::barriers) and thread blocks in it.
};

/// A barrier group's state for one slice: arrivals this round and rounds
/// completed. Only the slice's blocks meet (each slice is the plan on its
/// own bytes, see above), so a barrier joins one block per thread block.
struct PlanBarrier {
  uint32_t count;
  uint32_t round;
};

/// A plan thread block: ops[opStart, opStart + opCount), and the channels
/// whose start handshake it makes (PlanArgs::handshakes[handshakeStart, +
/// handshakeCount)) when the plan kernel makes them itself.
struct DevThreadBlock {
  uint32_t opStart, opCount;
  uint32_t handshakeStart, handshakeCount;
};

/// One plan channel of this rank.
struct DevChannel {
  /// Memory channel: the peer's output, scratch and packets mapped here
  /// (indexed by Buffer; [kInput]: the peer's input copy where some get
  /// reads an input, else null)
  /// and the peer's inbound counters of this channel, one per slice. Null
  /// for a port channel.
  char* remote[4];
  uint64_t* remoteInbound;
  /// Port channel: PlanArgs::ports[port + slice]; -1 for a memory channel.
  int32_t port;
};

/// Codes of PlanStatus::code.
enum PlanError : uint32_t { kPlanOk = 0, kPlanWaitTimeout = 1, kPlanAborted = 2, kPlanFifoFailed = 3 };

/// The first failure of a launch, in mapped host memory (the host reads it
/// after the stream, or while it hangs).
struct PlanStatus {
  uint32_t code;
  int32_t threadBlock, op, channel, slice;
  int32_t packetChunk;  ///< reduce_packet: the packets chunk it waited for, else -1.
};

/// Everything the kernels need.
struct PlanArgs {
  const DevOp* ops;
  const DevThreadBlock* threadBlocks;
  const DevChunk* srcs;
  const DevChannel* channels;
  PortChannelDeviceHandle* ports;  ///< Port channels' handles, [channel's port + slice].
  uint64_t* inbound;               ///< This rank's counters, [channel * slices + slice] (peers add to them).
  uint64_t* expected;              ///< Signals consumed per counter (same index).
  /// This call's input, output, scratch and packets on this rank, and where
  /// the kCallerOutput chunks live: the caller's output, or local[kOutput]
  /// when the call passes the storage's output or overlaps input and output.
  char* local[5];
  uint64_t storageOffset[3];       ///< Where output and scratch ([kInput]: the input copy) start in the
                                   ///< registered storage, the same on every rank (port channel offsets).
  const int32_t* handshakes;       ///< Channel lists of DevThreadBlock::handshake*.
  /// True: each block makes its channels' start handshake (every channel's
  /// operations are in one thread block); false: the handshake kernel ran.
  uint32_t blocksHandshake;
  /// Where the output goes after the plan: slice s of every output chunk is
  /// copied (divided by divisor first, for avg) by the last block of slice s
  /// to finish, counted in sliceDone[s] (reset by that block). Null: the
  /// output stays in local[kOutput] (divided in place when divisor > 1).
  char* userOutput;
  /// Per output chunk: the buffer it lives in during the plan (kOutput or
  /// kCallerOutput); the end copies a chunk only where that is not its place.
  const uint8_t* outputHomes;
  uint32_t* sliceDone;
  uint32_t divisor;
  uint32_t outputChunks;
  uint64_t chunkBytes;             ///< Bytes per chunk in this call.
  uint64_t sliceBytes;             ///< Bytes per slice of a chunk (a multiple of 16).
  uint64_t packetStride;           ///< LL: bytes per packets chunk in this call (16 per 8 payload bytes).
  uint64_t packetHalfBytes;        ///< LL: bytes of each half of the packets buffer.
  uint64_t* calls;                 ///< LL: calls so far, per [thread block][slice]; null for simple plans.
  PlanBarrier* barriers;           ///< [group * slices + slice]; null without barriers.
  /// Switch channels (plan.hpp's PlanSwitch order); a bound buffer's
  /// local[] is its switch channel's buffer on this rank.
  SwitchChannelDeviceHandle switches[kMaxSwitches];
  /// 32-bit words per switch access in this call (4, 2 or 1): the widest
  /// that every chunk offset and the call's buffers are aligned to.
  uint32_t switchWords;
  uint32_t slices, threadBlockCount, channelCount;
  uint32_t activeSlices;           ///< Slices with bytes in this call: the grid is threadBlockCount x activeSlices.
  int64_t timeoutNs;
  volatile uint32_t* abortFlag;    ///< Mapped host memory: non-zero ends every wait.
  PlanStatus* status;              ///< Mapped host memory.
};

}  // namespace plugboard::gpuplan
