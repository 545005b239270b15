// JSON -> Plan: every field read through a checker that names its JSON
// path, so a hostile or hand-edited plan gets a sentence, never a crash.
// Cross-rank checks (peers' channels, signal/wait pairing) are in
// plan_check.cpp.
#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "plans/plan_check.hpp"
#include "plugboard/error.hpp"
#include "plugboard/plan.hpp"

namespace plugboard {
namespace {

using Json = nlohmann::json;

/// Reads one JSON value at a path; every failure names source and path.
struct Reader {
  const std::string& source;

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw Error(ErrorCode::Config, source + ": " + path + ": " + what);
  }
  const Json& field(const Json& obj, const std::string& path, const char* key) const {
    if (!obj.is_object()) fail(path, "must be an object");
    auto it = obj.find(key);
    if (it == obj.end()) fail(path, std::string("lacks \"") + key + "\"");
    return *it;
  }
  int64_t integer(const Json& v, const std::string& path, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer()) fail(path, "must be an integer");
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
      fail(path, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " +
                     std::to_string(v.get<uint64_t>()));
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) fail(path, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + std::to_string(x));
    return x;
  }
  std::string text(const Json& v, const std::string& path) const {
    if (!v.is_string()) fail(path, "must be a string");
    return v.get<std::string>();
  }
  const Json& array(const Json& v, const std::string& path) const {
    if (!v.is_array()) fail(path, "must be an array");
    return v;
  }
};

/// Chunk counts and indexes stay far below 2^40: index + size never overflows.
constexpr int64_t kMaxChunks = int64_t(1) << 40;
constexpr int64_t kMaxRanks = 1 << 20;

PlanChunk chunk(const Reader& r, const Json& v, const std::string& path, const Plan& plan) {
  PlanChunk c;
  const std::string buffer = r.text(r.field(v, path, "buffer"), path + ".buffer");
  uint64_t count = 0;
  if (buffer == "input") c.buffer = PlanChunk::Buffer::Input, count = plan.inputChunks;
  else if (buffer == "output") c.buffer = PlanChunk::Buffer::Output, count = plan.outputChunks;
  else if (buffer == "scratch") c.buffer = PlanChunk::Buffer::Scratch, count = plan.scratchChunks;
  else if (buffer == "packets") c.buffer = PlanChunk::Buffer::Packets, count = plan.packetChunks;
  else r.fail(path + ".buffer", "\"" + buffer + "\" is not input, output, scratch or packets");
  c.index = static_cast<uint64_t>(r.integer(r.field(v, path, "index"), path + ".index", 0, kMaxChunks));
  c.size = static_cast<uint64_t>(r.integer(r.field(v, path, "size"), path + ".size", 1, kMaxChunks));
  if (c.index + c.size > count)
    r.fail(path, "chunks [" + std::to_string(c.index) + ", " + std::to_string(c.index + c.size) + ") of " + buffer +
                     " are out of bounds: it has " + std::to_string(count) + " chunks");
  return c;
}

/// Every operation's name in the JSON.
constexpr std::pair<const char*, PlanOp::Kind> kOpNames[] = {
    {"put", PlanOp::Kind::Put},       {"signal", PlanOp::Kind::Signal},         {"wait", PlanOp::Kind::Wait},
    {"flush", PlanOp::Kind::Flush},   {"copy", PlanOp::Kind::Copy},             {"reduce", PlanOp::Kind::Reduce},
    {"put_packet", PlanOp::Kind::PutPacket}, {"reduce_packet", PlanOp::Kind::ReducePacket},
    {"barrier", PlanOp::Kind::Barrier},     {"get", PlanOp::Kind::Get},
    {"switch_reduce", PlanOp::Kind::SwitchReduce}, {"switch_broadcast", PlanOp::Kind::SwitchBroadcast}};

PlanOp::Kind opKind(const Reader& r, const std::string& name, const std::string& path) {
  for (const auto& [n, k] : kOpNames)
    if (name == n) return k;
  r.fail(path, "\"" + name + "\" is not an operation (put, signal, wait, flush, copy, reduce, put_packet, reduce_packet, "
               "barrier, get, switch_reduce, switch_broadcast)");
}

/// Refuses operations of the other protocol: an LL plan moves data between
/// ranks only as packets, a simple plan has none.
void checkProtocol(const Reader& r, const std::string& path, const Plan& plan, PlanOp::Kind k) {
  const bool packetOp = k == PlanOp::Kind::PutPacket || k == PlanOp::Kind::ReducePacket;
  const bool simpleOnly = k == PlanOp::Kind::Put || k == PlanOp::Kind::Get || k == PlanOp::Kind::Signal ||
                          k == PlanOp::Kind::Wait || k == PlanOp::Kind::Flush || k == PlanOp::Kind::SwitchReduce ||
                          k == PlanOp::Kind::SwitchBroadcast;
  if (packetOp && !plan.ll()) r.fail(path, "a packet operation in a plan whose protocol is \"" + plan.protocol + "\" (needs \"ll\")");
  if (simpleOnly && plan.ll())
    r.fail(path, "put, get, signal, wait, flush and the switch operations are not in LL plans (they move data between "
                 "ranks with put_packet only)");
}

/// Packets chunks are where put_packet lands and what reduce_packet reads; no other use.
void requireBuffer(const Reader& r, const std::string& path, const PlanChunk& c, bool packets) {
  if (packets && c.buffer != PlanChunk::Buffer::Packets) r.fail(path, "must be a packets chunk");
  if (!packets && c.buffer == PlanChunk::Buffer::Packets)
    r.fail(path, "is a packets chunk; only put_packet (its dst) and reduce_packet (its packets) use them");
}

void sameSize(const Reader& r, const std::string& path, const PlanChunk& a, const PlanChunk& b) {
  if (a.size != b.size)
    r.fail(path, "chunks of different sizes (" + std::to_string(a.size) + " and " + std::to_string(b.size) + ")");
}

/// The chunks of array `key` at path, each the size of dst; packets: they
/// must be packets chunks (else data chunks).
std::vector<PlanChunk> chunkList(const Reader& r, const Json& v, const std::string& path, const char* key,
                                 const Plan& plan, const PlanChunk& dst, bool packets) {
  std::vector<PlanChunk> out;
  const Json& list = r.array(r.field(v, path, key), path + "." + key);
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = path + "." + key + "[" + std::to_string(i) + "]";
    out.push_back(chunk(r, list[i], at, plan));
    requireBuffer(r, at, out.back(), packets);
    sameSize(r, path, dst, out.back());
  }
  return out;
}

/// A barrier's id (kept in o.barrier until barrierGroups numbers the
/// groups) and its thread blocks' ids, which must include its own.
void barrierOp(const Reader& r, const Json& v, const std::string& path, const Plan& plan, int64_t ownTb,
               size_t rankThreadBlocks, PlanOp& o, std::vector<int64_t>& members) {
  if (plan.version < 3) r.fail(path + ".op", "barrier needs plan_version 3 (this plan is version " + std::to_string(plan.version) + ")");
  o.barrier = static_cast<int>(r.integer(r.field(v, path, "barrier"), path + ".barrier", 0, std::numeric_limits<int32_t>::max()));
  const Json& list = r.array(r.field(v, path, "threadblocks"), path + ".threadblocks");
  if (list.size() > rankThreadBlocks)
    r.fail(path + ".threadblocks", "lists " + std::to_string(list.size()) + " thread blocks; the rank has " +
                                       std::to_string(rankThreadBlocks));
  std::set<int64_t> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    const int64_t tb = r.integer(list[i], path + ".threadblocks[" + std::to_string(i) + "]", 0, kMaxChunks);
    if (!seen.insert(tb).second) r.fail(path + ".threadblocks", "lists thread block " + std::to_string(tb) + " twice");
    members.push_back(tb);
  }
  if (members.size() < 2) r.fail(path + ".threadblocks", "a barrier joins at least two thread blocks");
  if (std::find(members.begin(), members.end(), ownTb) == members.end())
    r.fail(path + ".threadblocks", "does not list thread block " + std::to_string(ownTb) + ", which holds the barrier");
  std::sort(members.begin(), members.end());
  o.parties = static_cast<uint32_t>(members.size());
}

/// The buffer's name as plans spell it.
const char* bufferName(PlanChunk::Buffer b) {
  switch (b) {
    case PlanChunk::Buffer::Input: return "input";
    case PlanChunk::Buffer::Output: return "output";
    case PlanChunk::Buffer::Scratch: return "scratch";
    case PlanChunk::Buffer::Packets: return "packets";
  }
  return "?";
}

/// switch_reduce (dst = src reduced over every rank, src in the switch
/// channel's buffer) and switch_broadcast (src stored into dst of every
/// rank, dst in the switch channel's buffer).
void switchOp(const Reader& r, const Json& v, const std::string& path, const Plan& plan, const PlanRank& rank, PlanOp& o) {
  if (plan.version < 5)
    r.fail(path + ".op", "switch operations need plan_version 5 (this plan is version " + std::to_string(plan.version) + ")");
  if (rank.switches.empty()) r.fail(path + ".switch", "the rank has no switch channels");
  o.switchChannel = static_cast<int>(r.integer(r.field(v, path, "switch"), path + ".switch", 0,
                                               static_cast<int64_t>(rank.switches.size()) - 1));
  const PlanChunk::Buffer bound = rank.switches[o.switchChannel].buffer;
  o.src = chunk(r, r.field(v, path, "src"), path + ".src", plan);
  o.dst = chunk(r, r.field(v, path, "dst"), path + ".dst", plan);
  requireBuffer(r, path + ".src", o.src, false);
  requireBuffer(r, path + ".dst", o.dst, false);
  sameSize(r, path, o.src, o.dst);
  const bool reduce = o.kind == PlanOp::Kind::SwitchReduce;
  const PlanChunk& group = reduce ? o.src : o.dst;
  if (group.buffer != bound)
    r.fail(path + (reduce ? ".src" : ".dst"), std::string("is a chunk of ") + bufferName(group.buffer) + ", but switch channel " +
                                                  std::to_string(o.switchChannel) + " is bound to " + bufferName(bound));
  if (reduce && o.dst.buffer == PlanChunk::Buffer::Input && !plan.inPlace)
    r.fail(path + ".dst", "writes the input of an out-of-place plan");
}

PlanOp op(const Reader& r, const Json& v, const std::string& path, const Plan& plan, const PlanRank& rank, int64_t tb,
          size_t rankThreadBlocks, std::vector<int64_t>& barrierMembers) {
  PlanOp o;
  o.kind = opKind(r, r.text(r.field(v, path, "op"), path + ".op"), path + ".op");
  checkProtocol(r, path + ".op", plan, o.kind);
  if (o.kind == PlanOp::Kind::Barrier) {
    barrierOp(r, v, path, plan, tb, rankThreadBlocks, o, barrierMembers);
    return o;
  }
  if (o.kind == PlanOp::Kind::SwitchReduce || o.kind == PlanOp::Kind::SwitchBroadcast) {
    switchOp(r, v, path, plan, rank, o);
    return o;
  }
  if (o.kind == PlanOp::Kind::Get && plan.version < 4)
    r.fail(path + ".op", "get needs plan_version 4 (this plan is version " + std::to_string(plan.version) + ")");
  const bool onChannel = o.kind == PlanOp::Kind::Put || o.kind == PlanOp::Kind::Get || o.kind == PlanOp::Kind::Signal ||
                         o.kind == PlanOp::Kind::Wait || o.kind == PlanOp::Kind::Flush ||
                         o.kind == PlanOp::Kind::PutPacket;
  if (onChannel) {
    o.channel = static_cast<int>(r.integer(r.field(v, path, "channel"), path + ".channel", 0,
                                           static_cast<int64_t>(rank.channels.size()) - 1));
    if (o.kind == PlanOp::Kind::Flush && rank.channels[o.channel].type != PlanChannel::Type::Port)
      r.fail(path, "flush on a memory channel (only port channels flush)");
    if (o.kind == PlanOp::Kind::Get && rank.channels[o.channel].type != PlanChannel::Type::Memory)
      r.fail(path, "get on a port channel (only memory channels read peer memory)");
  }
  if (o.kind == PlanOp::Kind::Put || o.kind == PlanOp::Kind::Get || o.kind == PlanOp::Kind::Copy ||
      o.kind == PlanOp::Kind::PutPacket) {
    o.src = chunk(r, r.field(v, path, "src"), path + ".src", plan);
    o.dst = chunk(r, r.field(v, path, "dst"), path + ".dst", plan);
    requireBuffer(r, path + ".src", o.src, false);
    requireBuffer(r, path + ".dst", o.dst, o.kind == PlanOp::Kind::PutPacket);
    sameSize(r, path, o.src, o.dst);
  } else if (o.kind == PlanOp::Kind::Reduce || o.kind == PlanOp::Kind::ReducePacket) {
    o.dst = chunk(r, r.field(v, path, "dst"), path + ".dst", plan);
    requireBuffer(r, path + ".dst", o.dst, false);
    o.srcs = chunkList(r, v, path, "srcs", plan, o.dst, false);
    if (o.kind == PlanOp::Kind::ReducePacket) o.packets = chunkList(r, v, path, "packets", plan, o.dst, true);
    const std::vector<PlanChunk>& needed = o.kind == PlanOp::Kind::Reduce ? o.srcs : o.packets;
    if (needed.empty()) r.fail(path + (o.kind == PlanOp::Kind::Reduce ? ".srcs" : ".packets"), "must not be empty");
  }
  const auto writesInput = [&](const PlanChunk& c) { return c.buffer == PlanChunk::Buffer::Input && !plan.inPlace; };
  const bool writes = o.kind == PlanOp::Kind::Copy || o.kind == PlanOp::Kind::Reduce || o.kind == PlanOp::Kind::Put ||
                      o.kind == PlanOp::Kind::Get || o.kind == PlanOp::Kind::ReducePacket;
  if (writes && writesInput(o.dst)) r.fail(path + ".dst", "writes the input of an out-of-place plan");
  return o;
}

/// Where a barrier op was found: its thread block, the group it lists, its path.
struct BarrierSite {
  int64_t tb;
  std::vector<int64_t> members;
  std::string path;
};

/// Checks that every thread block a barrier lists holds it exactly once,
/// all listing the same group, and numbers the groups 0.. by id.
void barrierGroups(const Reader& r, PlanRank& rank, const std::vector<std::pair<int, BarrierSite>>& sites) {
  std::map<int, std::vector<const BarrierSite*>> byId;
  for (const auto& [id, site] : sites) byId[id].push_back(&site);
  std::map<int, int> group;
  for (const auto& [id, list] : byId) {
    const BarrierSite& first = *list.front();
    std::vector<int64_t> holders;
    for (const BarrierSite* s : list) {
      if (s->members != first.members)
        r.fail(s->path, "barrier " + std::to_string(id) + " lists other thread blocks than at " + first.path);
      if (std::find(holders.begin(), holders.end(), s->tb) != holders.end())
        r.fail(s->path, "thread block " + std::to_string(s->tb) + " holds barrier " + std::to_string(id) + " twice");
      holders.push_back(s->tb);
    }
    std::sort(holders.begin(), holders.end());
    if (holders != first.members) {
      for (int64_t m : first.members)
        if (std::find(holders.begin(), holders.end(), m) == holders.end())
          r.fail(first.path, "barrier " + std::to_string(id) + " lists thread block " + std::to_string(m) +
                                 ", which never reaches it (it would wait forever)");
    }
    const int g = static_cast<int>(group.size());
    group[id] = g;
  }
  for (auto& tb : rank.threadblocks)
    for (auto& o : tb.ops)
      if (o.kind == PlanOp::Kind::Barrier) o.barrier = group.at(o.barrier);
  rank.barriers = static_cast<int>(group.size());
}

/// A rank's switch channels (version 5): each bound to output or scratch,
/// no buffer twice.
std::vector<PlanSwitch> switches(const Reader& r, const Json& v, const std::string& path, const Plan& plan) {
  if (plan.version < 5) r.fail(path, "switch channels need plan_version 5 (this plan is version " + std::to_string(plan.version) + ")");
  std::vector<PlanSwitch> out;
  const Json& list = r.array(v, path);
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string sp = path + "[" + std::to_string(i) + "]";
    if (r.integer(r.field(list[i], sp, "id"), sp + ".id", 0, kMaxRanks) != static_cast<int64_t>(i))
      r.fail(sp + ".id", "must equal the switch channel's position " + std::to_string(i));
    PlanSwitch s;
    const std::string buffer = r.text(r.field(list[i], sp, "buffer"), sp + ".buffer");
    if (buffer == "output") s.buffer = PlanChunk::Buffer::Output;
    else if (buffer == "scratch") s.buffer = PlanChunk::Buffer::Scratch;
    else r.fail(sp + ".buffer", "\"" + buffer + "\" cannot be bound to a switch channel (output or scratch can)");
    s.tag = r.integer(r.field(list[i], sp, "tag"), sp + ".tag", 0, std::numeric_limits<int32_t>::max());
    for (const auto& other : out)
      if (other.buffer == s.buffer) r.fail(sp + ".buffer", "the " + buffer + " buffer is bound to a switch channel already");
    out.push_back(s);
  }
  return out;
}

PlanRank rankPart(const Reader& r, const Json& v, const std::string& path, const Plan& plan, int index) {
  PlanRank out;
  std::vector<std::pair<int, BarrierSite>> barriers;
  const int64_t rank = r.integer(r.field(v, path, "rank"), path + ".rank", 0, plan.nranks - 1);
  if (rank != index) r.fail(path + ".rank", "is " + std::to_string(rank) + " at position " + std::to_string(index));
  const Json& channels = r.array(r.field(v, path, "channels"), path + ".channels");
  for (size_t i = 0; i < channels.size(); ++i) {
    const std::string cp = path + ".channels[" + std::to_string(i) + "]";
    if (r.integer(r.field(channels[i], cp, "id"), cp + ".id", 0, kMaxRanks) != static_cast<int64_t>(i))
      r.fail(cp + ".id", "must equal the channel's position " + std::to_string(i));
    PlanChannel c;
    c.peer = static_cast<int>(r.integer(r.field(channels[i], cp, "peer"), cp + ".peer", 0, plan.nranks - 1));
    if (c.peer == index) r.fail(cp + ".peer", "is the rank itself");
    const std::string type = r.text(r.field(channels[i], cp, "type"), cp + ".type");
    if (type == "memory") c.type = PlanChannel::Type::Memory;
    else if (type == "port") c.type = PlanChannel::Type::Port;
    else r.fail(cp + ".type", "\"" + type + "\" is not memory or port");
    c.tag = r.integer(r.field(channels[i], cp, "tag"), cp + ".tag", 0, std::numeric_limits<int32_t>::max());
    out.channels.push_back(c);
  }
  if (v.contains("switches")) out.switches = switches(r, v.at("switches"), path + ".switches", plan);
  const Json& tbs = r.array(r.field(v, path, "threadblocks"), path + ".threadblocks");
  for (size_t i = 0; i < tbs.size(); ++i) {
    const std::string tp = path + ".threadblocks[" + std::to_string(i) + "]";
    PlanThreadBlock tb;
    tb.id = r.integer(r.field(tbs[i], tp, "id"), tp + ".id", 0, kMaxChunks);
    for (const auto& other : out.threadblocks)
      if (other.id == tb.id) r.fail(tp + ".id", "thread block " + std::to_string(tb.id) + " appears twice");
    const Json& ops = r.array(r.field(tbs[i], tp, "ops"), tp + ".ops");
    for (size_t k = 0; k < ops.size(); ++k) {
      const std::string opPath = tp + ".ops[" + std::to_string(k) + "]";
      std::vector<int64_t> members;
      tb.ops.push_back(op(r, ops[k], opPath, plan, out, tb.id, tbs.size(), members));
      if (tb.ops.back().kind == PlanOp::Kind::Barrier) barriers.push_back({tb.ops.back().barrier, {tb.id, members, opPath}});
    }
    out.threadblocks.push_back(std::move(tb));
  }
  barrierGroups(r, out, barriers);
  return out;
}

/// Plans nest a few levels (document, ranks, thread blocks, ops, chunks);
/// the parser recurses per level, so deeper text is refused before it runs.
constexpr int kMaxDepth = 32;
/// Plans of 8 ranks take tens of KiB; a 64 MiB limit keeps memory bounded.
constexpr size_t kMaxPlanBytes = size_t(64) << 20;

/// The deepest nesting of [ and { outside strings.
int nestingDepth(const std::string& text) {
  int depth = 0, deepest = 0;
  bool inString = false, escaped = false;
  for (char ch : text) {
    if (inString) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') inString = false;
    } else if (ch == '"') {
      inString = true;
    } else if (ch == '[' || ch == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

Plan parsePlan(const std::string& text, const std::string& source) {
  const Reader r{source};
  if (text.size() > kMaxPlanBytes)
    r.fail("(document)", "is " + std::to_string(text.size()) + " bytes, more than the " + std::to_string(kMaxPlanBytes) + " a plan may have");
  if (nestingDepth(text) > kMaxDepth)
    r.fail("(document)", "is nested deeper than " + std::to_string(kMaxDepth) + " levels; no plan is");
  Json doc = Json::parse(text, nullptr, false);
  if (doc.is_discarded()) r.fail("(document)", "is not valid JSON");
  Plan plan;
  plan.source = source;
  const int64_t version = r.integer(r.field(doc, "$", "plan_version"), "$.plan_version", 0, std::numeric_limits<int32_t>::max());
  if (version < 1 || version > kPlanVersion)
    r.fail("$.plan_version", "is " + std::to_string(version) + "; this Plugboard reads versions 1 to " + std::to_string(kPlanVersion));
  plan.version = static_cast<int>(version);
  plan.name = r.text(r.field(doc, "$", "name"), "$.name");
  plan.collective = r.text(r.field(doc, "$", "collective"), "$.collective");
  plan.protocol = r.text(r.field(doc, "$", "protocol"), "$.protocol");
  if (plan.protocol != "simple" && (plan.protocol != "ll" || version < 2))
    r.fail("$.protocol", "\"" + plan.protocol + "\" is not " + (version < 2 ? "simple (the only protocol of version 1)" : "simple or ll"));
  plan.nranks = static_cast<int>(r.integer(r.field(doc, "$", "nranks"), "$.nranks", 1, kMaxRanks));
  const Json& inPlace = r.field(doc, "$", "in_place");
  if (!inPlace.is_boolean()) r.fail("$.in_place", "must be true or false");
  plan.inPlace = inPlace.get<bool>();
  plan.instances = r.integer(r.field(doc, "$", "instances"), "$.instances", 1, 1024);
  const Json& buffers = r.field(doc, "$", "buffers");
  plan.inputChunks = static_cast<uint64_t>(r.integer(r.field(buffers, "$.buffers", "input"), "$.buffers.input", 1, kMaxChunks));
  plan.outputChunks = static_cast<uint64_t>(r.integer(r.field(buffers, "$.buffers", "output"), "$.buffers.output", 1, kMaxChunks));
  plan.scratchChunks = static_cast<uint64_t>(r.integer(r.field(buffers, "$.buffers", "scratch"), "$.buffers.scratch", 0, kMaxChunks));
  if (version >= 2)
    plan.packetChunks = static_cast<uint64_t>(r.integer(r.field(buffers, "$.buffers", "packets"), "$.buffers.packets", 0, kMaxChunks));
  if (plan.inPlace && plan.inputChunks != plan.outputChunks)
    r.fail("$.buffers", "an in-place plan cuts input and output alike (one buffer)");
  const Json& ranks = r.array(r.field(doc, "$", "ranks"), "$.ranks");
  if (ranks.size() != static_cast<size_t>(plan.nranks))
    r.fail("$.ranks", "has " + std::to_string(ranks.size()) + " entries for " + std::to_string(plan.nranks) + " ranks");
  for (int i = 0; i < plan.nranks; ++i) plan.ranks.push_back(rankPart(r, ranks[i], "$.ranks[" + std::to_string(i) + "]", plan, i));
  checkPlanAcrossRanks(plan);
  return plan;
}

const char* planOpName(PlanOp::Kind kind) {
  for (const auto& [n, k] : kOpNames)
    if (k == kind) return n;
  return "?";
}

Plan loadPlan(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::Config, "plan " + path + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return parsePlan(text.str(), path);
}

}  // namespace plugboard
