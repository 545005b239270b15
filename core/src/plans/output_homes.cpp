#include "plans/output_homes.hpp"

#include <algorithm>

namespace plugboard {
namespace {

bool isOutput(const PlanChunk& c) { return c.buffer == PlanChunk::Buffer::Output; }

/// The chunks of `rank`'s own output that op (of `rank`) reads or writes here.
std::vector<const PlanChunk*> localOutputChunks(const PlanOp& op) {
  std::vector<const PlanChunk*> out;
  auto add = [&](const PlanChunk& c) {
    if (isOutput(c)) out.push_back(&c);
  };
  switch (op.kind) {
    case PlanOp::Kind::Put:
    case PlanOp::Kind::PutPacket: add(op.src); break;  // the dst is the peer's
    case PlanOp::Kind::Get: add(op.dst); break;        // the src is the peer's
    case PlanOp::Kind::Copy: add(op.src); add(op.dst); break;
    case PlanOp::Kind::Reduce:
    case PlanOp::Kind::ReducePacket:
      add(op.dst);
      for (const auto& c : op.srcs) add(c);
      break;
    default: break;
  }
  return out;
}

}  // namespace

std::vector<bool> outputChunksInStorage(const Plan& plan, int rank) {
  std::vector<bool> in(plan.outputChunks, false);
  auto mark = [&](const PlanChunk& c) {
    for (uint64_t k = c.index; k < c.index + c.size && k < in.size(); ++k) in[k] = true;
  };
  for (int r = 0; r < plan.nranks; ++r) {
    const PlanRank& pr = plan.ranks[r];
    for (const auto& tb : pr.threadblocks)
      for (const auto& op : tb.ops) {
        if (op.channel < 0) continue;
        const PlanChannel& ch = pr.channels[op.channel];
        const bool put = op.kind == PlanOp::Kind::Put || op.kind == PlanOp::Kind::PutPacket;
        if (ch.peer == rank && r != rank && put && isOutput(op.dst)) mark(op.dst);
        if (ch.peer == rank && r != rank && op.kind == PlanOp::Kind::Get && isOutput(op.src)) mark(op.src);
        if (r == rank && ch.type == PlanChannel::Type::Port && put && isOutput(op.src)) mark(op.src);
      }
  }
  // One home per chunk: a range that mixes homes moves wholly to the storage,
  // which may split another range; repeat until none mixes.
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& tb : plan.ranks[rank].threadblocks)
      for (const auto& op : tb.ops)
        for (const PlanChunk* c : localOutputChunks(op)) {
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
