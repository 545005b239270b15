// Execution plans (plan.hpp): every shipped plan loads; hostile and broken
// plans (syntax, version, types, huge or negative numbers, bounds,
// channels, signal/wait pairing, LL packets, deep nesting) end in
// Error(Config) naming the JSON path, never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "plugboard/error.hpp"
#include "plugboard/plan.hpp"

using namespace plugboard;

namespace {

/// plans/allgather_allpairs/2ranks.json on one line.
const std::string kValid =
    R"({"plan_version": 1, "name": "allgather_allpairs", "collective": "allgather", "nranks": 2, "in_place": false, )"
    R"("protocol": "simple", "instances": 1, "buffers": {"input": 1, "output": 2, "scratch": 0}, "ranks": [)"
    R"({"rank": 0, "channels": [{"id": 0, "peer": 1, "type": "memory", "tag": 0}], "threadblocks": [)"
    R"({"id": 0, "ops": [{"op": "copy", "src": {"buffer": "input", "index": 0, "size": 1}, "dst": {"buffer": "output", "index": 0, "size": 1}}]}, )"
    R"({"id": 1, "ops": [{"op": "put", "channel": 0, "src": {"buffer": "input", "index": 0, "size": 1}, "dst": {"buffer": "output", "index": 0, "size": 1}}, )"
    R"({"op": "signal", "channel": 0}, {"op": "wait", "channel": 0}]}]}, )"
    R"({"rank": 1, "channels": [{"id": 0, "peer": 0, "type": "memory", "tag": 0}], "threadblocks": [)"
    R"({"id": 0, "ops": [{"op": "copy", "src": {"buffer": "input", "index": 0, "size": 1}, "dst": {"buffer": "output", "index": 1, "size": 1}}, )"
    R"({"op": "put", "channel": 0, "src": {"buffer": "input", "index": 0, "size": 1}, "dst": {"buffer": "output", "index": 1, "size": 1}}, )"
    R"({"op": "signal", "channel": 0}, {"op": "wait", "channel": 0}]}]}]})";

/// A version-2 LL plan: each of 2 ranks puts its input as packets into the
/// other's packets[0] and reduces its input with them.
const std::string kValidLl =
    R"({"plan_version": 2, "name": "ll", "collective": "allreduce", "nranks": 2, "in_place": false, )"
    R"("protocol": "ll", "instances": 1, "buffers": {"input": 1, "output": 1, "scratch": 0, "packets": 2}, "ranks": [)"
    R"({"rank": 0, "channels": [{"id": 0, "peer": 1, "type": "memory", "tag": 0}], "threadblocks": [{"id": 0, "ops": [)"
    R"({"op": "put_packet", "channel": 0, "src": {"buffer": "input", "index": 0, "size": 1}, "dst": {"buffer": "packets", "index": 0, "size": 1}}, )"
    R"({"op": "reduce_packet", "dst": {"buffer": "output", "index": 0, "size": 1}, "srcs": [{"buffer": "input", "index": 0, "size": 1}], )"
    R"("packets": [{"buffer": "packets", "index": 0, "size": 1}]}]}]}, )"
    R"({"rank": 1, "channels": [{"id": 0, "peer": 0, "type": "memory", "tag": 0}], "threadblocks": [{"id": 0, "ops": [)"
    R"({"op": "put_packet", "channel": 0, "src": {"buffer": "input", "index": 0, "size": 1}, "dst": {"buffer": "packets", "index": 0, "size": 1}}, )"
    R"({"op": "reduce_packet", "dst": {"buffer": "output", "index": 0, "size": 1}, "srcs": [], )"
    R"("packets": [{"buffer": "packets", "index": 0, "size": 1}]}]}]}]})";

/// base with the first occurrence of from replaced by to.
std::string mutateText(const std::string& base, const std::string& from, const std::string& to) {
  std::string s = base;
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? s : s.replace(at, from.size(), to);
}

/// kValid with the first occurrence of from replaced by to.
std::string mutate(const std::string& from, const std::string& to) { return mutateText(kValid, from, to); }
/// kValidLl with the first occurrence of from replaced by to.
std::string mutateLl(const std::string& from, const std::string& to) { return mutateText(kValidLl, from, to); }

void expectRefused(const std::string& text, const std::string& fragment) {
  try {
    parsePlan(text, "test.json");
    ADD_FAILURE() << "accepted a plan that should fail with: " << fragment;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Config) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "message: " << e.what();
    EXPECT_NE(std::string(e.what()).find("test.json"), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(Plan, TheValidPlanLoads) {
  const Plan p = parsePlan(kValid, "test.json");
  EXPECT_EQ(p.nranks, 2);
  EXPECT_EQ(p.outputChunks, 2u);
  ASSERT_EQ(p.ranks.size(), 2u);
  EXPECT_EQ(p.ranks[0].threadblocks[1].ops[0].kind, PlanOp::Kind::Put);
  EXPECT_EQ(p.ranks[1].threadblocks[0].ops[0].dst.index, 1u);
}

TEST(Plan, EveryShippedPlanLoads) {
  const std::filesystem::path root = std::filesystem::path(PLUGBOARD_TEST_SOURCE_DIR) / ".." / "plans";
  int loaded = 0;
  for (const auto& program : std::filesystem::directory_iterator(root)) {
    if (!program.is_directory()) continue;
    for (const auto& file : std::filesystem::directory_iterator(program.path())) {
      const Plan p = loadPlan(file.path().string());
      EXPECT_EQ(p.name, program.path().filename().string());
      const bool port = file.path().filename().string().rfind("port-", 0) == 0;
      EXPECT_EQ((port ? "port-" : "") + std::to_string(p.nranks) + "ranks.json", file.path().filename().string());
      for (const auto& r : p.ranks)
        for (const auto& c : r.channels) EXPECT_EQ(c.type, port ? PlanChannel::Type::Port : PlanChannel::Type::Memory);
      ++loaded;
    }
  }
  // 11 programs: 2-8 ranks over memory channels, 2-4 over port channels but
  // for allgather_allpairs_get (gets read over memory channels only) and
  // allreduce_switch (switch channels: one NVLink domain).
  EXPECT_EQ(loaded, 104);
}

TEST(Plan, BrokenDocumentsAreNamed) {
  expectRefused("not json", "(document): is not valid JSON");
  expectRefused(kValid.substr(0, kValid.size() / 2), "is not valid JSON");
  expectRefused("[]", "$: must be an object");
  expectRefused("{}", "$: lacks \"plan_version\"");
  expectRefused(std::string(100000, '[') + std::string(100000, ']'), "nested deeper than");
  EXPECT_THROW(loadPlan("/nonexistent/plan.json"), Error);
}

TEST(Plan, WrongVersionsTypesAndNumbersAreNamed) {
  expectRefused(mutate("\"plan_version\": 1", "\"plan_version\": 6"), "$.plan_version: is 6; this Plugboard reads versions 1 to 5");
  expectRefused(mutate("\"plan_version\": 1", "\"plan_version\": 0"), "$.plan_version: is 0");
  expectRefused(mutate("\"nranks\": 2", "\"nranks\": -1"), "$.nranks: must be between 1 and");
  expectRefused(mutate("\"nranks\": 2", "\"nranks\": 1e30"), "$.nranks: must be an integer");
  expectRefused(mutate("\"nranks\": 2", "\"nranks\": 18446744073709551615"), "$.nranks: must be between 1 and");
  expectRefused(mutate("\"nranks\": 2", "\"nranks\": 1"), "$.ranks: has 2 entries for 1 ranks");
  expectRefused(mutate("\"in_place\": false", "\"in_place\": 0"), "$.in_place: must be true or false");
  expectRefused(mutate("\"protocol\": \"simple\"", "\"protocol\": \"ll\""),
                "$.protocol: \"ll\" is not simple (the only protocol of version 1)");
  expectRefused(mutateLl("\"protocol\": \"ll\"", "\"protocol\": \"ll128\""), "$.protocol: \"ll128\" is not simple or ll");
  expectRefused(mutateLl(", \"packets\": 2}", "}"), "$.buffers: lacks \"packets\"");
  expectRefused(mutate("\"name\": \"allgather_allpairs\"", "\"name\": 7"), "$.name: must be a string");
  expectRefused(mutate("\"scratch\": 0", "\"scratch\": -5"), "$.buffers.scratch: must be between 0 and");
}

TEST(Plan, AnLlPlanLoads) {
  const Plan p = parsePlan(kValidLl, "test.json");
  EXPECT_TRUE(p.ll());
  EXPECT_EQ(p.packetChunks, 2u);
  const PlanOp& put = p.ranks[0].threadblocks[0].ops[0];
  EXPECT_EQ(put.kind, PlanOp::Kind::PutPacket);
  EXPECT_EQ(put.dst.buffer, PlanChunk::Buffer::Packets);
  const PlanOp& red = p.ranks[0].threadblocks[0].ops[1];
  EXPECT_EQ(red.kind, PlanOp::Kind::ReducePacket);
  EXPECT_EQ(red.srcs.size(), 1u);
  ASSERT_EQ(red.packets.size(), 1u);
  EXPECT_EQ(p.ranks[1].threadblocks[0].ops[1].srcs.size(), 0u);
}

TEST(Plan, LlOperationsAndPacketsAreChecked) {
  const std::string op0 = "$.ranks[0].threadblocks[0].ops[0]", op1 = "$.ranks[0].threadblocks[0].ops[1]";
  expectRefused(mutateLl("\"op\": \"put_packet\"", "\"op\": \"put\""),
                op0 + ".op: put, get, signal, wait, flush and the switch operations are not in LL plans");
  expectRefused(mutate("\"op\": \"put\"", "\"op\": \"put_packet\""),
                ".op: a packet operation in a plan whose protocol is \"simple\"");
  expectRefused(mutateLl("\"dst\": {\"buffer\": \"packets\"", "\"dst\": {\"buffer\": \"output\""), op0 + ".dst: must be a packets chunk");
  expectRefused(mutateLl("\"src\": {\"buffer\": \"input\"", "\"src\": {\"buffer\": \"packets\""),
                op0 + ".src: is a packets chunk; only put_packet (its dst) and reduce_packet (its packets) use them");
  expectRefused(mutateLl("\"packets\": [{\"buffer\": \"packets\"", "\"packets\": [{\"buffer\": \"scratch\""),
                op1 + ".packets[0]: chunks [0, 1) of scratch are out of bounds");
  expectRefused(mutateLl("\"packets\": [{\"buffer\": \"packets\"", "\"packets\": [{\"buffer\": \"input\""),
                op1 + ".packets[0]: must be a packets chunk");
  expectRefused(mutateLl("\"srcs\": [{\"buffer\": \"input\"", "\"srcs\": [{\"buffer\": \"packets\""),
                op1 + ".srcs[0]: is a packets chunk");
  expectRefused(mutateLl("\"packets\": [{\"buffer\": \"packets\", \"index\": 0, \"size\": 1}]}]}]}, ", "\"packets\": []}]}]}, "),
                op1 + ".packets: must not be empty");
  expectRefused(mutateLl("\"packets\": [{\"buffer\": \"packets\", \"index\": 0", "\"packets\": [{\"buffer\": \"packets\", \"index\": 1"),
                op1 + ": waits for packets[1], which no put_packet writes");
  // Rank 1 puts into rank 0's packets[0] twice (its second op becomes a put_packet).
  const std::string twice = mutateText(kValidLl, R"({"op": "reduce_packet", "dst": {"buffer": "output", "index": 0, "size": 1}, "srcs": [], )"
                                                 R"("packets": [{"buffer": "packets", "index": 0, "size": 1}]})",
                                       R"({"op": "put_packet", "channel": 0, "src": {"buffer": "input", "index": 0, "size": 1}, )"
                                       R"("dst": {"buffer": "packets", "index": 0, "size": 1}})");
  expectRefused(twice, "$.ranks[1].threadblocks[0].ops[1]: puts packets into rank 0 packets[0], which "
                       "$.ranks[1].threadblocks[0].ops[0] already puts");
}

TEST(Plan, OperationsOutOfBoundsOrMalformedAreNamed) {
  const std::string op0 = "$.ranks[0].threadblocks[0].ops[0]";
  expectRefused(mutate("\"index\": 0, \"size\": 1}, \"dst\"", "\"index\": 4611686018427387904, \"size\": 1}, \"dst\""),
                op0 + ".src.index: must be between 0 and");
  expectRefused(mutate("\"index\": 0, \"size\": 1}, \"dst\"", "\"index\": 0, \"size\": -1}, \"dst\""),
                op0 + ".src.size: must be between 1 and");
  expectRefused(mutate("\"index\": 0, \"size\": 1}, \"dst\"", "\"index\": 0, \"size\": 2}, \"dst\""),
                op0 + ".src: chunks [0, 2) of input are out of bounds: it has 1 chunks");
  expectRefused(mutate("{\"buffer\": \"input\"", "{\"buffer\": \"heap\""), op0 + ".src.buffer: \"heap\" is not input");
  expectRefused(mutate("\"op\": \"copy\"", "\"op\": \"jump\""), op0 + ".op: \"jump\" is not an operation");
  expectRefused(mutate("\"op\": \"signal\", \"channel\": 0", "\"op\": \"signal\", \"channel\": 3"),
                "$.ranks[0].threadblocks[1].ops[1].channel: must be between 0 and 0");
  expectRefused(mutate("\"op\": \"signal\", \"channel\": 0", "\"op\": \"flush\", \"channel\": 0"),
                "flush on a memory channel");
  expectRefused(mutate("\"dst\": {\"buffer\": \"output\", \"index\": 0", "\"dst\": {\"buffer\": \"input\", \"index\": 0"),
                op0 + ".dst: writes the input of an out-of-place plan");
  expectRefused(mutate("{\"id\": 1, \"ops\"", "{\"id\": 0, \"ops\""), "thread block 0 appears twice");
}

TEST(Plan, ChannelsAndSignalsMustPairAcrossRanks) {
  expectRefused(mutate("\"peer\": 1", "\"peer\": 0"), "$.ranks[0].channels[0].peer: is the rank itself");
  expectRefused(mutate("\"type\": \"memory\"", "\"type\": \"port\""), "has no matching channel back");
  expectRefused(mutate("{\"op\": \"wait\", \"channel\": 0}", "{\"op\": \"signal\", \"channel\": 0}"),
                "rank 0 signals rank 1 2 times on it but rank 1 waits 1 times");
}

namespace {

/// kValid as version 3 with a barrier joining rank 0's thread blocks 0
/// (after its copy) and 1 (after its wait).
std::string withBarrier(const std::string& tb0List = "[0, 1]", const std::string& tb1List = "[0, 1]") {
  std::string s = mutate("\"plan_version\": 1", "\"plan_version\": 3");
  s = mutateText(s, "\"scratch\": 0}", "\"scratch\": 0, \"packets\": 0}");
  s = mutateText(s, "\"index\": 0, \"size\": 1}}]}, ",
                 "\"index\": 0, \"size\": 1}}, {\"op\": \"barrier\", \"barrier\": 4, \"threadblocks\": " + tb0List + "}]}, ");
  return mutateText(s, "{\"op\": \"wait\", \"channel\": 0}]}]}, ",
                    "{\"op\": \"wait\", \"channel\": 0}, {\"op\": \"barrier\", \"barrier\": 4, \"threadblocks\": " + tb1List +
                        "}]}]}, ");
}

}  // namespace

TEST(Plan, ABarrierLoadsWithItsGroupNumbered) {
  const Plan p = parsePlan(withBarrier(), "test.json");
  EXPECT_EQ(p.version, 3);
  ASSERT_EQ(p.ranks[0].barriers, 1);
  const PlanOp& a = p.ranks[0].threadblocks[0].ops.back();
  const PlanOp& b = p.ranks[0].threadblocks[1].ops.back();
  EXPECT_EQ(a.kind, PlanOp::Kind::Barrier);
  EXPECT_EQ(a.barrier, 0) << "barrier id 4 is the rank's first group";
  EXPECT_EQ(b.barrier, 0);
  EXPECT_EQ(a.parties, 2u);
  EXPECT_EQ(p.ranks[1].barriers, 0);
  const Plan shipped = loadPlan(std::string(PLUGBOARD_TEST_SOURCE_DIR) + "/../plans/allreduce_allpairs_blocks/4ranks.json");
  for (const auto& rank : shipped.ranks) {
    EXPECT_EQ(rank.barriers, 1);
    EXPECT_EQ(rank.threadblocks.size(), 4u);
    EXPECT_EQ(rank.threadblocks[0].ops.front().parties, 4u);
  }
}

TEST(Plan, BarriersThatCannotCompleteAreNamed) {
  expectRefused(mutateText(withBarrier(), "\"plan_version\": 3", "\"plan_version\": 2"),
                "barrier needs plan_version 3 (this plan is version 2)");
  expectRefused(withBarrier("[0]", "[0]"), "threadblocks: a barrier joins at least two thread blocks");
  expectRefused(withBarrier("[0, 0]"), "threadblocks: lists thread block 0 twice");
  expectRefused(withBarrier("[0, 1, 2]"), "threadblocks: lists 3 thread blocks; the rank has 2");
  expectRefused(withBarrier("[1, 2]"), "does not list thread block 0, which holds the barrier");
  expectRefused(withBarrier("[0, 1]", "[1, 5]"), "barrier 4 lists other thread blocks than at $.ranks[0].threadblocks[0].ops[1]");
  expectRefused(mutateText(withBarrier(), "\"barrier\": 4, \"threadblocks\": [0, 1]}]}]}", "\"barrier\": 5, \"threadblocks\": [0, 1]}]}]}"),
                "barrier 4 lists thread block 1, which never reaches it (it would wait forever)");
  expectRefused(mutateText(withBarrier(), "{\"op\": \"wait\", \"channel\": 0}, {\"op\": \"barrier\"",
                           "{\"op\": \"barrier\", \"barrier\": 4, \"threadblocks\": [0, 1]}, {\"op\": \"wait\", \"channel\": 0}, "
                           "{\"op\": \"barrier\""),
                "thread block 1 holds barrier 4 twice");
  expectRefused(mutateText(withBarrier(), "\"barrier\": 4", "\"barrier\": -1"), "ops[1].barrier: must be between 0 and");
}

namespace {

/// kValid as version 4 with rank 1 reading rank 0's input by a get into
/// its output[0] (before its signal) instead of receiving rank 0's put.
std::string withGet(const std::string& channelType = "memory") {
  std::string s = mutate("\"plan_version\": 1", "\"plan_version\": 4");
  s = mutateText(s, "\"scratch\": 0}", "\"scratch\": 0, \"packets\": 0}");
  s = mutateText(s, "{\"op\": \"put\", \"channel\": 0, \"src\": {\"buffer\": \"input\", \"index\": 0, \"size\": 1}, "
                    "\"dst\": {\"buffer\": \"output\", \"index\": 0, \"size\": 1}}, ", "");
  s = mutateText(s, "{\"op\": \"signal\", \"channel\": 0}, {\"op\": \"wait\", \"channel\": 0}]}]}]}",
                 "{\"op\": \"get\", \"channel\": 0, \"src\": {\"buffer\": \"input\", \"index\": 0, \"size\": 1}, "
                 "\"dst\": {\"buffer\": \"output\", \"index\": 0, \"size\": 1}}, "
                 "{\"op\": \"signal\", \"channel\": 0}, {\"op\": \"wait\", \"channel\": 0}]}]}]}");
  if (channelType != "memory") {
    s = mutateText(s, "\"type\": \"memory\"", "\"type\": \"" + channelType + "\"");
    s = mutateText(s, "\"type\": \"memory\"", "\"type\": \"" + channelType + "\"");
  }
  return s;
}

}  // namespace

TEST(Plan, AGetLoads) {
  const Plan p = parsePlan(withGet(), "test.json");
  EXPECT_EQ(p.version, 4);
  const PlanOp& g = p.ranks[1].threadblocks[0].ops[2];
  EXPECT_EQ(g.kind, PlanOp::Kind::Get);
  EXPECT_EQ(g.channel, 0);
  EXPECT_EQ(g.src.buffer, PlanChunk::Buffer::Input);
  EXPECT_EQ(g.dst.index, 0u);
}

TEST(Plan, GetsThatCannotRunAreNamed) {
  expectRefused(mutateText(withGet(), "\"plan_version\": 4", "\"plan_version\": 3"),
                "ops[2].op: get needs plan_version 4 (this plan is version 3)");
  expectRefused(withGet("port"), "ops[2]: get on a port channel (only memory channels read peer memory)");
  expectRefused(mutateText(withGet(), "\"op\": \"get\", \"channel\": 0, \"src\": {\"buffer\": \"input\", \"index\": 0, \"size\": 1}, "
                                      "\"dst\": {\"buffer\": \"output\"",
                           "\"op\": \"get\", \"channel\": 0, \"src\": {\"buffer\": \"input\", \"index\": 0, \"size\": 1}, "
                           "\"dst\": {\"buffer\": \"input\""),
                "ops[2].dst: writes the input of an out-of-place plan");
  expectRefused(mutateText(withGet(), "\"op\": \"get\", \"channel\": 0", "\"op\": \"get\", \"channel\": 3"),
                "ops[2].channel");
  expectRefused(mutateText(withGet(), "\"op\": \"get\", \"channel\": 0, \"src\": {\"buffer\": \"input\", \"index\": 0, \"size\": 1}",
                           "\"op\": \"get\", \"channel\": 0, \"src\": {\"buffer\": \"input\", \"index\": 0, \"size\": 2}"),
                "ops[2].src: chunks [0, 2) of input are out of bounds");
}

namespace {

/// plans/allreduce_switch/2ranks.json (switch channels on scratch and
/// output; memory channels order the ranks) on one line, items apart by
/// ", " as in kValid (the plan's strings hold no commas).
std::string switchPlanText() {
  std::ifstream in(std::string(PLUGBOARD_TEST_SOURCE_DIR) + "/../plans/allreduce_switch/2ranks.json");
  std::ostringstream text;
  text << in.rdbuf();
  std::string out;
  bool indent = false;
  for (char ch : text.str()) {
    if (ch == '\n' || (indent && ch == ' ')) {
      indent = true;
      continue;
    }
    indent = false;
    out += ch;
    if (ch == ',') out += ' ';
  }
  return out;
}

/// The switch plan with every occurrence of from replaced by to (all
/// ranks alike), or only the first.
std::string mutateSwitch(const std::string& from, const std::string& to, bool all = true) {
  std::string s = switchPlanText();
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  while (at != std::string::npos) {
    s.replace(at, from.size(), to);
    at = all ? s.find(from, at + to.size()) : std::string::npos;
  }
  return s;
}

}  // namespace

TEST(Plan, ASwitchPlanLoads) {
  const Plan p = parsePlan(switchPlanText(), "test.json");
  EXPECT_EQ(p.version, 5);
  ASSERT_TRUE(p.hasSwitches());
  EXPECT_EQ(p.switchOf(PlanChunk::Buffer::Scratch), 0);
  EXPECT_EQ(p.switchOf(PlanChunk::Buffer::Output), 1);
  EXPECT_EQ(p.switchOf(PlanChunk::Buffer::Input), -1);
  const auto& ops = p.ranks[1].threadblocks[0].ops;
  std::vector<std::pair<PlanOp::Kind, int>> switched;
  for (const auto& o : ops)
    if (o.switchChannel >= 0) switched.push_back({o.kind, o.switchChannel});
  const std::vector<std::pair<PlanOp::Kind, int>> want = {{PlanOp::Kind::SwitchReduce, 0}, {PlanOp::Kind::SwitchBroadcast, 1}};
  EXPECT_EQ(switched, want);
  for (const auto& o : ops) {
    const bool switchOp = o.kind == PlanOp::Kind::SwitchReduce || o.kind == PlanOp::Kind::SwitchBroadcast;
    EXPECT_EQ(o.switchChannel >= 0, switchOp) << planOpName(o.kind);
    if (switchOp) {
      EXPECT_LT(o.channel, 0);
    }
  }
  EXPECT_STREQ(planOpName(PlanOp::Kind::SwitchBroadcast), "switch_broadcast");
  EXPECT_FALSE(parsePlan(kValid, "test.json").hasSwitches());
}

TEST(Plan, SwitchChannelsThatCannotRunAreNamed) {
  expectRefused(mutateSwitch("\"plan_version\": 5", "\"plan_version\": 4"), "switch channels need plan_version 5");
  expectRefused(mutateSwitch("\"buffer\": \"output\", \"tag\"", "\"buffer\": \"input\", \"tag\""),
                "$.ranks[0].switches[1].buffer: \"input\" cannot be bound to a switch channel");
  expectRefused(mutateSwitch("\"buffer\": \"output\", \"tag\"", "\"buffer\": \"scratch\", \"tag\""),
                "the scratch buffer is bound to a switch channel already");
  expectRefused(mutateSwitch("\"switch\": 1", "\"switch\": 2"), ".switch: must be between 0 and 1, got 2");
  expectRefused(mutateSwitch("\"switch_reduce\", \"switch\": 0", "\"switch_reduce\", \"switch\": 1"),
                ".src: is a chunk of scratch, but switch channel 1 is bound to output");
  expectRefused(mutateSwitch("\"switch_broadcast\", \"switch\": 1", "\"switch_broadcast\", \"switch\": 0"),
                ".dst: is a chunk of output, but switch channel 0 is bound to scratch");
  expectRefused(mutateSwitch("\"id\": 1, \"buffer\": \"output\", \"tag\": 0", "\"id\": 1, \"buffer\": \"output\", \"tag\": 7", false),
                "$.ranks[1].switches: differs from rank 0's");
  expectRefused(mutateSwitch("\"type\": \"memory\"", "\"type\": \"port\""), "a port channel in a plan with switch channels");
  expectRefused(mutateSwitch("\"op\": \"switch_broadcast\", \"switch\": 1", "\"op\": \"put\", \"channel\": 0"),
                "puts into a peer's buffer bound to switch channel 1, which peers reach only through that channel");
  // In place, a put into a peer's input is a put into its (bound) output.
  std::string inPlace = mutateSwitch("\"in_place\": false", "\"in_place\": true");
  const std::string broadcast = "\"op\": \"switch_broadcast\", \"switch\": 1, \"src\": {\"buffer\": \"output\", \"index\": 0, "
                                "\"size\": 1}, \"dst\": {\"buffer\": \"output\"";
  expectRefused(mutateText(inPlace, broadcast, "\"op\": \"put\", \"channel\": 0, \"src\": {\"buffer\": \"output\", \"index\": 0, "
                                               "\"size\": 1}, \"dst\": {\"buffer\": \"input\""),
                "puts into a peer's buffer bound to switch channel 1");
  expectRefused(mutateSwitch("\"switches\": [{\"id\": 0", "\"nothing\": [{\"id\": 0"), "the rank has no switch channels");
  expectRefused(mutateSwitch("\"protocol\": \"simple\"", "\"protocol\": \"ll\""), "are not in LL plans");
}
