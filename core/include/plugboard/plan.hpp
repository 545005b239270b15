/// @file plan.hpp
/// Execution plans (docs/execution-plans.md, versions 1 to 5): a
/// collective algorithm as data, written by plugboard_dsl. Loading checks
/// the whole plan (structure, types, bounds, channels, signal/wait pairing,
/// LL packets) and names the JSON path of anything wrong. host_plan.hpp and
/// gpu/plan_executor.hpp run them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace plugboard {

/// The newest plan version this library reads (and plugboard_dsl writes);
/// it reads every version from 1 (version 1: no LL packets; version 2: no
/// barrier; version 3: no get; version 4: no switch channels).
inline constexpr int kPlanVersion = 5;

/// Chunks [index, index + size) of one of a rank's buffers.
struct PlanChunk {
  enum class Buffer { Input, Output, Scratch, Packets };  ///< Packets: LL plans' landing buffer
  Buffer buffer = Buffer::Input;
  uint64_t index = 0;
  uint64_t size = 0;
};

/// A channel of one rank to a peer.
struct PlanChannel {
  enum class Type { Memory, Port };
  int peer = 0;
  Type type = Type::Memory;
  int64_t tag = 0;
};

/// A switch channel (version 5): one of the rank's buffers, output or
/// scratch, reached as a group of every rank's same buffer (a SwitchChannel
/// over the communicator: NVLink SHARP multicast, or peer mappings).
/// Every rank declares the same switch channels, in the same order.
struct PlanSwitch {
  PlanChunk::Buffer buffer = PlanChunk::Buffer::Scratch;  ///< Output or Scratch.
  int64_t tag = 0;
};

/// One operation of a thread block. put_packet sends src as LL packets
/// (flagged with the call) into the peer's packets chunks dst;
/// reduce_packet waits for its packets chunks and reduces srcs and them
/// into dst; barrier (version 3) waits until every thread block of its
/// group has reached it: what they did before it happens before what any
/// of them does after; switch_reduce (version 5) sets dst to the reduction
/// over every rank of src, a chunk of the switch channel's buffer;
/// switch_broadcast stores src into dst, a chunk of the switch channel's
/// buffer, on every rank.
struct PlanOp {
  enum class Kind { Put, Signal, Wait, Flush, Copy, Reduce, PutPacket, ReducePacket, Barrier, Get, SwitchReduce, SwitchBroadcast };
  Kind kind = Kind::Copy;
  int channel = -1;              ///< Index into the rank's channels (put, get, put_packet, signal, wait, flush).
  int switchChannel = -1;        ///< Index into the rank's switches (switch_reduce, switch_broadcast).
  PlanChunk src, dst;            ///< put, get, put_packet, copy: src; all but signal, wait, flush: dst
                                 ///< (a put's and a put_packet's dst is on the peer, a get's src).
  std::vector<PlanChunk> srcs;     ///< reduce, reduce_packet (may be empty there).
  std::vector<PlanChunk> packets;  ///< reduce_packet: this rank's packets chunks it waits for.
  int barrier = -1;     ///< barrier: its group, numbered 0.. in the rank by the plan's barrier ids.
  uint32_t parties = 0;  ///< barrier: thread blocks in the group.
};

/// A thread block's operations, run in order.
struct PlanThreadBlock {
  int64_t id = 0;
  std::vector<PlanOp> ops;
};

/// One rank's part.
struct PlanRank {
  std::vector<PlanChannel> channels;
  std::vector<PlanSwitch> switches;  ///< Version 5; the same on every rank.
  std::vector<PlanThreadBlock> threadblocks;
  int barriers = 0;  ///< Barrier groups (PlanOp::barrier is below this).
};

/// A loaded, checked plan.
struct Plan {
  std::string source;  ///< The file (or name) it came from, for messages.
  std::string name, collective, protocol;  ///< protocol: "simple" or "ll"
  int version = 0;  ///< plan_version as written
  int nranks = 0;
  bool inPlace = false;
  int64_t instances = 1;
  uint64_t inputChunks = 0, outputChunks = 0, scratchChunks = 0, packetChunks = 0;
  std::vector<PlanRank> ranks;
  /// True for an LL plan: data moves between ranks only by put_packet.
  bool ll() const { return protocol == "ll"; }
  /// True when the plan has switch channels (GPU buffers only).
  bool hasSwitches() const { return !ranks.empty() && !ranks.front().switches.empty(); }
  /// The switch channel bound to buffer on every rank, or -1.
  int switchOf(PlanChunk::Buffer buffer) const {
    if (ranks.empty()) return -1;
    for (size_t i = 0; i < ranks.front().switches.size(); ++i)
      if (ranks.front().switches[i].buffer == buffer) return static_cast<int>(i);
    return -1;
  }
};

/// The operation's name as plans spell it ("put", "reduce_packet").
const char* planOpName(PlanOp::Kind kind);

/// Parses and checks plan text; throws Error(Config) "<source>: <json
/// path>: <what>" for anything wrong (syntax, version, types, bounds,
/// channels, signal/wait pairing).
Plan parsePlan(const std::string& text, const std::string& source);
/// parsePlan of a file; Error(Config) naming it when unreadable.
Plan loadPlan(const std::string& path);

}  // namespace plugboard
