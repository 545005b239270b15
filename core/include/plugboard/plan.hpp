/// @file plan.hpp
/// Execution plans (docs/execution-plans.md, version 1): a collective
/// algorithm as data, written by plugboard_dsl. Loading checks the whole
/// plan (structure, types, bounds, channels, signal/wait pairing) and names
/// the JSON path of anything wrong. Running plans is not written yet.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace plugboard {

/// The plan versions this library reads.
inline constexpr int kPlanVersion = 1;

/// Chunks [index, index + size) of one of a rank's buffers.
struct PlanChunk {
  enum class Buffer { Input, Output, Scratch };
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

/// One operation of a thread block.
struct PlanOp {
  enum class Kind { Put, Signal, Wait, Flush, Copy, Reduce };
  Kind kind = Kind::Copy;
  int channel = -1;           ///< Index into the rank's channels (put, signal, wait, flush).
  PlanChunk src, dst;         ///< put, copy: src; put, copy, reduce: dst (a put's dst is on the peer).
  std::vector<PlanChunk> srcs;  ///< reduce.
};

/// A thread block's operations, run in order.
struct PlanThreadBlock {
  int64_t id = 0;
  std::vector<PlanOp> ops;
};

/// One rank's part.
struct PlanRank {
  std::vector<PlanChannel> channels;
  std::vector<PlanThreadBlock> threadblocks;
};

/// A loaded, checked plan.
struct Plan {
  std::string source;  ///< The file (or name) it came from, for messages.
  std::string name, collective, protocol;
  int nranks = 0;
  bool inPlace = false;
  int64_t instances = 1;
  uint64_t inputChunks = 0, outputChunks = 0, scratchChunks = 0;
  std::vector<PlanRank> ranks;
};

/// Parses and checks plan text; throws Error(Config) "<source>: <json
/// path>: <what>" for anything wrong (syntax, version, types, bounds,
/// channels, signal/wait pairing).
Plan parsePlan(const std::string& text, const std::string& source);
/// parsePlan of a file; Error(Config) naming it when unreadable.
Plan loadPlan(const std::string& path);

}  // namespace plugboard
