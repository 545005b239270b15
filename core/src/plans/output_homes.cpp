#include "plans/output_homes.hpp"

#include <algorithm>

namespace plugboard {
namespace {

/// The chunks of `buffer` that op (of the rank that runs it) reads or writes there.
std::vector<const PlanChunk*> localChunks(const PlanOp& op, PlanChunk::Buffer buffer) {
  std::vector<const PlanChunk*> out;
  auto add = [&](const PlanChunk& c) {
    if (c.buffer == buffer) out.push_back(&c);
  };
  switch (op.kind) {
    case PlanOp::Kind::Put:
    case PlanOp::Kind::PutPacket: add(op.src); break;  // the dst is the peer's
    case PlanOp::Kind::Get: add(op.dst); break;        // the src is the peer's
    case PlanOp::Kind::Copy:
    case PlanOp::Kind::SwitchReduce:     // src: this rank's part of the group's chunk
    case PlanOp::Kind::SwitchBroadcast:  // dst: likewise
      add(op.src);
      add(op.dst);
      break;
    case PlanOp::Kind::Reduce:
    case PlanOp::Kind::ReducePacket:
      add(op.dst);
      for (const auto& c : op.srcs) add(c);
      break;
    default: break;
  }
  return out;
}

uint64_t chunkCount(const Plan& plan, PlanChunk::Buffer buffer) {
  switch (buffer) {
    case PlanChunk::Buffer::Input: return plan.inputChunks;
    case PlanChunk::Buffer::Output: return plan.outputChunks;
    case PlanChunk::Buffer::Scratch: return plan.scratchChunks;
    case PlanChunk::Buffer::Packets: return plan.packetChunks;
  }
  return 0;
}

}  // namespace

std::vector<bool> chunksInStorage(const Plan& plan, int rank, PlanChunk::Buffer buffer, bool hostBuffers) {
  std::vector<bool> in(chunkCount(plan, buffer), false);
  auto mark = [&](const PlanChunk& c) {
    if (c.buffer != buffer) return;
    for (uint64_t k = c.index; k < c.index + c.size && k < in.size(); ++k) in[k] = true;
  };
  for (int r = 0; r < plan.nranks; ++r) {
    const PlanRank& pr = plan.ranks[r];
    for (const auto& tb : pr.threadblocks)
      for (const auto& op : tb.ops) {
        if (op.channel < 0) continue;
        const PlanChannel& ch = pr.channels[op.channel];
        const bool put = op.kind == PlanOp::Kind::Put || op.kind == PlanOp::Kind::PutPacket;
        if (ch.peer == rank && r != rank && put) mark(op.dst);
        if (ch.peer == rank && r != rank && op.kind == PlanOp::Kind::Get) mark(op.src);
        if (r == rank && put && (hostBuffers || ch.type == PlanChannel::Type::Port)) mark(op.src);
        if (r == rank && hostBuffers && op.kind == PlanOp::Kind::Get) mark(op.dst);
      }
  }
  // One home per chunk: a range that mixes homes moves wholly to the storage,
  // which may split another range; repeat until none mixes.
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& tb : plan.ranks[rank].threadblocks)
      for (const auto& op : tb.ops)
        for (const PlanChunk* c : localChunks(op, buffer)) {
          const uint64_t end = std::min<uint64_t>(c->index + c->size, in.size());
          bool any = false, all = true;
          for (uint64_t k = c->index; k < end; ++k) {
            any = any || in[k];
            all = all && in[k];
          }
          if (any && !all) {
            mark(*c);
            changed = true;
          }
        }
  }
  return in;
}

}  // namespace plugboard
