#include "plans/plan_check.hpp"

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "plugboard/error.hpp"

namespace plugboard {
namespace {

using ChannelKey = std::tuple<int, int, int, int64_t>;  // from, to, type, tag

ChannelKey keyOf(int rank, const PlanChannel& c) { return {rank, c.peer, static_cast<int>(c.type), c.tag}; }

[[noreturn]] void fail(const Plan& plan, const std::string& path, const std::string& what) {
  throw Error(ErrorCode::Config, plan.source + ": " + path + ": " + what);
}

std::string channelPath(int rank, size_t index) {
  return "$.ranks[" + std::to_string(rank) + "].channels[" + std::to_string(index) + "]";
}

std::string opPath(int rank, size_t tb, size_t op) {
  return "$.ranks[" + std::to_string(rank) + "].threadblocks[" + std::to_string(tb) + "].ops[" + std::to_string(op) + "]";
}

/// LL: each packets chunk is put at most once per call (its reader could
/// not tell two apart), and every one a reduce_packet waits for is put.
void checkPackets(const Plan& plan) {
  std::map<std::pair<int, uint64_t>, std::string> putBy;  // (rank, packets chunk) -> the put_packet's path
  for (int r = 0; r < plan.nranks; ++r)
    for (size_t t = 0; t < plan.ranks[r].threadblocks.size(); ++t)
      for (size_t k = 0; k < plan.ranks[r].threadblocks[t].ops.size(); ++k) {
        const PlanOp& op = plan.ranks[r].threadblocks[t].ops[k];
        if (op.kind != PlanOp::Kind::PutPacket) continue;
        const int peer = plan.ranks[r].channels[op.channel].peer;
        for (uint64_t i = op.dst.index; i < op.dst.index + op.dst.size; ++i) {
          auto [it, fresh] = putBy.emplace(std::make_pair(peer, i), opPath(r, t, k));
          if (!fresh)
            fail(plan, opPath(r, t, k), "puts packets into rank " + std::to_string(peer) + " packets[" + std::to_string(i) +
                                            "], which " + it->second + " already puts (one put_packet per chunk per call)");
        }
      }
  for (int r = 0; r < plan.nranks; ++r)
    for (size_t t = 0; t < plan.ranks[r].threadblocks.size(); ++t)
      for (size_t k = 0; k < plan.ranks[r].threadblocks[t].ops.size(); ++k)
        for (const PlanChunk& c : plan.ranks[r].threadblocks[t].ops[k].packets)
          for (uint64_t i = c.index; i < c.index + c.size; ++i)
            if (!putBy.count({r, i}))
              fail(plan, opPath(r, t, k), "waits for packets[" + std::to_string(i) + "], which no put_packet writes");
}

/// Switch channels: every rank declares the same ones (each is one
/// collective object over the communicator); the plan has no port channels
/// and a memory channel from every rank to every other (over them the start
/// handshake, or the plan's own signals, keep a peer's switch accesses
/// inside a rank's call); peers reach a bound buffer only through its switch
/// channel.
void checkSwitches(const Plan& plan) {
  const auto& first = plan.ranks.front().switches;
  for (int r = 1; r < plan.nranks; ++r) {
    const auto& mine = plan.ranks[r].switches;
    bool same = mine.size() == first.size();
    for (size_t i = 0; same && i < mine.size(); ++i) same = mine[i].buffer == first[i].buffer && mine[i].tag == first[i].tag;
    if (!same)
      fail(plan, "$.ranks[" + std::to_string(r) + "].switches",
           "differs from rank 0's: every rank declares the same switch channels (buffer, tag), in the same order");
  }
  if (first.empty()) return;
  for (int r = 0; r < plan.nranks; ++r) {
    std::vector<bool> reaches(plan.nranks, false);
    for (size_t i = 0; i < plan.ranks[r].channels.size(); ++i) {
      const PlanChannel& c = plan.ranks[r].channels[i];
      if (c.type == PlanChannel::Type::Port)
        fail(plan, channelPath(r, i), "a port channel in a plan with switch channels (a switch group is one NVLink "
                                      "domain: order its ranks with memory channels)");
      reaches[c.peer] = true;
    }
    for (int q = 0; q < plan.nranks; ++q)
      if (q != r && !reaches[q])
        fail(plan, "$.ranks[" + std::to_string(r) + "].channels",
             "has no memory channel to rank " + std::to_string(q) + "; a plan with switch channels needs one between "
             "every two ranks (over them each call's start handshake, or the plan's own signals, keep a "
             "peer's switch accesses inside this rank's call)");
  }
  for (int r = 0; r < plan.nranks; ++r)
    for (size_t t = 0; t < plan.ranks[r].threadblocks.size(); ++t)
      for (size_t k = 0; k < plan.ranks[r].threadblocks[t].ops.size(); ++k) {
        const PlanOp& op = plan.ranks[r].threadblocks[t].ops[k];
        const bool put = op.kind == PlanOp::Kind::Put, get = op.kind == PlanOp::Kind::Get;
        if (!put && !get) continue;
        // In place, the input is the output.
        const PlanChunk::Buffer remote = put ? op.dst.buffer : op.src.buffer;
        const int bound = plan.switchOf(plan.inPlace && remote == PlanChunk::Buffer::Input ? PlanChunk::Buffer::Output : remote);
        if (bound >= 0)
          fail(plan, opPath(r, t, k), std::string(put ? "puts into" : "gets from") + " a peer's buffer bound to switch "
                                      "channel " + std::to_string(bound) + ", which peers reach only through that channel");
      }
}

}  // namespace

void checkPlanAcrossRanks(const Plan& plan) {
  std::map<ChannelKey, size_t> channels;  // -> index in the rank's list
  for (int r = 0; r < plan.nranks; ++r)
    for (size_t i = 0; i < plan.ranks[r].channels.size(); ++i)
      if (!channels.emplace(keyOf(r, plan.ranks[r].channels[i]), i).second)
        fail(plan, channelPath(r, i), "a second channel to the same peer with the same type and tag");
  for (const auto& [key, index] : channels) {
    const auto& [from, to, type, tag] = key;
    if (!channels.count({to, from, type, tag}))
      fail(plan, channelPath(from, index), "rank " + std::to_string(to) + " has no matching channel back (same type, tag " +
                                              std::to_string(tag) + ")");
  }
  std::map<ChannelKey, int64_t> signals, waits;  // keyed by (signaller, receiver, type, tag)
  for (int r = 0; r < plan.nranks; ++r)
    for (const auto& tb : plan.ranks[r].threadblocks)
      for (const auto& op : tb.ops) {
        if (op.channel < 0) continue;
        const PlanChannel& c = plan.ranks[r].channels[op.channel];
        if (op.kind == PlanOp::Kind::Signal) ++signals[keyOf(r, c)];
        if (op.kind == PlanOp::Kind::Wait) ++waits[{c.peer, r, static_cast<int>(c.type), c.tag}];
      }
  for (const auto& [key, index] : channels) {
    const int64_t s = signals.count(key) ? signals.at(key) : 0, w = waits.count(key) ? waits.at(key) : 0;
    if (s != w) {
      const auto& [from, to, type, tag] = key;
      fail(plan, channelPath(from, index), "rank " + std::to_string(from) + " signals rank " + std::to_string(to) + " " +
                                              std::to_string(s) + " times on it but rank " + std::to_string(to) + " waits " +
                                              std::to_string(w) + " times: every wait needs its signal");
    }
  }
  checkPackets(plan);
  checkSwitches(plan);
}

}  // namespace plugboard
