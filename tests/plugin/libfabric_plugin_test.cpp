// Tests of libplugboard-libfabric.so through its C ABI only, as the core
// uses it: dlopen, a fake host-services table, two plugin contexts (ranks 0
// and 1 of one host) in this process, a real libfabric provider on
// loopback: tcp;ofi_rxm unless PB_TEST_LIBFABRIC_PROVIDER names
// another. Tests that need a provider skip, with fi_getinfo's reason, where
// none is usable.
#include "plugin_test_support.hpp"
#include "transport_pair_suite.hpp"
#include <dirent.h>
#include <dlfcn.h>
#include <plugboard/transport.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifndef PLUGBOARD_LIBFABRIC_PLUGIN
#error "PLUGBOARD_LIBFABRIC_PLUGIN must name libplugboard-libfabric.so"
#endif

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTimeout = std::chrono::seconds(20);

/// The provider the tests force, on the loopback domain.
std::string testProvider() {
  const char* p = std::getenv("PB_TEST_LIBFABRIC_PROVIDER");
  return p && *p ? p : "tcp;ofi_rxm";
}

/// Settings every test context starts from.
std::map<std::string, std::string> baseSettings() { return {{"provider", testProvider()}, {"iface", "lo"}}; }

/// The plugin's table, loaded once the way the core loads it.
const pb_transport_v1* plugin() {
  static const pb_transport_v1* table = plugboard::test::loadPluginTable(PLUGBOARD_LIBFABRIC_PLUGIN);
  return table;
}

using plugboard::test::FakeHost;
using plugboard::test::fillPattern;
using plugboard::test::Peer;

/// Why the test provider cannot be used here ("" when it can), found once
/// by opening and closing a context.
const std::string& unusableReason() {
  static const std::string reason = plugboard::test::initFailure(
      plugin(), "testhost", baseSettings(), "libfabric provider " + testProvider() + " is not usable here: ");
  return reason;
}

/// libfabric as the shared suites see it (transport_pair_suite.hpp): with
/// manual progress a peer's operations land only while the target polls,
/// so waits poll the peer. Write sizes are checked per signal mode below,
/// so it takes no part in TransportWriteSizeTest.
const plugboard::test::TransportUnderTest* libfabricTransport() {
  static const plugboard::test::TransportUnderTest t = [] {
    plugboard::test::TransportUnderTest d;
    d.label = d.name = "libfabric";
    d.pluginPath = PLUGBOARD_LIBFABRIC_PLUGIN;
    d.table = &plugin;
    d.settings = baseSettings();
    d.firstSettingKey = "provider";
    d.whyUnusable = [] { return unusableReason(); };
    d.progressWhileWaiting = &plugboard::test::pollTheOtherConnections;
    return d;
  }();
  return &t;
}

using plugboard::test::TransportDeclareTest;
using plugboard::test::TransportLoadTest;
using plugboard::test::TransportPairTest;
PLUGBOARD_INSTANTIATE_TRANSPORT_SUITE(TransportLoadTest, libfabricTransport());
PLUGBOARD_INSTANTIATE_TRANSPORT_SUITE(TransportDeclareTest, libfabricTransport());
PLUGBOARD_INSTANTIATE_TRANSPORT_SUITE(TransportPairTest, libfabricTransport());

/// The shared fixture (contexts, connections, regions and keys freed in ABI
/// order) on libfabric; contexts take the base settings plus extras.
class LibfabricTest : public plugboard::test::TransportFixture {
 protected:
  const plugboard::test::TransportUnderTest& transport() const override { return *libfabricTransport(); }

  /// Skips the test where the provider cannot be used.
  void requireProvider() {
    if (!unusableReason().empty()) GTEST_SKIP() << unusableReason();
  }

  /// A context of rank with the base settings, overridden by extra.
  pb_plugin_ctx* makeContext(int rank, std::map<std::string, std::string> extra = {},
                             std::string hostname = "testhost") {
    auto settings = baseSettings();
    for (auto& [k, v] : extra) settings[k] = v;
    return makeContextWith(rank, std::move(settings), std::move(hostname));
  }

  /// init with these settings (no base), expected to fail; returns the status.
  pb_status failInit(std::map<std::string, std::string> settings) {
    hosts_.push_back(std::make_unique<FakeHost>(0, "testhost", std::move(settings)));
    pb_plugin_ctx* ctx = nullptr;
    pb_status st = t_->init(&hosts_.back()->services, &ctx);
    if (ctx) ctxs_.push_back(ctx);
    EXPECT_EQ(ctx, nullptr);
    return st;
  }
};

/// Two connected ranks of one host: c0_ is rank 0's connection to rank 1.
/// Providers with manual progress apply a peer's operations only while the
/// target polls, so every wait below progresses both sides, as the core's
/// proxy thread does for every connection.
class LibfabricPairTest : public LibfabricTest {
 protected:
  void SetUp() override {
    LibfabricTest::SetUp();
    if (HasFatalFailure()) return;
    requireProvider();
    if (IsSkipped()) return;
    ctx0_ = makeContext(0, pairSettings());
    ctx1_ = makeContext(1, pairSettings());
    ASSERT_TRUE(ctx0_ && ctx1_);
    connectPair(ctx0_, ctx1_, &c0_, &c1_);
  }

  /// Extra settings for both contexts.
  virtual std::map<std::string, std::string> pairSettings() { return {}; }

  /// One progress call on the peer's connection (lets it receive).
  void pumpPeer(pb_conn* peer) {
    uint64_t ignored = 0;
    ASSERT_EQ(t_->proxy_progress(peer, &ignored), PB_OK) << error(peer == c0_ ? ctx0_ : ctx1_);
  }

  /// Posts a write_signal of size bytes from rank 0 into a region rank 1
  /// has deregistered; returns rank 1's error, which names the write's
  /// first piece (a message's payload, or the whole write by RMA). The
  /// signal must not land.
  std::string refusedWriteSignal(size_t size) {
    std::vector<uint8_t> src(size, 7), gone(size, 0);
    std::vector<uint64_t> counter(1, 0);
    pb_mr* mrSrc = reg(ctx0_, src.data(), size);
    pb_rkey* rkCounter = remoteKey(ctx1_, reg(ctx1_, counter.data(), sizeof(uint64_t)), c0_);
    pb_mr* mrGone = reg(ctx1_, gone.data(), size);
    pb_rkey* rkGone = remoteKey(ctx1_, mrGone, c0_);
    deregister(ctx1_, mrGone);
    EXPECT_EQ(t_->write_signal(c0_, mrSrc, 0, rkGone, 0, size, rkCounter, 0, 1), PB_OK) << error(ctx0_);
    EXPECT_EQ(progressUntilFailure(c1_, c0_, ctx0_), PB_ERR_REMOTE);
    EXPECT_EQ(counter[0], 0u) << "the signal of a refused write was applied";
    return error(ctx1_);
  }

  /// Polls conn until seq completed (progressing the peer too); fails on
  /// error or timeout.
  void waitCompleted(pb_conn* conn, uint64_t seq) {
    pb_plugin_ctx* ctx = conn == c0_ ? ctx0_ : ctx1_;
    pb_conn* peer = conn == c0_ ? c1_ : c0_;
    uint64_t done = 0;
    auto deadline = Clock::now() + kTimeout;
    while (Clock::now() < deadline) {
      ASSERT_EQ(t_->proxy_progress(conn, &done), PB_OK) << error(ctx);
      ASSERT_LE(done, seq) << "completed runs ahead of what was posted";
      if (done == seq) return;
      ASSERT_NO_FATAL_FAILURE(pumpPeer(peer));
    }
    FAIL() << "completion stuck at " << done << ", waiting for " << seq;
  }

  /// Waits until the counter (written by signals on `from`) reaches value,
  /// progressing both ends.
  void waitCounter(const uint64_t* counter, uint64_t value, pb_conn* from = nullptr) {
    if (!from) from = c0_;
    pb_conn* to = from == c0_ ? c1_ : c0_;
    auto deadline = Clock::now() + kTimeout;
    while (__atomic_load_n(counter, __ATOMIC_ACQUIRE) < value) {
      ASSERT_LT(Clock::now(), deadline) << "counter stuck at " << __atomic_load_n(counter, __ATOMIC_ACQUIRE);
      ASSERT_NO_FATAL_FAILURE(pumpPeer(to));
      ASSERT_NO_FATAL_FAILURE(pumpPeer(from));
    }
  }

  /// A buffer of n bytes set to fill that lives until the fixture is
  /// destroyed, after TearDown freed connections and contexts: a test that
  /// leaves writes in flight must not free their target, which lanes keep
  /// landing without anyone polling.
  uint8_t* keptBuffer(size_t n, uint8_t fill) {
    kept_.emplace_back(n, fill);
    return kept_.back().data();
  }

  pb_plugin_ctx* ctx0_ = nullptr;
  pb_plugin_ctx* ctx1_ = nullptr;
  pb_conn* c0_ = nullptr;
  pb_conn* c1_ = nullptr;
  std::deque<std::vector<uint8_t>> kept_;  // declared last: destroyed first, after TearDown
};

// ---- loading, settings, provider choice --------------------------------------

// Under `transports: auto` (host services' loaded_by_auto) on a host without
// a fabric device, with no provider asked for, init declines before loading
// libfabric; asked for a provider it starts as when named. Each case runs in
// a fresh process (threadsafe death-test style), so "libfabric is not
// loaded" is this process's own state.
namespace {

/// The first entry of a fabric device the plugin looks for, or "".
std::string fabricDeviceHere() {
  for (const char* dir : {"/sys/class/infiniband", "/sys/class/cxi"}) {
    if (DIR* d = opendir(dir)) {
      std::string found;
      while (dirent* e = readdir(d))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) found = dir;
      closedir(d);
      if (!found.empty()) return found;
    }
  }
  if (DIR* d = opendir("/dev")) {
    std::string found;
    while (dirent* e = readdir(d))
      if (std::strncmp(e->d_name, "hfi1_", 5) == 0) found = std::string("/dev/") + e->d_name;
    closedir(d);
    return found;
  }
  return "";
}

/// The soname the plugin loads libfabric by when a context needs it; ""
/// where the build links libfabric (it is then loaded with the plugin).
constexpr const char* kLazySoname = PB_TEST_LIBFABRIC_LAZY_SONAME;

/// Child body: init under auto with settings; exits 0 when the outcome is
/// the one expected (declined, and libfabric never loaded where the plugin
/// loads it itself; or not declined).
[[noreturn]] void initUnderAuto(std::map<std::string, std::string> settings, bool expectDecline) {
  unsetenv("FI_PROVIDER");
  FakeHost h(0, "testhost", std::move(settings));
  h.services.loaded_by_auto = 1;
  pb_plugin_ctx* ctx = nullptr;
  const pb_status st = plugin()->init(&h.services, &ctx);
  const std::string why = st == PB_OK ? "" : plugin()->last_error(nullptr);
  const bool declined = why.find("no fabric device on this host") != std::string::npos;
  const bool lazy = *kLazySoname != '\0';
  const bool loaded = lazy && dlopen(kLazySoname, RTLD_NOW | RTLD_NOLOAD) != nullptr;
  if (ctx) plugin()->finalize(ctx);
  if (expectDecline && st == PB_ERR_UNSUPPORTED && declined && !loaded) {
    std::fprintf(stderr, "declined %s: %s\n", lazy ? "without loading libfabric" : "(this build links libfabric)",
                 why.c_str());
    std::_Exit(0);
  }
  if (!expectDecline && !declined) {
    std::fprintf(stderr, "not declined (status %d: %s)\n", st, why.c_str());
    std::_Exit(0);
  }
  std::fprintf(stderr, "unexpected: status %d, libfabric %s, reason: %s\n", st, loaded ? "loaded" : "not loaded",
               why.c_str());
  std::_Exit(1);
}

}  // namespace

TEST(LibfabricUnderAuto, DeclinesWithoutAFabricDeviceAndNeverLoadsLibfabric) {
  if (const std::string d = fabricDeviceHere(); !d.empty())
    GTEST_SKIP() << "this host has a fabric device (" << d << "): the plugin starts under auto here";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string said = *kLazySoname ? "declined without loading libfabric: .*ethernet"
                                         : "declined \\(this build links libfabric\\): .*ethernet";
  EXPECT_EXIT(initUnderAuto({}, true), testing::ExitedWithCode(0), said);
}

TEST(LibfabricUnderAuto, AProviderAskedForStartsAsWhenNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(initUnderAuto(baseSettings(), false), testing::ExitedWithCode(0), "not declined");
}


TEST_F(LibfabricTest, BadSettingValuesFailInitNamingThem) {
  EXPECT_EQ(failInit({{"signal", "sometimes"}}), PB_ERR_INVALID);
  EXPECT_NE(std::string(t_->last_error(nullptr)).find("libfabric.signal = 'sometimes'"), std::string::npos)
      << t_->last_error(nullptr);
  EXPECT_EQ(failInit({{"fragment_bytes", "lots"}}), PB_ERR_INVALID);
  EXPECT_NE(std::string(t_->last_error(nullptr)).find("fragment_bytes = 'lots'"), std::string::npos)
      << t_->last_error(nullptr);
  EXPECT_EQ(failInit({{"provider", "tcp,,sockets"}}), PB_ERR_INVALID);
  EXPECT_NE(std::string(t_->last_error(nullptr)).find("empty provider name"), std::string::npos)
      << t_->last_error(nullptr);
}

TEST_F(LibfabricTest, NonexistentProviderFailsInitNamingItAndTheOffer) {
  EXPECT_EQ(failInit({{"provider", "nosuchprov"}}), PB_ERR_UNSUPPORTED);
  std::string why = t_->last_error(nullptr);
  EXPECT_NE(why.find("provider 'nosuchprov'"), std::string::npos) << why;
  if (unusableReason().empty()) {
    // fi_getinfo works here, so the reason lists what it offers.
    EXPECT_NE(why.find("fi_getinfo offers"), std::string::npos) << why;
    EXPECT_NE(why.find(testProvider()), std::string::npos) << why;
  }
}

TEST_F(LibfabricTest, ExcludingEveryProviderFailsInit) {
  requireProvider();
  if (IsSkipped()) return;
  // The iface matches no domain at all: nothing is left to choose.
  EXPECT_EQ(failInit({{"provider", testProvider()}, {"iface", "=nosuchiface0"}}), PB_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(t_->last_error(nullptr)).find("on iface '=nosuchiface0'"), std::string::npos)
      << t_->last_error(nullptr);
  EXPECT_EQ(failInit({{"provider", "^" + testProvider() + ",efa,verbs,tcp,sockets,net,shm,udp,psm2,psm3,opx,cxi"},
                      {"iface", "lo"}}),
            PB_ERR_UNSUPPORTED)
      << "something other than the excluded providers was chosen";
}

TEST_F(LibfabricTest, DeclaresItsSettingsAndLogsTheChoice) {
  requireProvider();
  if (IsSkipped()) return;
  ASSERT_NE(makeContext(0), nullptr);
  FakeHost& host = *hosts_.back();
  auto& declared = host.declared;
  ASSERT_EQ(declared.count("provider"), 1u);
  EXPECT_EQ(declared["provider"].type, PB_SETTING_STRING);
  EXPECT_EQ(declared["provider"].defaultValue, "");
  EXPECT_EQ(declared["provider"].rankLocal, 0) << "every rank must use the same provider";
  ASSERT_EQ(declared.count("iface"), 1u);
  EXPECT_EQ(declared["iface"].rankLocal, 1);
  ASSERT_EQ(declared.count("signal"), 1u);
  EXPECT_EQ(declared["signal"].defaultValue, "auto");
  ASSERT_EQ(declared.count("fragment_bytes"), 1u);
  EXPECT_EQ(declared["fragment_bytes"].type, PB_SETTING_INT);
  auto info = host.logsWith("libfabric provider " + testProvider());
  ASSERT_EQ(info.size(), 1u) << "one INFO line names the provider";
  EXPECT_EQ(info[0].substr(0, 5), "INFO ") << info[0];
  EXPECT_NE(info[0].find("domain lo"), std::string::npos) << info[0];
  EXPECT_NE(info[0].find("fabric "), std::string::npos) << info[0];
}

TEST_F(LibfabricTest, CoreNameAlsoMatchesLayeredProvider) {
  requireProvider();
  if (IsSkipped()) return;
  std::string full = testProvider();
  if (full.find(';') == std::string::npos) GTEST_SKIP() << full << " is not a layered provider";
  std::string core = full.substr(0, full.find(';'));
  ASSERT_NE(makeContext(0, {{"provider", "nosuchprov, " + core}}), nullptr);
  EXPECT_EQ(hosts_.back()->logsWith("libfabric provider " + core).size(), 1u);
}

TEST_F(LibfabricTest, PropertiesAndReachability) {
  requireProvider();
  if (IsSkipped()) return;
  pb_plugin_ctx* ctx = makeContext(0, {{"lanes", "3"}});
  ASSERT_NE(ctx, nullptr);
  pb_transport_properties_v1 props{};
  props.struct_size = sizeof(props);
  ASSERT_EQ(t_->properties(ctx, &props), PB_OK);
  EXPECT_TRUE(props.mem_types & PB_MEM_HOST);
  const uint32_t always = PB_CAP_ONE_SIDED_WRITE | PB_CAP_ATOMIC_SIGNAL | PB_CAP_NEEDS_PROXY;
  // tcp pins nothing, so host registration is cheap there (and only there).
  const bool tcp = testProvider().rfind("tcp", 0) == 0;
  EXPECT_EQ(props.flags, always | (tcp ? uint32_t(PB_CAP_CHEAP_REGISTRATION) : 0u)) << testProvider();
  EXPECT_GT(props.bandwidth_gbps, 0.0);
  EXPECT_GT(props.latency_us, 0.0);
  EXPECT_GT(props.max_address_size, 56u);
  EXPECT_EQ(props.max_rkey_size, 64u + 3 * 8) << "a 64-byte header and a key per lane";
  EXPECT_NE(t_->write_signal, nullptr);
  EXPECT_STREQ(t_->last_error(ctx), "");

  Peer same(0, 1, "testhost", "testhost");
  int cost = -7;
  char reason[256] = "junk";
  ASSERT_EQ(t_->can_connect(ctx, &same.info, &cost, reason, sizeof(reason)), PB_OK);
  EXPECT_GE(cost, 0);
  EXPECT_STREQ(reason, "");
  if (testProvider().rfind("tcp", 0) == 0) {
    EXPECT_EQ(cost, 120) << "tcp ranks behind the ethernet plugin (100)";
  }
  // The endpoint is on loopback: another host is out of reach, and says why.
  Peer far(0, 3, "testhost", "otherhost");
  ASSERT_EQ(t_->can_connect(ctx, &far.info, &cost, reason, sizeof(reason)), PB_OK);
  EXPECT_LT(cost, 0);
  EXPECT_NE(std::string(reason).find("rank 3 is on host otherhost"), std::string::npos) << reason;
  pb_conn* conn = nullptr;
  uint8_t blob[256];
  size_t len = sizeof(blob);
  EXPECT_EQ(t_->setup(ctx, &far.info, &conn, blob, &len), PB_ERR_UNSUPPORTED);
  EXPECT_EQ(conn, nullptr);
}

// ---- memory registration and keys -------------------------------------------

TEST_F(LibfabricTest, CudaMemoryIsUnsupportedWithoutHmem) {
  requireProvider();
  if (IsSkipped()) return;
  pb_plugin_ctx* ctx = makeContext(0);
  pb_transport_properties_v1 props{};
  props.struct_size = sizeof(props);
  ASSERT_EQ(t_->properties(ctx, &props), PB_OK);
  if (props.mem_types & PB_MEM_CUDA) GTEST_SKIP() << "this provider has FI_HMEM";
  char buf[64];
  pb_mr* mr = reinterpret_cast<pb_mr*>(buf);
  EXPECT_EQ(t_->register_memory(ctx, buf, sizeof(buf), PB_MEM_CUDA, &mr), PB_ERR_UNSUPPORTED);
  EXPECT_EQ(mr, nullptr);
  EXPECT_NE(error(ctx).find("provider " + testProvider() + " lacks FI_HMEM"), std::string::npos) << error(ctx);
}

TEST_F(LibfabricTest, SetupReportsTheAddressSizeItNeeds) {
  requireProvider();
  if (IsSkipped()) return;
  pb_plugin_ctx* ctx = makeContext(0);
  Peer peer(0, 1, "testhost", "testhost");
  pb_conn* conn = nullptr;
  uint8_t blob[256];
  size_t len = 8;
  EXPECT_EQ(t_->setup(ctx, &peer.info, &conn, blob, &len), PB_ERR_INVALID);
  EXPECT_EQ(conn, nullptr);
  pb_transport_properties_v1 props{};
  props.struct_size = sizeof(props);
  ASSERT_EQ(t_->properties(ctx, &props), PB_OK);
  EXPECT_EQ(len, props.max_address_size);
}

TEST_F(LibfabricPairTest, RkeyRoundTripAndBadKeys) {
  std::vector<uint8_t> mem(100);
  pb_mr* mr = reg(ctx1_, mem.data(), mem.size());
  uint8_t buf[128];
  size_t len = 4;
  EXPECT_EQ(t_->pack_rkey(ctx1_, mr, buf, &len), PB_ERR_INVALID) << "buffer too small";
  EXPECT_GE(len, 64u) << "a failed pack reports the size it needs";
  EXPECT_EQ((len - 64) % 8, 0u) << "a 64-byte header and a key per lane";
  len = sizeof(buf);
  ASSERT_EQ(t_->pack_rkey(ctx1_, mr, buf, &len), PB_OK);
  pb_rkey* rkey = nullptr;
  EXPECT_EQ(t_->import_rkey(c0_, buf, len - 1, &rkey), PB_ERR_INVALID);
  EXPECT_NE(error(ctx0_).find("import_rkey"), std::string::npos) << error(ctx0_);
  EXPECT_EQ(t_->import_rkey(c0_, nullptr, len, &rkey), PB_ERR_INVALID);
  std::vector<uint8_t> junk(len, 0x5a);
  EXPECT_EQ(t_->import_rkey(c0_, junk.data(), junk.size(), &rkey), PB_ERR_INVALID);
  EXPECT_NE(error(ctx0_).find("bad magic"), std::string::npos) << error(ctx0_);
  buf[4] = 9;  // format version
  EXPECT_EQ(t_->import_rkey(c0_, buf, len, &rkey), PB_ERR_INVALID);
  EXPECT_NE(error(ctx0_).find("version 9"), std::string::npos) << error(ctx0_);
  EXPECT_EQ(rkey, nullptr);
}

TEST_F(LibfabricPairTest, ZeroByteRegionIsFine) {
  char byte = 0;
  pb_mr* mr = reg(ctx0_, &byte, 0);
  ASSERT_NE(mr, nullptr);
  pb_rkey* rk = remoteKey(ctx0_, mr, c1_);
  ASSERT_NE(rk, nullptr);
  std::vector<uint8_t> src(8);
  pb_mr* mrSrc = reg(ctx1_, src.data(), src.size());
  EXPECT_EQ(t_->write(c1_, mrSrc, 0, rk, 0, 1), PB_ERR_INVALID);
  ASSERT_EQ(t_->write(c1_, mrSrc, 0, rk, 0, 0), PB_OK) << error(ctx1_);
  waitCompleted(c1_, 1);
}

// ---- data path ------------------------------------------------------------------

/// The pair with a given signal mode ("atomic" skips where the provider
/// has no FI_SUM on FI_UINT64).
class LibfabricSignalModeTest : public LibfabricPairTest, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "atomic" && unusableReason().empty()) {
      FakeHost host(0, "testhost", {{"provider", testProvider()}, {"iface", "lo"}, {"signal", "atomic"}});
      pb_plugin_ctx* ctx = nullptr;
      if (plugin()->init(&host.services, &ctx) != PB_OK)
        GTEST_SKIP() << "no atomics: " << plugin()->last_error(nullptr);
      plugin()->finalize(ctx);
    }
    LibfabricPairTest::SetUp();
  }
  // Messages up to 256 KiB, so a write of several message payloads still
  // travels as messages.
  std::map<std::string, std::string> pairSettings() override {
    return {{"signal", GetParam()}, {"message_write_bytes", "262144"}};
  }
};

TEST_P(LibfabricSignalModeTest, ModeIsLogged) {
  std::string expect = GetParam() == "atomic" ? "signals by fi_atomic FI_SUM" : "signals by control message";
  EXPECT_EQ(hosts_[0]->logsWith(expect).size(), 1u);
  // Over rxm the log says how large a message goes eagerly, and why.
  if (testProvider().find("ofi_rxm") != std::string::npos) {
    EXPECT_EQ(hosts_[0]->logsWith("rxm settings FI_OFI_RXM_BUFFER_SIZE=").size(), 1u);
  }
}

TEST_P(LibfabricSignalModeTest, WritesOfOddSizesLandByteForByte) {
  for (size_t size : {size_t(0), size_t(1), size_t(4097)}) {
    SCOPED_TRACE("size " + std::to_string(size));
    constexpr size_t kSrcOff = 3, kDstOff = 5, kSlack = 16;
    std::vector<uint8_t> src(size + kSlack), dst(size + kSlack, 0xEE);
    fillPattern(src.data(), src.size(), unsigned(size));
    std::vector<uint64_t> counter(1, 0);
    pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
    pb_mr* mrDst = reg(ctx1_, dst.data(), dst.size());
    pb_mr* mrCounter = reg(ctx1_, counter.data(), sizeof(uint64_t));
    pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
    pb_rkey* rkCounter = remoteKey(ctx1_, mrCounter, c0_);
    uint64_t before = 0;
    ASSERT_EQ(t_->proxy_progress(c0_, &before), PB_OK);
    ASSERT_EQ(t_->write(c0_, mrSrc, kSrcOff, rkDst, kDstOff, size), PB_OK) << error(ctx0_);
    ASSERT_EQ(t_->signal(c0_, rkCounter, 0, 1), PB_OK) << error(ctx0_);
    ASSERT_EQ(t_->flush(c0_), PB_OK);
    waitCounter(counter.data(), 1);
    waitCompleted(c0_, before + 2);
    EXPECT_EQ(std::memcmp(dst.data() + kDstOff, src.data() + kSrcOff, size), 0);
    for (size_t i = 0; i < kDstOff; ++i) ASSERT_EQ(dst[i], 0xEE) << "byte " << i << " before the target changed";
    for (size_t i = kDstOff + size; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE) << "byte " << i << " past the target";
  }
}

TEST_P(LibfabricSignalModeTest, SignalBecomesVisibleOnlyAfterEarlierWrites) {
  // A receiver thread polls only its own connection (as the core's proxy
  // would) and checks, each time the counter moves, that every slot the
  // counter covers holds its round's data.
  constexpr size_t kSlot = 64 << 10;
  constexpr uint64_t kRounds = 200;
  std::vector<uint8_t> src(kSlot * kRounds), dst(kSlot * kRounds, 0);
  for (uint64_t r = 0; r < kRounds; ++r) fillPattern(&src[r * kSlot], kSlot, unsigned(r + 1));
  std::vector<uint64_t> counter(2, 0);
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  pb_mr* mrDst = reg(ctx1_, dst.data(), dst.size());
  pb_mr* mrCounter = reg(ctx1_, counter.data(), 2 * sizeof(uint64_t));
  pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
  pb_rkey* rkCounter = remoteKey(ctx1_, mrCounter, c0_);

  std::atomic<bool> stop{false};
  std::string receiverFailure;
  std::thread receiver;
  // A failed assertion below returns early: stop and join the receiver
  // first, so the test reports instead of terminating the binary.
  struct Joiner {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~Joiner() {
      stop = true;
      if (thread.joinable()) thread.join();
    }
  } joiner{stop, receiver};
  receiver = std::thread([&] {
    uint64_t checked = 0, ignored = 0;
    auto deadline = Clock::now() + kTimeout;
    while (checked < kRounds && !stop.load() && Clock::now() < deadline) {
      if (t_->proxy_progress(c1_, &ignored) != PB_OK) {
        receiverFailure = "receiver progress: " + error(ctx1_);
        return;
      }
      uint64_t seen = __atomic_load_n(&counter[1], __ATOMIC_ACQUIRE);
      for (; checked < seen; ++checked)
        if (std::memcmp(&dst[checked * kSlot], &src[checked * kSlot], kSlot) != 0) {
          receiverFailure = "counter reached " + std::to_string(seen) + " but slot " + std::to_string(checked) +
                            " is not all there: a signal overtook its write";
          return;
        }
    }
    if (checked < kRounds) receiverFailure = "receiver saw only " + std::to_string(checked) + " signals";
  });
  for (uint64_t r = 0; r < kRounds; ++r) {
    ASSERT_EQ(t_->write(c0_, mrSrc, r * kSlot, rkDst, r * kSlot, kSlot), PB_OK) << error(ctx0_);
    ASSERT_EQ(t_->signal(c0_, rkCounter, 8, 1), PB_OK) << error(ctx0_);
    uint64_t done = 0;
    ASSERT_EQ(t_->proxy_progress(c0_, &done), PB_OK) << error(ctx0_);
  }
  uint64_t done = 0;
  auto deadline = Clock::now() + kTimeout;
  while (done < 2 * kRounds && Clock::now() < deadline) ASSERT_EQ(t_->proxy_progress(c0_, &done), PB_OK);
  stop = done < 2 * kRounds;
  if (receiver.joinable()) receiver.join();
  EXPECT_EQ(done, 2 * kRounds);
  EXPECT_EQ(receiverFailure, "");
  EXPECT_EQ(__atomic_load_n(&counter[1], __ATOMIC_ACQUIRE), kRounds);
  EXPECT_EQ(counter[0], 0u) << "signal hit the wrong word";
  if (GetParam() == "message") {
    EXPECT_GE(hosts_[1]->landings.load(), int(kRounds)) << "signal_landed after each applied signal";
  }
}

TEST_P(LibfabricSignalModeTest, FusedWriteIntoDeregisteredRegionFailsAtTheTarget) {
  // A small write_signal travels as one WRITE_SIGNAL message (in either
  // signal mode); the target checks the write's region before storing a byte.
  std::vector<uint8_t> src(64, 0xab), dst(64, 0);
  std::vector<uint64_t> counter(1, 0);
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  pb_mr* mrDst = reg(ctx1_, dst.data(), dst.size());
  pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
  pb_rkey* rkCounter = remoteKey(ctx1_, reg(ctx1_, counter.data(), sizeof(uint64_t)), c0_);
  deregister(ctx1_, mrDst);
  ASSERT_EQ(t_->write_signal(c0_, mrSrc, 0, rkDst, 0, 64, rkCounter, 0, 1), PB_OK) << error(ctx0_);
  EXPECT_EQ(progressUntilFailure(c1_, c0_, ctx0_), PB_ERR_REMOTE);
  EXPECT_NE(error(ctx1_).find("bad message from rank 0 (host testhost): write of 64 bytes to region"),
            std::string::npos)
      << error(ctx1_);
  EXPECT_NE(error(ctx1_).find("not registered"), std::string::npos) << error(ctx1_);
  EXPECT_EQ(std::count(dst.begin(), dst.end(), 0), 64) << "bytes were stored into a deregistered region";
  EXPECT_EQ(counter[0], 0u) << "the signal of a refused write was applied";
}

TEST_P(LibfabricSignalModeTest, MidSizeWriteSignalTravelsAsMessagesAndAddsOnce) {
  // 150000 bytes: above one message's payload (32 KiB + 160), below
  // message_write_bytes: five WRITE_SIGNAL pieces, the first four adding 0.
  constexpr size_t kSize = 150000;
  constexpr size_t kPiece = 32928;
  std::vector<uint8_t> src(kSize), dst(kSize, 0);
  fillPattern(src.data(), kSize, 9);
  std::vector<uint64_t> counter(1, 0);
  pb_mr* mrSrc = reg(ctx0_, src.data(), kSize);
  pb_rkey* rkDst = remoteKey(ctx1_, reg(ctx1_, dst.data(), kSize), c0_);
  pb_rkey* rkCounter = remoteKey(ctx1_, reg(ctx1_, counter.data(), sizeof(uint64_t)), c0_);
  ASSERT_EQ(t_->write_signal(c0_, mrSrc, 0, rkDst, 0, kSize, rkCounter, 0, 5), PB_OK) << error(ctx0_);
  waitCompleted(c0_, 1);
  waitCounter(counter.data(), 5);
  EXPECT_EQ(dst, src);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  uint64_t done = 0;
  ASSERT_EQ(t_->proxy_progress(c1_, &done), PB_OK) << error(ctx1_);
  EXPECT_EQ(counter[0], 5u) << "the signal was applied more than once";

  // Into a deregistered region the first piece is refused at the target,
  // which names it: the write went as messages of a full payload each.
  std::vector<uint8_t> gone(kSize, 0);
  pb_mr* mrGone = reg(ctx1_, gone.data(), kSize);
  pb_rkey* rkGone = remoteKey(ctx1_, mrGone, c0_);
  deregister(ctx1_, mrGone);
  ASSERT_EQ(t_->write_signal(c0_, mrSrc, 0, rkGone, 0, kSize, rkCounter, 0, 1), PB_OK) << error(ctx0_);
  EXPECT_EQ(progressUntilFailure(c1_, c0_, ctx0_), PB_ERR_REMOTE);
  EXPECT_NE(error(ctx1_).find("write of " + std::to_string(kPiece) + " bytes to region"), std::string::npos)
      << error(ctx1_);
  EXPECT_EQ(counter[0], 5u) << "the signal of a refused write was applied";
}

TEST_P(LibfabricSignalModeTest, A32KiBWriteSignalIsOneMessage) {
  // A 32 KiB chunk with the host collectives' 64-byte header in front: one
  // message, not two (each further message of a write cost 25-45 us over
  // tcp;ofi_rxm). A refused write names its one piece.
  const std::string refused = refusedWriteSignal(32768 + 64);
  EXPECT_NE(refused.find("write of 32832 bytes to region"), std::string::npos) << refused;
}

TEST_P(LibfabricSignalModeTest, SignalIntoDeregisteredRegionFails) {
  std::vector<uint64_t> counter(1, 0);
  pb_mr* mrCounter = reg(ctx1_, counter.data(), sizeof(uint64_t));
  pb_rkey* rkCounter = remoteKey(ctx1_, mrCounter, c0_);
  deregister(ctx1_, mrCounter);
  ASSERT_EQ(t_->signal(c0_, rkCounter, 0, 1), PB_OK) << error(ctx0_);
  // Whichever side notices (the target applying a message, or the
  // initiator's atomic being refused) reports it naming the other.
  uint64_t done = 0;
  pb_status s0 = PB_OK, s1 = PB_OK;
  auto deadline = Clock::now() + kTimeout;
  while (s0 == PB_OK && s1 == PB_OK && Clock::now() < deadline) {
    s1 = t_->proxy_progress(c1_, &done);
    s0 = t_->proxy_progress(c0_, &done);
  }
  if (GetParam() == "message") {
    EXPECT_EQ(s1, PB_ERR_REMOTE);
    EXPECT_NE(error(ctx1_).find("bad message from rank 0 (host testhost)"), std::string::npos) << error(ctx1_);
    EXPECT_NE(error(ctx1_).find("not registered"), std::string::npos) << error(ctx1_);
    EXPECT_EQ(t_->proxy_progress(c1_, &done), PB_ERR_REMOTE) << "a connection error is final";
  } else {
    EXPECT_TRUE(s0 != PB_OK || s1 != PB_OK) << "nobody noticed the signal into a deregistered region";
    if (s0 != PB_OK) {
      EXPECT_NE(error(ctx0_).find("rank 0 -> rank 1 (host testhost)"), std::string::npos) << error(ctx0_);
    }
  }
  EXPECT_EQ(counter[0], 0u);
}

INSTANTIATE_TEST_SUITE_P(Modes, LibfabricSignalModeTest, ::testing::Values("atomic", "message"),
                         [](const auto& info) { return info.param; });

TEST_F(LibfabricPairTest, LargeWriteArrivesByteForByte) {
  constexpr size_t kSize = size_t(64) << 20;
  std::vector<uint8_t> src(kSize + 8), dst(kSize + 8, 0xEE);
  fillPattern(src.data(), src.size(), 4);
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  pb_mr* mrDst = reg(ctx1_, dst.data(), dst.size());
  pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
  ASSERT_EQ(t_->write(c0_, mrSrc, 1, rkDst, 3, kSize), PB_OK) << error(ctx0_);
  waitCompleted(c0_, 1);
  // Delivery complete: once the write completed, the bytes are there.
  EXPECT_EQ(std::memcmp(dst.data() + 3, src.data() + 1, kSize), 0);
  EXPECT_EQ(dst[2], 0xEE);
  EXPECT_EQ(dst[kSize + 3], 0xEE);
}

/// Writes split into many small fragments, more than the provider queues.
class LibfabricFragmentTest : public LibfabricPairTest {
 protected:
  std::map<std::string, std::string> pairSettings() override { return {{"fragment_bytes", "16384"}}; }
};

TEST_F(LibfabricFragmentTest, FragmentedWriteWithBacklogArrivesWhole) {
  constexpr size_t kSize = (size_t(64) << 20) + 123;  // 4097 fragments, the last one short
  std::vector<uint8_t> src(kSize), dst(kSize, 0);
  fillPattern(src.data(), kSize, 5);
  std::vector<uint64_t> counter(1, 0);
  pb_mr* mrSrc = reg(ctx0_, src.data(), kSize);
  pb_mr* mrDst = reg(ctx1_, dst.data(), kSize);
  pb_mr* mrCounter = reg(ctx1_, counter.data(), 8);
  pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
  pb_rkey* rkCounter = remoteKey(ctx1_, mrCounter, c0_);
  ASSERT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, kSize), PB_OK) << error(ctx0_);
  ASSERT_EQ(t_->signal(c0_, rkCounter, 0, 5), PB_OK) << error(ctx0_);
  waitCounter(counter.data(), 5);
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), kSize), 0) << "signal before the last fragment";
  waitCompleted(c0_, 2);
}

// The core registers one buffer twice at once (a caller's buffer to send
// from and to receive into); deregistering one registration must not drop
// the queued fragments of a write from the other, though they read the
// same bytes.
TEST_F(LibfabricFragmentTest, DeregisteringAnotherRegistrationOfTheSameBytesKeepsQueuedWrites) {
  constexpr size_t kSize = size_t(64) << 20;
  std::vector<uint8_t> src(kSize), dst(kSize, 0);
  fillPattern(src.data(), kSize, 6);
  pb_mr* mrSrc = reg(ctx0_, src.data(), kSize);
  pb_mr* mrTwin = reg(ctx0_, src.data(), kSize);
  pb_mr* mrDst = reg(ctx1_, dst.data(), kSize);
  pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
  ASSERT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, kSize), PB_OK) << error(ctx0_);
  deregister(ctx0_, mrTwin);
  waitCompleted(c0_, 1);
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), kSize), 0);
}

// Deregistering the very region a queued write reads drops the write and
// fails the connection, saying so (the ABI forbids it; the core does it
// only after giving up on the operation).
TEST_F(LibfabricFragmentTest, DeregisteringTheSourceOfAQueuedWriteFailsTheConnection) {
  constexpr size_t kSize = size_t(64) << 20;
  pb_mr* mrSrc = reg(ctx0_, keptBuffer(kSize, 1), kSize);
  pb_mr* mrDst = reg(ctx1_, keptBuffer(kSize, 0), kSize);
  pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
  ASSERT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, kSize), PB_OK) << error(ctx0_);
  deregister(ctx0_, mrSrc);
  uint64_t done = 0;
  EXPECT_NE(t_->proxy_progress(c0_, &done), PB_OK) << "64 MiB in 16 KiB fragments left nothing queued?";
  EXPECT_NE(error(ctx0_).find("queued operation(s) still had to read it"), std::string::npos) << error(ctx0_);
}

// ---- lanes (README "Lanes") ----------------------------------------------------

/// Two lanes each, writes of 64 KiB and more cut across them.
class LibfabricLaneTest : public LibfabricPairTest {
 protected:
  std::map<std::string, std::string> pairSettings() override { return {{"lanes", "2"}, {"lane_bytes", "65536"}}; }
};

TEST_F(LibfabricLaneTest, LanesAreOpenedAndLogged) {
  EXPECT_FALSE(hosts_[0]->logsWith("2 lane(s) for writes of at least 65536 bytes").empty());
  EXPECT_FALSE(hosts_[0]->logsWith("connected over libfabric").empty());
  EXPECT_FALSE(hosts_[0]->logsWith("), 2 lane(s)").empty()) << "the connection uses both lanes";
  std::vector<uint8_t> mem(100);
  uint8_t buf[256];
  size_t len = sizeof(buf);
  ASSERT_EQ(t_->pack_rkey(ctx1_, reg(ctx1_, mem.data(), mem.size()), buf, &len), PB_OK) << error(ctx1_);
  EXPECT_EQ(len, 64u + 2 * 8) << "the key carries the region's key on each lane";
}

TEST_F(LibfabricLaneTest, WritesAcrossLanesLandWholeBeforeTheirSignal) {
  // Odd sizes and offsets: pieces of whole pages, the last lane shorter or
  // empty; each write's signal lands only after every piece did.
  const size_t sizes[] = {65536, 65536 + 4097, (size_t(8) << 20) + 123, 4096 * 2 + 1};
  for (size_t i = 0; i < std::size(sizes); ++i) {
    const size_t size = sizes[i];
    std::vector<uint8_t> src(size + 16), dst(size + 16, 0xEE);
    std::vector<uint64_t> counter(1, 0);
    fillPattern(src.data(), src.size(), static_cast<int>(size % 251));
    pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
    pb_rkey* rkDst = remoteKey(ctx1_, reg(ctx1_, dst.data(), dst.size()), c0_);
    pb_rkey* rkCounter = remoteKey(ctx1_, reg(ctx1_, counter.data(), sizeof(uint64_t)), c0_);
    ASSERT_EQ(t_->write_signal(c0_, mrSrc, 5, rkDst, 3, size, rkCounter, 0, 1), PB_OK) << error(ctx0_);
    ASSERT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, 1), PB_OK) << error(ctx0_);
    ASSERT_EQ(t_->signal(c0_, rkCounter, 0, 1), PB_OK) << error(ctx0_);
    waitCounter(counter.data(), 1);
    EXPECT_EQ(std::memcmp(dst.data() + 3, src.data() + 5, size), 0) << size << " bytes: signal before its data";
    EXPECT_EQ(dst[size + 3], 0xEE) << size << " bytes: written past the end";
    waitCounter(counter.data(), 2);
    EXPECT_EQ(dst[0], src[0]);
    waitCompleted(c0_, 3 * (i + 1));
  }
}

TEST_F(LibfabricLaneTest, BothEndsWritingAtOnceFirstTimeComplete) {
  // Each end's first write opens its lanes' connections while the peer's
  // first write opens theirs the other way (simultaneous connects).
  constexpr size_t kSize = size_t(4) << 20;
  std::vector<uint8_t> a(kSize), b(kSize), toA(kSize, 0), toB(kSize, 0);
  fillPattern(a.data(), kSize, 1);
  fillPattern(b.data(), kSize, 2);
  pb_mr* mrA = reg(ctx0_, a.data(), kSize);
  pb_mr* mrB = reg(ctx1_, b.data(), kSize);
  pb_rkey* rkToB = remoteKey(ctx1_, reg(ctx1_, toB.data(), kSize), c0_);
  pb_rkey* rkToA = remoteKey(ctx0_, reg(ctx0_, toA.data(), kSize), c1_);
  for (int round = 1; round <= 20; ++round) {
    ASSERT_EQ(t_->write(c0_, mrA, 0, rkToB, 0, kSize), PB_OK) << error(ctx0_);
    ASSERT_EQ(t_->write(c1_, mrB, 0, rkToA, 0, kSize), PB_OK) << error(ctx1_);
    uint64_t done0 = 0, done1 = 0;
    auto deadline = Clock::now() + kTimeout;
    while ((done0 < uint64_t(round) || done1 < uint64_t(round)) && Clock::now() < deadline) {
      ASSERT_EQ(t_->proxy_progress(c0_, &done0), PB_OK) << error(ctx0_);
      ASSERT_EQ(t_->proxy_progress(c1_, &done1), PB_OK) << error(ctx1_);
    }
    ASSERT_EQ(done0, uint64_t(round)) << "round " << round;
    ASSERT_EQ(done1, uint64_t(round)) << "round " << round;
  }
  EXPECT_EQ(toB, a);
  EXPECT_EQ(toA, b);
}

TEST_F(LibfabricLaneTest, APeerWithoutLanesGetsWholeWrites) {
  pb_plugin_ctx* plain = makeContext(1, {{"lanes", "0"}});
  ASSERT_NE(plain, nullptr);
  pb_conn *mine = nullptr, *theirs = nullptr;
  connectPair(ctx0_, plain, &mine, &theirs);
  EXPECT_FALSE(hosts_[0]->logsWith("), 0 lane(s)").empty()) << "lanes used: as many as both ends have";
  constexpr size_t kSize = size_t(1) << 20;
  std::vector<uint8_t> src(kSize), dst(kSize, 0);
  fillPattern(src.data(), kSize, 11);
  pb_mr* mrSrc = reg(ctx0_, src.data(), kSize);
  pb_rkey* rkDst = remoteKey(plain, reg(plain, dst.data(), kSize), mine);
  ASSERT_EQ(t_->write(mine, mrSrc, 0, rkDst, 0, kSize), PB_OK) << error(ctx0_);
  uint64_t done = 0, ignored = 0;
  auto deadline = Clock::now() + kTimeout;
  while (done < 1 && Clock::now() < deadline) {
    ASSERT_EQ(t_->proxy_progress(mine, &done), PB_OK) << error(ctx0_);
    ASSERT_EQ(t_->proxy_progress(theirs, &ignored), PB_OK);
  }
  ASSERT_EQ(done, 1u);
  EXPECT_EQ(src, dst);
}

TEST_F(LibfabricTest, BadLaneSettingsFailInitNamingThem) {
  for (auto [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"lanes", "9"}, {"lanes", "-1"}, {"lanes", "two"}, {"lane_bytes", "100"}}) {
    EXPECT_EQ(failInit({{key, value}}), PB_ERR_INVALID) << key << " = " << value;
    const std::string why = t_->last_error(nullptr);
    EXPECT_NE(why.find("libfabric." + key + " = '" + value + "'"), std::string::npos) << why;
  }
}

/// Lanes and 16 KiB fragments: a 64 MiB write leaves most of its fragments
/// queued on the lanes.
class LibfabricLaneFragmentTest : public LibfabricPairTest {
 protected:
  std::map<std::string, std::string> pairSettings() override {
    return {{"lanes", "2"}, {"lane_bytes", "65536"}, {"fragment_bytes", "4096"}};
  }
};

TEST_F(LibfabricLaneFragmentTest, DeregisteringTheSourceOfAWriteQueuedOnALaneFailsTheConnection) {
  // The lanes keep moving what the provider took after the test's end,
  // into memory that must stay (keptBuffer); registrations are closed only
  // once no write in flight reads them.
  constexpr size_t kSize = size_t(64) << 20;
  pb_mr* mrSrc = reg(ctx0_, keptBuffer(kSize, 1), kSize);
  pb_rkey* rkDst = remoteKey(ctx1_, reg(ctx1_, keptBuffer(kSize, 0), kSize), c0_);
  ASSERT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, kSize), PB_OK) << error(ctx0_);
  deregister(ctx0_, mrSrc);
  uint64_t done = 0;
  EXPECT_NE(t_->proxy_progress(c0_, &done), PB_OK) << "16384 fragments on two lanes all posted at once?";
  EXPECT_NE(error(ctx0_).find("queued operation(s) still had to read it (dropped from lane"), std::string::npos)
      << error(ctx0_);
}

TEST_F(LibfabricPairTest, A128KiBChunkWithItsHeaderTravelsAsMessagesByDefault) {
  // The host collectives put a 64-byte header before each chunk: with the
  // default message_write_bytes such a write still goes as WRITE_SIGNAL
  // messages (a refused one names its first 32928-byte piece), not by RMA
  // (the old default, 65536, sent 64 KiB chunks that way: 3x slower at 4 ranks).
  const std::string refused = refusedWriteSignal(131072 + 64);
  EXPECT_NE(refused.find("write of 32928 bytes to region"), std::string::npos) << refused;
}

TEST_F(LibfabricPairTest, WriteCompletesOnlyOnceDelivered) {
  // With manual data progress the target's plugin must poll before data
  // lands; a write that completed without that would have completed on
  // transmission, not delivery, and a signal could then overtake it.
  std::vector<uint8_t> src(4096, 7), dst(4096, 0);
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  pb_mr* mrDst = reg(ctx1_, dst.data(), dst.size());
  pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
  if (hosts_[0]->logsWith("manual data progress").empty()) GTEST_SKIP() << "the provider progresses by itself";
  ASSERT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, src.size()), PB_OK) << error(ctx0_);
  uint64_t done = 0;
  auto until = Clock::now() + std::chrono::milliseconds(300);
  while (Clock::now() < until) {
    ASSERT_EQ(t_->proxy_progress(c0_, &done), PB_OK) << error(ctx0_);
    ASSERT_EQ(done, 0u) << "the write completed while the target never polled";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  waitCompleted(c0_, 1);
  EXPECT_EQ(dst, src);
}

TEST_P(LibfabricSignalModeTest, SignalIsHeldUntilEarlierWritesAreDelivered) {
  // The mechanism behind the ordering rule (README.md): a signal goes to
  // the provider only once the initiator has seen its earlier writes
  // complete with delivery-complete semantics. With manual progress that
  // is visible: while only the target polls, the write lands but the
  // signal cannot, because the initiator has not polled the write's
  // delivery acknowledgement yet.
  if (hosts_[0]->logsWith("manual data progress").empty()) GTEST_SKIP() << "the provider progresses by itself";
  std::vector<uint8_t> src(4096), dst(4096, 0);
  fillPattern(src.data(), src.size(), 77);
  std::vector<uint64_t> counter(1, 0);
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  pb_mr* mrDst = reg(ctx1_, dst.data(), dst.size());
  pb_mr* mrCounter = reg(ctx1_, counter.data(), 8);
  pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
  pb_rkey* rkCounter = remoteKey(ctx1_, mrCounter, c0_);
  ASSERT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, src.size()), PB_OK) << error(ctx0_);
  ASSERT_EQ(t_->signal(c0_, rkCounter, 0, 1), PB_OK) << error(ctx0_);
  uint64_t done = 0;
  ASSERT_EQ(t_->proxy_progress(c0_, &done), PB_OK) << error(ctx0_);
  auto deadline = Clock::now() + kTimeout;
  while (dst != src && Clock::now() < deadline) pumpPeer(c1_);
  ASSERT_EQ(dst, src) << "the write did not land while the target polled";
  for (int i = 0; i < 200; ++i) {
    pumpPeer(c1_);
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  EXPECT_EQ(__atomic_load_n(counter.data(), __ATOMIC_ACQUIRE), 0u)
      << "the signal was handed to the provider before its write was known to be delivered";
  waitCounter(counter.data(), 1);
  waitCompleted(c0_, 2);
}

// The range checks every transport makes are in the shared suite
// (TransportPairTest.OutOfRangeOperationsAreRejected); these check what
// libfabric's reasons say and a null signal target.
TEST_F(LibfabricPairTest, OutOfRangeRejectionsNameThePeerAndTheRule) {
  std::vector<uint8_t> src(64), dst(64);
  std::vector<uint64_t> counter(2, 0);
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  pb_mr* mrDst = reg(ctx1_, dst.data(), dst.size());
  pb_mr* mrCounter = reg(ctx1_, counter.data(), 16);
  pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
  pb_rkey* rkCounter = remoteKey(ctx1_, mrCounter, c0_);
  EXPECT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 60, 8), PB_ERR_INVALID);
  EXPECT_NE(error(ctx0_).find("destination range"), std::string::npos) << error(ctx0_);
  EXPECT_NE(error(ctx0_).find("rank 1 (host testhost)"), std::string::npos) << error(ctx0_);
  EXPECT_EQ(t_->signal(c0_, rkCounter, 12, 1), PB_ERR_INVALID) << "unaligned";
  EXPECT_NE(error(ctx0_).find("not 8-byte aligned"), std::string::npos) << error(ctx0_);
  EXPECT_EQ(t_->signal(c0_, nullptr, 0, 1), PB_ERR_INVALID);
  // Rejected posts take no sequence number and leave the connection usable.
  ASSERT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, 64), PB_OK) << error(ctx0_);
  ASSERT_EQ(t_->signal(c0_, rkCounter, 8, 1), PB_OK) << error(ctx0_);
  waitCompleted(c0_, 2);
  waitCounter(&counter[1], 1);
}

// ---- set-up failures and close ---------------------------------------------------

TEST_F(LibfabricTest, BadPeerAddressIsInvalidNamingThePeer) {
  requireProvider();
  if (IsSkipped()) return;
  pb_plugin_ctx* ctx0 = makeContext(0);
  pb_plugin_ctx* ctx1 = makeContext(1);
  std::vector<uint8_t> blob0, blob1;
  pb_conn* c0 = setup(ctx0, 0, 1, &blob0);
  ASSERT_NE(setup(ctx1, 1, 0, &blob1), nullptr);
  ASSERT_NE(c0, nullptr);
  EXPECT_EQ(t_->proxy_connect(c0, blob1.data(), blob1.size() - 1), PB_ERR_INVALID);
  EXPECT_NE(error(ctx0).find("from rank 1 (host testhost)"), std::string::npos) << error(ctx0);
  EXPECT_EQ(t_->proxy_connect(c0, blob1.data(), 10), PB_ERR_INVALID);
  std::vector<uint8_t> wrong(blob1.size(), 0x5a);
  EXPECT_EQ(t_->proxy_connect(c0, wrong.data(), wrong.size()), PB_ERR_INVALID);
  EXPECT_NE(error(ctx0).find("bad magic"), std::string::npos) << error(ctx0);
  // Rank 0's own blob is a well-formed blob from the wrong rank.
  EXPECT_EQ(t_->proxy_connect(c0, blob0.data(), blob0.size()), PB_ERR_INVALID);
  EXPECT_NE(error(ctx0).find("was made by rank 0"), std::string::npos) << error(ctx0);
  // A peer on another provider (documented layout: provider at byte 24).
  std::vector<uint8_t> other = blob1;
  std::memset(&other[24], 0, 32);
  std::memcpy(&other[24], "otherprov", 9);
  EXPECT_EQ(t_->proxy_connect(c0, other.data(), other.size()), PB_ERR_INVALID);
  EXPECT_NE(error(ctx0).find("uses provider 'otherprov'"), std::string::npos) << error(ctx0);
}

TEST_F(LibfabricPairTest, WriteIntoDeregisteredRegionFailsNamingThePeer) {
  std::vector<uint8_t> src(32, 1), dst(32, 0);
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  pb_mr* mrDst = reg(ctx1_, dst.data(), dst.size());
  pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
  deregister(ctx1_, mrDst);
  ASSERT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, 32), PB_OK);
  uint64_t done = 0;
  pb_status st = PB_OK;
  auto deadline = Clock::now() + kTimeout;
  while (st == PB_OK && Clock::now() < deadline) {
    st = t_->proxy_progress(c0_, &done);
    pumpPeer(c1_);
  }
  EXPECT_EQ(st, PB_ERR_REMOTE) << error(ctx0_);
  EXPECT_NE(error(ctx0_).find("libfabric write rank 0 -> rank 1 (host testhost) failed"), std::string::npos)
      << error(ctx0_);
  EXPECT_EQ(done, 0u);
  EXPECT_EQ(t_->proxy_progress(c0_, &done), PB_ERR_REMOTE) << "a connection error is final";
  EXPECT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, 1), PB_ERR_REMOTE) << "and refuses new posts";
  EXPECT_EQ(dst, std::vector<uint8_t>(32, 0));
}

TEST_F(LibfabricPairTest, PostsBeforeConnectAreRefused) {
  std::vector<uint8_t> blob;
  pb_conn* fresh = setup(ctx0_, 0, 1, &blob);
  ASSERT_NE(fresh, nullptr);
  std::vector<uint8_t> src(8);
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  std::vector<uint8_t> dst(8);
  pb_mr* mrDst = reg(ctx1_, dst.data(), dst.size());
  pb_rkey* rk = remoteKey(ctx1_, mrDst, fresh);
  EXPECT_EQ(t_->write(fresh, mrSrc, 0, rk, 0, 8), PB_ERR_INVALID);
  EXPECT_NE(error(ctx0_).find("not connected"), std::string::npos) << error(ctx0_);
}

TEST_F(LibfabricPairTest, ReconnectAfterFreeWorks) {
  // Free both ends, connect again on the same contexts: ids are fresh, the
  // old connection's stragglers are ignored.
  freeConn(c0_);
  freeConn(c1_);
  connectPair(ctx0_, ctx1_, &c0_, &c1_);
  std::vector<uint8_t> src(4097), dst(4097, 0);
  fillPattern(src.data(), src.size(), 3);
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  pb_mr* mrDst = reg(ctx1_, dst.data(), dst.size());
  pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
  ASSERT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, src.size()), PB_OK) << error(ctx0_);
  waitCompleted(c0_, 1);
  EXPECT_EQ(dst, src);
}

}  // namespace
