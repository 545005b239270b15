#include <gtest/gtest.h>

#include "env_guard.hpp"
#include "plugboard/config.hpp"
#include "plugboard/error.hpp"

using plugboard::Config;
using plugboard::Error;
using plugboard::ErrorCode;
using plugboard::SettingSource;
using plugboard::test::EnvGuard;

namespace {

// Expects fn to throw a Config error whose message contains every needle.
template <typename Fn>
void expectConfigError(Fn fn, std::initializer_list<const char*> needles) {
  try {
    fn();
    FAIL() << "expected a configuration error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Config) << e.what();
    for (const char* n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << "missing '" << n << "' in: " << e.what();
  }
}

}  // namespace

TEST(Config, DefaultsWhenNothingIsSet) {
  EnvGuard env;
  env.unset("PLUGBOARD_TIMEOUT");
  env.unset("PLUGBOARD_TRANSPORTS");
  Config c = Config::fromYamlText("", "empty.yaml");
  EXPECT_EQ(c.getDouble("timeout"), 60.0);
  EXPECT_EQ(c.getString("transports"), "auto");
  EXPECT_EQ(c.get("timeout").source, SettingSource::Default);
}

TEST(Config, EnvironmentBeatsYamlBeatsDefault) {
  EnvGuard env;
  env.unset("PLUGBOARD_TRANSPORTS");
  env.set("PLUGBOARD_TIMEOUT", "7.5");
  Config c = Config::fromYamlText("timeout: 3\ntransports: [ethernet, ucx]\n", "t.yaml");
  EXPECT_EQ(c.getDouble("timeout"), 7.5);
  EXPECT_EQ(c.get("timeout").origin, "PLUGBOARD_TIMEOUT");
  EXPECT_EQ(c.getList("transports"), (std::vector<std::string>{"ethernet", "ucx"}));
  EXPECT_EQ(c.get("transports").source, SettingSource::Yaml);
  EXPECT_EQ(c.get("transports").origin, "t.yaml:2");
  c.set("timeout", "9");
  EXPECT_EQ(c.getDouble("timeout"), 9.0);
  EXPECT_EQ(c.get("timeout").source, SettingSource::Program);
}

TEST(Config, TransportsShortcutFromEnvironment) {
  EnvGuard env;
  env.set("PLUGBOARD_TRANSPORTS", "ethernet");
  Config c = Config::fromYamlText("transports: [ucx]\n", "t.yaml");
  EXPECT_EQ(c.getList("transports"), std::vector<std::string>{"ethernet"});
}

TEST(Config, UnknownKeyNamesFileLineAndSuggestion) {
  expectConfigError([] { Config::fromYamlText("timeout: 5\n\ntimout: 3\n", "job.yaml"); },
                    {"job.yaml:3", "unknown setting 'timout'", "did you mean 'timeout'"});
}

// Found by fuzzing (tests/fuzz/corpus/fuzz_config/regression-key-not-scalar.yaml):
// a key that is a list or map escaped as yaml-cpp's "bad conversion".
TEST(Config, KeysAndRankSetsThatAreNotPlainValuesNameFileLine) {
  expectConfigError([] { Config::fromYamlText("timeout: 5\n[a, b]: 3\n", "job.yaml"); },
                    {"job.yaml:2", "a setting's name must be a plain value"});
  expectConfigError([] { Config::fromYamlText("ethernet:\n  {x: 1}: 2\n", "job.yaml"); },
                    {"job.yaml:2", "a key of section 'ethernet' must be a plain value"});
  expectConfigError(
      [] { Config::fromYamlText("rules:\n  - peers: {from: [0, 1], to: 1}\n    use: [ethernet]\n", "job.yaml"); },
      {"job.yaml:2", "peers: 'from' must be a plain value"});
  expectConfigError([] { Config::fromYamlText("rules:\n  - [peers]: any\n    use: [ethernet]\n", "job.yaml"); },
                    {"job.yaml:2", "a key of a rule must be a plain value"});
}

TEST(Config, WrongTypeNamesFileLine) {
  EnvGuard env;
  env.unset("PLUGBOARD_TIMEOUT");
  expectConfigError([] { Config::fromYamlText("timeout: soon\n", "job.yaml"); },
                    {"job.yaml:1", "timeout", "must be a number", "soon"});
}

TEST(Config, WrongTypeFromEnvironmentNamesVariable) {
  EnvGuard env;
  env.set("PLUGBOARD_TIMEOUT", "abc");
  expectConfigError([] { Config::fromYamlText("", "x.yaml"); }, {"PLUGBOARD_TIMEOUT", "abc"});
}

TEST(Config, SyntaxErrorNamesLine) {
  expectConfigError([] { Config::fromYamlText("timeout: 5\nrules: [\n", "bad.yaml"); }, {"bad.yaml:", "YAML syntax error"});
}

TEST(Config, RulesParsedWithOrigins) {
  EnvGuard env;
  env.unset("PLUGBOARD_TRANSPORTS");
  Config c = Config::fromYamlText(
      "transports: [cudaipc, ethernet]\n"
      "rules:\n"
      "  - peers: same-host\n"
      "    use: [cudaipc, ethernet]\n"
      "  - peers: {from: \"0-3\", to: \"4-7,9\"}\n"
      "    use: ethernet\n"
      "  - peers: {hosts: [a, b]}\n"
      "    use: [ethernet]\n",
      "r.yaml");
  ASSERT_EQ(c.rules().size(), 3u);
  EXPECT_EQ(c.rules()[0].peers.kind, plugboard::PeerMatch::Kind::SameHost);
  EXPECT_EQ(c.rules()[0].origin, "r.yaml:3");
  EXPECT_TRUE(c.rules()[1].peers.to.contains(9));
  EXPECT_FALSE(c.rules()[1].peers.to.contains(8));
  EXPECT_EQ(c.rules()[1].use, std::vector<std::string>{"ethernet"});
  EXPECT_EQ(c.rules()[2].peers.hosts, (std::vector<std::string>{"a", "b"}));
}

TEST(Config, BadRankRangeNamesLine) {
  expectConfigError([] { Config::fromYamlText("rules:\n  - peers: {from: \"7-3\", to: 1}\n    use: [ethernet]\n", "r.yaml"); },
                    {"r.yaml:2", "7-3", "ends before it starts"});
  expectConfigError([] { Config::fromYamlText("rules:\n  - peers: {from: \"x\", to: 1}\n    use: [ethernet]\n", "r.yaml"); },
                    {"r.yaml:2", "not a rank number"});
}

TEST(Config, UnknownRuleKeyAndPeerKind) {
  expectConfigError([] { Config::fromYamlText("rules:\n  - peers: any\n    uses: [ethernet]\n", "r.yaml"); },
                    {"r.yaml:3", "unknown key 'uses'"});
  expectConfigError([] { Config::fromYamlText("rules:\n  - peers: samehost\n    use: [ethernet]\n", "r.yaml"); },
                    {"r.yaml:2", "samehost"});
}

TEST(Config, RuleNamingTransportOutsideListIsAnError) {
  EnvGuard env;
  env.unset("PLUGBOARD_TRANSPORTS");
  expectConfigError([] { Config::fromYamlText("transports: [ethernet]\nrules:\n  - peers: any\n    use: [etherent]\n", "r.yaml"); },
                    {"r.yaml:3", "etherent", "not in transports", "did you mean 'ethernet'"});
}

TEST(Config, PluginSectionsCheckedAfterPluginsDeclare) {
  EnvGuard env;
  env.unset("PLUGBOARD_ETHERNET_IFNAME");
  Config c = Config::fromYamlText("ethernet:\n  ifname: lo\n  ifnmae: eth0\nucx:\n  tls: tcp\n", "p.yaml");
  c.declare({"ethernet.ifname", plugboard::SettingType::String, "", "doc", true});
  EXPECT_EQ(c.getString("ethernet.ifname"), "lo");
  EXPECT_EQ(c.get("ethernet.ifname").origin, "p.yaml:2");
  expectConfigError([&] { c.checkPluginSectionsUsed({"ethernet", "ucx"}); }, {"p.yaml:3", "no setting 'ifnmae'", "did you mean 'ifname'"});
  expectConfigError([&] { c.checkPluginSectionsUsed({"ethernet"}); }, {"p.yaml:4", "'ucx', which is not loaded"});
}

TEST(Config, PluginSettingFromEnvironment) {
  EnvGuard env;
  env.set("PLUGBOARD_IB_VERBS_GID_INDEX", "3");
  Config c = Config::fromYamlText("", "x.yaml");
  c.declare({"ib-verbs.gid_index", plugboard::SettingType::Int, "0", "doc", false});
  EXPECT_EQ(c.getInt("ib-verbs.gid_index"), 3);
  EXPECT_THROW(c.declare({"ib-verbs.gid_index", plugboard::SettingType::Int, "0", "doc", false}), Error);
}

TEST(Config, SharedSettingsTextSkipsRankLocal) {
  EnvGuard env;
  env.unset("PLUGBOARD_DEBUG");
  Config a = Config::fromYamlText("debug: INFO\n", "a.yaml");
  Config b = Config::fromYamlText("debug: TRACE\n", "b.yaml");
  EXPECT_EQ(a.sharedSettingsText(), b.sharedSettingsText());
  Config c = Config::fromYamlText("timeout: 5\n", "c.yaml");
  EXPECT_NE(a.sharedSettingsText(), c.sharedSettingsText());
}

TEST(Config, UnknownEnvironmentVariableGetsSuggestion) {
  EnvGuard env;
  env.set("PLUGBOARD_TIMEOTU", "3");
  Config c = Config::fromYamlText("", "x.yaml");
  // Other PLUGBOARD_* variables of the environment may be listed too.
  std::string entry;
  for (const auto& u : c.unknownEnvironmentVariables())
    if (u.rfind("PLUGBOARD_TIMEOTU", 0) == 0) entry = u;
  ASSERT_FALSE(entry.empty()) << "PLUGBOARD_TIMEOTU was not reported";
  EXPECT_NE(entry.find("did you mean PLUGBOARD_TIMEOUT"), std::string::npos) << entry;
  for (const auto& u : c.unknownEnvironmentVariables())
    EXPECT_NE(u.rfind("PLUGBOARD_TIMEOUT ", 0), 0u) << "a known variable was reported: " << u;
}

TEST(Config, EnvNameMapping) {
  EXPECT_EQ(Config::envName("ethernet.ifname"), "PLUGBOARD_ETHERNET_IFNAME");
  EXPECT_EQ(Config::envName("ib-verbs.gid_index"), "PLUGBOARD_IB_VERBS_GID_INDEX");
  EXPECT_EQ(Config::envName("timeout"), "PLUGBOARD_TIMEOUT");
}

TEST(Config, MissingFileIsAClearError) {
  expectConfigError([] { Config::fromYamlFile("/nonexistent/plugboard.yaml"); }, {"/nonexistent/plugboard.yaml"});
}

TEST(Config, PlanRulesParsedWithSizesAndPathsFromTheYamlDirectory) {
  Config c = Config::fromYamlText(
      "plans:\n"
      "  - {collective: allreduce, file: ring4.json, max_bytes: 1M, ranks: 4}\n"
      "  - collective: allgather\n"
      "    file: /abs/ag.json\n"
      "    min_bytes: 64K\n"
      "    mem: gpu\n",
      "/etc/job/cfg.yaml");
  ASSERT_EQ(c.planRules().size(), 2u);
  const plugboard::PlanRule& a = c.planRules()[0];
  EXPECT_EQ(a.collective, "allreduce");
  EXPECT_EQ(a.file, "/etc/job/ring4.json");
  EXPECT_EQ(a.minBytes, 0u);
  EXPECT_EQ(a.maxBytes, 1u << 20);
  EXPECT_EQ(a.ranks, 4);
  EXPECT_EQ(a.origin, "/etc/job/cfg.yaml:2");
  const plugboard::PlanRule& b = c.planRules()[1];
  EXPECT_EQ(b.file, "/abs/ag.json");
  EXPECT_EQ(b.minBytes, 64u << 10);
  EXPECT_EQ(b.maxBytes, UINT64_MAX);
  EXPECT_EQ(a.mem, "any");
  EXPECT_EQ(b.mem, "gpu");
  // Every rank must agree on the rules.
  EXPECT_NE(c.sharedSettingsText().find("plans[1]=allgather 65536-"), std::string::npos);
}

TEST(Config, BadPlanRulesNameFileLineAndWhat) {
  auto load = [](const std::string& rule) { Config::fromYamlText("timeout: 5\nplans:\n  - " + rule + "\n", "p.yaml"); };
  expectConfigError([&] { load("{collective: allreduce}"); }, {"p.yaml:3", "needs both 'collective' and 'file'"});
  expectConfigError([&] { load("{collective: broadcast, file: x.json}"); }, {"p.yaml:3", "'broadcast' cannot be served"});
  expectConfigError([&] { load("{collective: allreduce, file: x.json, max_bytes: 12Q}"); },
                    {"p.yaml:3", "'max_bytes': '12Q' is not a size"});
  expectConfigError([&] { load("{collective: allreduce, file: x.json, min_bytes: -5}"); }, {"'min_bytes'", "not a size"});
  expectConfigError([&] { load("{collective: allreduce, file: x.json, min_bytes: 2M, max_bytes: 1M}"); },
                    {"p.yaml:3", "min_bytes is above max_bytes"});
  expectConfigError([&] { load("{collective: allreduce, file: x.json, size: 4}"); },
                    {"p.yaml:3", "unknown key 'size' in plan rule"});
  expectConfigError([&] { load("{collective: allreduce, file: x.json, ranks: two}"); }, {"ranks 'two' is not a rank count"});
  expectConfigError([&] { load("{collective: allreduce, file: x.json, mem: cuda}"); },
                    {"p.yaml:3", "mem 'cuda' is not host, gpu or any"});
  expectConfigError([] { Config::fromYamlText("plans: {collective: allreduce}\n", "p.yaml"); },
                    {"p.yaml:1", "'plans' must be a list"});
}
