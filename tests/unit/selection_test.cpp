#include <gtest/gtest.h>
#include <plugboard/transport.h>

#include "plugboard/error.hpp"
#include "selection/selector.hpp"

using namespace plugboard;

namespace {

// n ranks; hosts[r] is rank r's host; every rank loads `loaded`; a transport
// named "local" reaches only same-host peers (cost 10); others reach all (cost 100).
std::vector<RankView> makeViews(const std::vector<std::string>& hosts, const std::vector<std::string>& loaded) {
  std::vector<RankView> v(hosts.size());
  for (size_t a = 0; a < hosts.size(); ++a) {
    v[a].host = hosts[a];
    v[a].transports = loaded;
    for (size_t b = 0; b < hosts.size(); ++b) {
      if (a == b) continue;
      for (const auto& t : loaded) {
        bool same = hosts[a] == hosts[b];
        v[a].reach[static_cast<int>(b)][t] = t == "local" ? (same ? Reach{10, ""} : Reach{-1, "different host"}) : Reach{100, ""};
      }
    }
  }
  return v;
}

Rule rule(PeerMatch::Kind kind, std::vector<std::string> use) {
  Rule r;
  r.peers.kind = kind;
  r.use = std::move(use);
  r.origin = "test.yaml:1";
  return r;
}

}  // namespace

TEST(Selection, LowestCostWithoutRules) {
  auto views = makeViews({"a", "a", "b", "b"}, {"local", "ethernet"});
  auto c = selectTransports(views, {}, PB_MEM_HOST);
  EXPECT_EQ(c.at({0, 1}).transport, "local");
  EXPECT_EQ(c.at({2, 3}).transport, "local");
  EXPECT_EQ(c.at({0, 2}).transport, "ethernet");
  EXPECT_NE(c.at({0, 2}).why.find("local: different host"), std::string::npos) << c.at({0, 2}).why;
}

TEST(Selection, FirstMatchingRuleWinsInItsOrder) {
  auto views = makeViews({"a", "a", "b", "b"}, {"local", "ethernet"});
  std::vector<Rule> rules{rule(PeerMatch::Kind::SameHost, {"ethernet", "local"}), rule(PeerMatch::Kind::Any, {"ethernet"})};
  auto c = selectTransports(views, rules, PB_MEM_HOST);
  EXPECT_EQ(c.at({0, 1}).transport, "ethernet");  // rule order beats cost
  EXPECT_NE(c.at({0, 1}).why.find("rule test.yaml:1 same-host"), std::string::npos);
  EXPECT_EQ(c.at({1, 3}).transport, "ethernet");
}

TEST(Selection, RankRangesMatchEitherDirection) {
  auto views = makeViews({"a", "a", "a", "a"}, {"x", "y"});
  Rule r = rule(PeerMatch::Kind::Ranks, {"y"});
  r.peers.from = RankSet::parse("0-1", "t");
  r.peers.to = RankSet::parse("2-3", "t");
  auto c = selectTransports(views, {r, rule(PeerMatch::Kind::Any, {"x"})}, PB_MEM_HOST);
  EXPECT_EQ(c.at({0, 2}).transport, "y");
  EXPECT_EQ(c.at({1, 3}).transport, "y");
  EXPECT_EQ(c.at({0, 1}).transport, "x");
  EXPECT_EQ(c.at({2, 3}).transport, "x");
}

TEST(Selection, HostListRule) {
  auto views = makeViews({"n1", "n2", "n3"}, {"x", "y"});
  Rule r = rule(PeerMatch::Kind::Hosts, {"y"});
  r.peers.hosts = {"n1", "n2"};
  auto c = selectTransports(views, {r, rule(PeerMatch::Kind::Any, {"x"})}, PB_MEM_HOST);
  EXPECT_EQ(c.at({0, 1}).transport, "y");
  EXPECT_EQ(c.at({0, 2}).transport, "x");
}

TEST(Selection, NoUsableTransportNamesPairAndReasons) {
  auto views = makeViews({"a", "b"}, {"local"});
  try {
    selectTransports(views, {}, PB_MEM_HOST);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("rank 0 (host a) and rank 1 (host b)"), std::string::npos) << m;
    EXPECT_NE(m.find("local: different host"), std::string::npos) << m;
  }
}

TEST(Selection, TransportMissingOnOneRankIsSkippedWithReason) {
  auto views = makeViews({"a", "a"}, {"fast", "slow"});
  views[1].transports = {"slow"};
  auto c = selectTransports(views, {rule(PeerMatch::Kind::Any, {"fast", "slow"})}, PB_MEM_HOST);
  EXPECT_EQ(c.at({0, 1}).transport, "slow");
  EXPECT_NE(c.at({0, 1}).why.find("fast: not loaded on rank 1"), std::string::npos) << c.at({0, 1}).why;
}

TEST(Selection, RuleNamingUnloadedTransportFails) {
  auto views = makeViews({"a", "a"}, {"ethernet"});
  EXPECT_THROW(checkRulesUseLoaded({rule(PeerMatch::Kind::Any, {"ucx"})}, views), Error);
  EXPECT_NO_THROW(checkRulesUseLoaded({rule(PeerMatch::Kind::Any, {"ethernet"})}, views));
}

TEST(Selection, SameAnswerOnEveryRankIsAPureFunction) {
  auto views = makeViews({"a", "b", "a", "b", "c"}, {"local", "ethernet"});
  EXPECT_EQ(selectTransports(views, {}, PB_MEM_HOST).size(), 10u);
  auto first = selectTransports(views, {}, PB_MEM_HOST);
  auto second = selectTransports(views, {}, PB_MEM_HOST);
  for (auto& [k, v] : first) EXPECT_EQ(second.at(k).transport, v.transport);
}

TEST(Selection, EachMemoryKindGetsATransportThatMovesIt) {
  auto views = makeViews({"a", "a"}, {"local", "ethernet"});
  for (auto& v : views) {
    v.memTypes["local"] = PB_MEM_CUDA;  // like cudaipc: GPU memory only
    v.memTypes["ethernet"] = PB_MEM_HOST;
  }
  auto host = selectTransports(views, {}, PB_MEM_HOST);
  auto gpu = selectTransports(views, {}, PB_MEM_CUDA);
  EXPECT_EQ(host.at({0, 1}).transport, "ethernet");
  EXPECT_NE(host.at({0, 1}).why.find("local: does not move host memory"), std::string::npos) << host.at({0, 1}).why;
  EXPECT_EQ(gpu.at({0, 1}).transport, "local");
  views[0].memTypes["local"] = PB_MEM_HOST;
  try {
    selectTransports(views, {}, PB_MEM_CUDA);
    FAIL() << "expected no CUDA transport";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no transport can move CUDA memory"), std::string::npos) << e.what();
  }
}

TEST(Selection, CudaMemoryFallsBackToStagingOnlyWhenNoNativeTransportWorks) {
  auto views = makeViews({"a", "a", "b"}, {"local", "ethernet"});
  for (auto& v : views) {
    v.memTypes["local"] = PB_MEM_CUDA;  // like cudaipc: same host, GPU memory only
    v.memTypes["ethernet"] = advertisedMemTypes(PB_MEM_HOST, true);
  }
  auto gpu = selectTransports(views, {}, PB_MEM_CUDA);
  EXPECT_EQ(gpu.at({0, 1}).transport, "local");
  EXPECT_FALSE(gpu.at({0, 1}).staged);
  EXPECT_EQ(gpu.at({0, 2}).transport, "ethernet");  // another host: cudaipc cannot reach it
  EXPECT_TRUE(gpu.at({0, 2}).staged);
  EXPECT_NE(gpu.at({0, 2}).why.find("staged through pinned host buffers"), std::string::npos) << gpu.at({0, 2}).why;
}

TEST(Selection, RuleOrderPrefersANativeCudaTransportOverStaging) {
  auto views = makeViews({"a", "a"}, {"local", "ethernet"});
  for (auto& v : views) {
    v.memTypes["local"] = PB_MEM_CUDA;
    v.memTypes["ethernet"] = advertisedMemTypes(PB_MEM_HOST, true);
  }
  // The user lists ethernet first (for host memory); CUDA memory still takes the native transport.
  auto gpu = selectTransports(views, {rule(PeerMatch::Kind::Any, {"ethernet", "local"})}, PB_MEM_CUDA);
  EXPECT_EQ(gpu.at({0, 1}).transport, "local");
  EXPECT_FALSE(gpu.at({0, 1}).staged);
  // A rule naming only ethernet stages.
  gpu = selectTransports(views, {rule(PeerMatch::Kind::Any, {"ethernet"})}, PB_MEM_CUDA);
  EXPECT_EQ(gpu.at({0, 1}).transport, "ethernet");
  EXPECT_TRUE(gpu.at({0, 1}).staged);
}

TEST(Selection, StagingNeedsACoreBuiltWithCudaOnBothRanks) {
  EXPECT_EQ(advertisedMemTypes(PB_MEM_HOST, false), uint32_t(PB_MEM_HOST));
  EXPECT_EQ(advertisedMemTypes(PB_MEM_CUDA, true), uint32_t(PB_MEM_CUDA));  // native transports are not staged
  auto views = makeViews({"a", "b"}, {"ethernet"});
  views[0].memTypes["ethernet"] = advertisedMemTypes(PB_MEM_HOST, true);
  views[1].memTypes["ethernet"] = advertisedMemTypes(PB_MEM_HOST, false);
  try {
    selectTransports(views, {}, PB_MEM_CUDA);
    FAIL() << "rank 1 cannot stage: expected no CUDA transport";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no transport can move CUDA memory"), std::string::npos) << e.what();
  }
}
