// Loader error paths against real shared libraries built to fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "env_guard.hpp"
#include "plugboard/error.hpp"
#include "plugins/plugin_loader.hpp"

using namespace plugboard;
using plugboard::test::EnvGuard;

namespace {

const std::string kMock = PLUGBOARD_TEST_MOCK_DIR;
const std::string kMinor = std::to_string(PB_TRANSPORT_ABI_MINOR);

std::string loadError(const std::string& name, const std::vector<std::string>& dirs) {
  Config c = Config::fromYamlText("", "x.yaml");
  try {
    loadTransport(name, dirs, c, LocalIdentity{0, 1, "h"});
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Plugin) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "loading " << name << " succeeded";
  return "";
}

void expectHas(const std::string& text, const std::string& needle) {
  EXPECT_NE(text.find(needle), std::string::npos) << "missing '" << needle << "' in:\n" << text;
}

}  // namespace

TEST(Loader, MissingPluginListsEveryPathTried) {
  std::string m = loadError("nosuch", {"/tmp/pb-a", "/tmp/pb-b"});
  expectHas(m, "transport 'nosuch' could not be loaded");
  expectHas(m, "/tmp/pb-a/libplugboard-nosuch.so: not found");
  expectHas(m, "/tmp/pb-b/libplugboard-nosuch.so: not found");
  expectHas(m, "via the dynamic linker");
}

TEST(Loader, MisspelledNameGetsSuggestion) {
  std::string m = loadError("etherent", {PLUGBOARD_TEST_PLUGIN_DIR});
  expectHas(m, "did you mean 'ethernet'");
}

TEST(Loader, NoEntrySymbol) {
  std::string m = loadError("mock", {kMock + "/no_symbol"});
  expectHas(m, "no entry symbol 'plugboard_transport_v1'");
  expectHas(m, kMock + "/no_symbol/libplugboard-mock.so");
}

TEST(Loader, WrongAbiNamesBothVersions) {
  std::string m = loadError("mock", {kMock + "/wrong_abi"});
  expectHas(m, "plugin ABI 99." + kMinor);
  expectHas(m, "core ABI 1." + kMinor);
}

TEST(Loader, InitFailureCarriesPluginReason) {
  std::string m = loadError("mock", {kMock + "/init_fails"});
  expectHas(m, "init failed");
  expectHas(m, "init refused on purpose (no device found)");
}

TEST(Loader, ExistingBrokenFileIsNotMaskedByALaterGoodOne) {
  std::string m = loadError("mock", {kMock + "/wrong_abi", kMock + "/good"});
  expectHas(m, "plugin ABI 99." + kMinor);
}

TEST(Loader, GoodMockLoadsAndReportsProperties) {
  Config c = Config::fromYamlText("", "x.yaml");
  auto p = loadTransport("mock", {kMock + "/good"}, c, LocalIdentity{0, 1, "h"});
  EXPECT_EQ(p->name(), "mock");
  EXPECT_EQ(p->abiVersion(), "1." + kMinor);
  EXPECT_EQ(p->properties().mem_types, static_cast<uint32_t>(PB_MEM_HOST));
}

TEST(Loader, APluginDescribesWhatItFoundAndALyingLengthIsRefused) {
  Config c = Config::fromYamlText("", "x.yaml");
  auto good = loadTransport("mock", {kMock + "/good"}, c, LocalIdentity{0, 1, "h"});
  EXPECT_EQ(good->describe(), "mock: found nothing\nconnects to nobody");
  Config c2 = Config::fromYamlText("", "x.yaml");
  auto liar = loadTransport("mock", {kMock + "/describe_lies"}, c2, LocalIdentity{0, 1, "h"});
  try {
    liar->describe();
    FAIL() << "a 1 TiB describe was allocated";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Plugin);
    EXPECT_NE(std::string(e.what()).find("describe asked for 1099511627776 bytes"), std::string::npos) << e.what();
  }
}

TEST(Loader, ExplicitTransportsMustAllLoad) {
  EnvGuard env;
  env.set("PLUGBOARD_PLUGIN_PATH", kMock + "/good");
  env.set("PLUGBOARD_TRANSPORTS", "mock,nosuch");
  Config c = Config::fromYamlText("", "x.yaml");
  EXPECT_THROW(loadTransports(c, LocalIdentity{0, 1, "h"}), Error);
}

TEST(Loader, AutoSkipsBrokenButNeedsOne) {
  EnvGuard env;
  env.set("PLUGBOARD_PLUGIN_PATH", kMock + "/init_fails");
  env.set("PLUGBOARD_TRANSPORTS", "auto");
  Config c = Config::fromYamlText("", "x.yaml");
  // The default <libdir>/plugboard holds ethernet, so auto finds it and skips the broken mock.
  auto plugins = loadTransports(c, LocalIdentity{0, 1, "h"});
  for (const auto& p : plugins) EXPECT_NE(p->name(), "mock");
}

TEST(Loader, SearchOrderYamlThenEnvThenDefault) {
  EnvGuard env;
  env.set("PLUGBOARD_PLUGIN_PATH", "/env/one:/env/two");
  Config c = Config::fromYamlText("plugin_path: [/yaml/dir]\n", "x.yaml");
  auto dirs = pluginSearchDirs(c);
  ASSERT_GE(dirs.size(), 4u);
  EXPECT_EQ(dirs[0], "/yaml/dir");
  EXPECT_EQ(dirs[1], "/env/one");
  EXPECT_EQ(dirs[2], "/env/two");
  EXPECT_EQ(dirs[3], defaultPluginDir());
}

// A plugin found outside Plugboard's own directory is loaded in a probe
// child first: one whose init crashes, exits or hangs is named in the error
// (a named transport) or skipped with a warning ('auto'), and this process
// lives on.
namespace {

/// loadError with a 1 s probe bound (the hanging mock is killed after it).
std::string probedLoadError(const std::string& dir) {
  EnvGuard env;
  env.set("PLUGBOARD_PLUGIN_PROBE_TIMEOUT", "1");
  return loadError("mock", {dir});
}

}  // namespace

TEST(Loader, ProbeNamesAPluginWhoseInitCrashes) {
  std::string m = probedLoadError(kMock + "/init_crashes");
  expectHas(m, kMock + "/init_crashes/libplugboard-mock.so: the plugin crashed with signal 11");
  expectHas(m, "while loading or initialising (in a probe process)");
}

TEST(Loader, ProbeNamesAPluginWhoseInitExits) {
  expectHas(probedLoadError(kMock + "/init_exits"), "the plugin ended its process with exit(3)");
}

TEST(Loader, ProbeNamesAPluginWhoseInitHangs) {
  const auto start = std::chrono::steady_clock::now();
  expectHas(probedLoadError(kMock + "/init_hangs"), "did not finish loading and initialising within 1 s");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(Loader, ProbeLeavesARefusalToTheInProcessLoad) {
  // The probe sees init fail with a reason and lets the real load report it.
  expectHas(probedLoadError(kMock + "/init_fails"), "mock: init refused on purpose (no device found)");
}

TEST(Loader, AutoSkipsPluginsThatCrashExitOrHangAndKeepsTheRest) {
  EnvGuard env;
  env.set("PLUGBOARD_PLUGIN_PATH", kMock + "/init_crashes:" + kMock + "/init_exits:" + kMock + "/init_hangs");
  env.set("PLUGBOARD_TRANSPORTS", "auto");
  env.set("PLUGBOARD_PLUGIN_PROBE_TIMEOUT", "1");
  Config c = Config::fromYamlText("", "x.yaml");
  // "mock" is found three times; the first file is the answer (it crashes),
  // and the shipped plugins of <libdir>/plugboard still load.
  auto plugins = loadTransports(c, LocalIdentity{0, 1, "h"});
  ASSERT_FALSE(plugins.empty());
  for (const auto& p : plugins) EXPECT_NE(p->name(), "mock");
}

TEST(Loader, ProbeTimeoutZeroLoadsWithoutAProbe) {
  EnvGuard env;
  env.set("PLUGBOARD_PLUGIN_PROBE_TIMEOUT", "0");
  Config c = Config::fromYamlText("", "x.yaml");
  auto p = loadTransport("mock", {kMock + "/good"}, c, LocalIdentity{0, 1, "h"});
  EXPECT_EQ(p->name(), "mock");
}

// Under 'auto' the core tells a plugin that no rule names that it is loaded
// only for auto (host services' loaded_by_auto), and such a plugin may
// decline; named by the list or a rule, or with failover on (which may move
// a pair to any loaded transport), it is not told so.
namespace {

/// True when loading with these transports, YAML and failover setting keeps
/// the mock that declines whenever the core says it loads it only for auto.
bool keepsTheDecliningMock(const std::string& transports, const std::string& yaml, const char* failover) {
  EnvGuard env;
  env.set("PLUGBOARD_PLUGIN_PATH", kMock + "/auto_declines");
  env.set("PLUGBOARD_PLUGIN_PROBE_TIMEOUT", "0");
  env.set("PLUGBOARD_TRANSPORTS", transports);
  env.set("PLUGBOARD_FAILOVER", failover);
  Config c = Config::fromYamlText(yaml, "x.yaml");
  auto plugins = loadTransports(c, LocalIdentity{0, 1, "h"});
  return std::any_of(plugins.begin(), plugins.end(), [](const auto& p) { return p->name() == "mock"; });
}

}  // namespace

TEST(Loader, AutoTellsPluginsNoRuleNamesThatTheyMayDecline) {
  EXPECT_FALSE(keepsTheDecliningMock("auto", "", "false"));
  EXPECT_TRUE(keepsTheDecliningMock("auto", "rules:\n  - peers: any\n    use: [mock, ethernet]\n", "false"));
  EXPECT_TRUE(keepsTheDecliningMock("auto", "", "true"));
  EXPECT_TRUE(keepsTheDecliningMock("mock,ethernet", "", "false"));
}

TEST(Loader, AutoPassesOnADeclinesOwnReason) {
  EnvGuard env;
  env.set("PLUGBOARD_PLUGIN_PATH", kMock + "/auto_declines");
  env.set("PLUGBOARD_PLUGIN_PROBE_TIMEOUT", "0");
  env.set("PLUGBOARD_TRANSPORTS", "auto");
  Config c = Config::fromYamlText("", "x.yaml");
  std::vector<SkippedTransport> skipped;
  loadTransports(c, LocalIdentity{0, 1, "h"}, &skipped);
  auto mock = std::find_if(skipped.begin(), skipped.end(), [](const auto& s) { return s.name == "mock"; });
  ASSERT_NE(mock, skipped.end());
  EXPECT_EQ(mock->why, "declined under transports: auto: mock: declined, loaded only for transports: auto");
}
