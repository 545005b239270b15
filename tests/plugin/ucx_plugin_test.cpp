// Tests of libplugboard-ucx.so through its C ABI only, as the core uses it:
// dlopen, a fake host-services table, two plugin contexts (ranks 0 and 1 of
// one host, so two UCP workers) in this process, UCX_TLS=tcp on loopback.
// UCX's TCP transport moves data only while the target's worker progresses,
// so every wait loop here calls proxy_progress on both sides, as each
// rank's proxy thread would. A peer process that dies is tested in
// tests/multiproc/ucx_comm_test.cpp.
#include "plugin_test_support.hpp"
#include "transport_pair_suite.hpp"
#include "../../plugins/ucx/src/eager_rule.hpp"
#include "../../plugins/ucx/src/tls_list.hpp"
#include <dlfcn.h>
#include <plugboard/transport.h>

#include <gtest/gtest.h>

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#ifndef PLUGBOARD_UCX_PLUGIN
#error "PLUGBOARD_UCX_PLUGIN must name libplugboard-ucx.so"
#endif

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTimeout = std::chrono::seconds(30);

/// Every test runs UCX over TCP on loopback, whatever the machine has.
class TcpOnly : public ::testing::Environment {
 public:
  void SetUp() override { setenv("UCX_TLS", "tcp", 1); }
};
const auto* const kTcpOnly = ::testing::AddGlobalTestEnvironment(new TcpOnly);

/// The plugin's table, loaded once the way the core loads it.
const pb_transport_v1* plugin() {
  static const pb_transport_v1* table = plugboard::test::loadPluginTable(PLUGBOARD_UCX_PLUGIN);
  return table;
}

/// Why UCX cannot be tested here ("" when it can), found once by opening
/// and closing a context (after TcpOnly set UCX_TLS).
std::string unusableReason() {
  static const std::string reason =
      plugboard::test::initFailure(plugin(), "probe", {}, "UCX cannot create a TCP worker here: ");
  return reason;
}

/// The plugin settings of each mode the tests run: "" is the plugin's
/// defaults (active messages, all eager over TCP on CI's kind), "am_rndv"
/// lets UCX use rendezvous for large messages, "am_mixed" sends messages
/// under 64 KiB eagerly and larger ones as UCX chooses (what am_eager=auto
/// does on hosts with more cores), "rma_flush" / "rma_fence" are RMA with
/// each signal ordering, "am_lanes" cuts writes of 64 KiB and more across
/// two lanes (pieces eager below 48 KiB, so both kinds of piece are sent).
std::map<std::string, std::string> modeSettings(const std::string& mode) {
  if (mode == "am_rndv") return {{"protocol", "am"}, {"am_eager", "0"}};
  if (mode == "am_lanes") return {{"protocol", "am"}, {"lanes", "2"}, {"lane_bytes", "65536"}, {"am_eager", "49152"}};
  if (mode == "am_mixed") return {{"protocol", "am"}, {"am_eager", "65536"}};
  if (mode == "rma_flush") return {{"protocol", "rma"}, {"ordering", "flush"}};
  if (mode == "rma_fence") return {{"protocol", "rma"}, {"ordering", "fence"}};
  return {};
}

/// UCX as the shared suites see it (transport_pair_suite.hpp): over TCP
/// its worker moves data only while progressed, so waits poll the peer,
/// and free() waits for the peer's close marker, so ends are freed at once.
/// `mode` names modeSettings().
const plugboard::test::TransportUnderTest* ucxTransport(const std::string& mode = "") {
  static std::map<std::string, plugboard::test::TransportUnderTest> byMode;
  auto [it, fresh] = byMode.try_emplace(mode);
  plugboard::test::TransportUnderTest& t = it->second;
  if (fresh) {
    t.label = mode.empty() ? "ucx" : "ucx_" + mode;
    t.name = "ucx";
    t.pluginPath = PLUGBOARD_UCX_PLUGIN;
    t.table = &plugin;
    t.settings = modeSettings(mode);
    t.firstSettingKey = "tls";
    t.whyUnusable = &unusableReason;
    t.progressWhileWaiting = &plugboard::test::pollTheOtherConnections;
    t.freeEndsConcurrently = true;
  }
  return &t;
}

using plugboard::test::TransportLoadTest;
using plugboard::test::TransportOrderingTest;
using plugboard::test::TransportPairTest;
using plugboard::test::TransportWriteSizeTest;
PLUGBOARD_INSTANTIATE_TRANSPORT_SUITE(TransportLoadTest, ucxTransport());
PLUGBOARD_INSTANTIATE_TRANSPORT_SUITE(TransportPairTest, ucxTransport(), ucxTransport("am_rndv"),
                                      ucxTransport("am_mixed"), ucxTransport("am_lanes"), ucxTransport("rma_flush"));
PLUGBOARD_INSTANTIATE_TRANSPORT_SUITE(TransportOrderingTest, ucxTransport(), ucxTransport("am_rndv"),
                                      ucxTransport("am_mixed"), ucxTransport("am_lanes"), ucxTransport("rma_flush"),
                                      ucxTransport("rma_fence"));
PLUGBOARD_INSTANTIATE_WRITE_SIZES(ucxTransport());

using plugboard::test::FakeHost;
using plugboard::test::fillPattern;
using plugboard::test::Peer;

/// Sets or unsets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    had_ = std::getenv(name) != nullptr;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

/// The shared fixture (contexts, connections, regions and keys freed in ABI
/// order, both ends of a pair freed at once) on UCX over TCP, remembering
/// each context's fake host so tests can read what the plugin logged.
class UcxTest : public plugboard::test::TransportFixture {
 protected:
  const plugboard::test::TransportUnderTest& transport() const override { return *ucxTransport(); }

  void SetUp() override {
    TransportFixture::SetUp();
    if (HasFatalFailure()) return;
    // Skip, with UCX's reason, where UCX cannot bring up a TCP worker.
    if (!unusableReason().empty()) GTEST_SKIP() << unusableReason();
  }

  pb_plugin_ctx* makeContext(int rank, std::map<std::string, std::string> settings = {},
                             std::string hostname = "testhost") {
    pb_plugin_ctx* ctx = makeContextWith(rank, std::move(settings), std::move(hostname));
    if (ctx) hostOf_[ctx] = hosts_.back().get();
    return ctx;
  }

  std::vector<uint8_t> packed(pb_plugin_ctx* owner, pb_mr* mr) {
    std::vector<uint8_t> buf(properties(owner).max_rkey_size);
    size_t len = buf.size();
    EXPECT_EQ(t_->pack_rkey(owner, mr, buf.data(), &len), PB_OK) << error(owner);
    buf.resize(len);
    return buf;
  }

  void releaseKey(pb_conn* conn, pb_rkey* rkey) {
    ASSERT_EQ(t_->release_rkey(conn, rkey), PB_OK);
    rkeys_.erase(std::find(rkeys_.begin(), rkeys_.end(), std::make_pair(conn, rkey)));
  }

  /// Drops conn's keys from the books (free() releases what is left).
  void forgetKeysOf(pb_conn* conn) {
    rkeys_.erase(std::remove_if(rkeys_.begin(), rkeys_.end(), [&](const auto& e) { return e.first == conn; }),
                 rkeys_.end());
  }

  std::map<pb_plugin_ctx*, FakeHost*> hostOf_;
};

/// Two connected ranks of one host: c0_ is rank 0's connection to rank 1.
/// UcxOrderingTest below adds the ordering setting; UcxPolledPairTest turns
/// the plugin's progress thread off.
class UcxPairTest : public UcxTest {
 protected:
  void SetUp() override {
    UcxTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    connectWith(pairSettings());
  }

  virtual std::map<std::string, std::string> pairSettings() const { return {}; }

  void connectWith(const std::map<std::string, std::string>& settings) {
    ctx0_ = makeContext(0, settings);
    ctx1_ = makeContext(1, settings);
    ASSERT_TRUE(ctx0_ && ctx1_);
    connectPair(ctx0_, ctx1_, &c0_, &c1_);
  }

  /// Rank 0 writes size bytes into a region rank 1 deregistered first: both
  /// ends must fail, rank 1 naming the sender and the missing region, rank 0
  /// with an error containing senderSays; no byte may land.
  void expectWriteIntoDeregisteredFailsAtBothEnds(size_t size, const std::string& senderSays) {
    std::vector<uint8_t> src(size, 0xab), dst(size, 0);
    pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
    pb_mr* mrDst = reg(ctx1_, dst.data(), dst.size());
    pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
    deregister(ctx1_, mrDst);
    ASSERT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, size), PB_OK) << error(ctx0_);
    uint64_t done = 0;
    pb_status s0 = PB_OK, s1 = PB_OK;
    auto deadline = Clock::now() + kTimeout;
    while ((s0 == PB_OK || s1 == PB_OK) && Clock::now() < deadline) {
      if (s1 == PB_OK) s1 = t_->proxy_progress(c1_, &done);
      if (s0 == PB_OK) s0 = t_->proxy_progress(c0_, &done);
    }
    EXPECT_EQ(s1, PB_ERR_REMOTE);
    EXPECT_NE(error(ctx1_).find("not registered here"), std::string::npos) << error(ctx1_);
    EXPECT_NE(error(ctx1_).find("from rank 0 (host testhost)"), std::string::npos) << error(ctx1_);
    EXPECT_EQ(s0, PB_ERR_REMOTE) << "the sender never learned its message was refused";
    EXPECT_NE(error(ctx0_).find(senderSays), std::string::npos) << error(ctx0_);
    EXPECT_EQ(std::count(dst.begin(), dst.end(), 0), ptrdiff_t(size)) << "bytes were stored into a deregistered region";
  }

  pb_plugin_ctx* ctx0_ = nullptr;
  pb_plugin_ctx* ctx1_ = nullptr;
  pb_conn* c0_ = nullptr;
  pb_conn* c1_ = nullptr;
};

/// A pair without the plugin's progress thread: a rank's worker moves
/// only when proxy_progress is called on it, so a test can hold a rank still.
class UcxPolledPairTest : public UcxPairTest {
 protected:
  // No lanes either: their threads move large writes without polling.
  std::map<std::string, std::string> pairSettings() const override {
    return {{"progress_thread", "0"}, {"lanes", "0"}};
  }
};

// ---- loading, settings, reachability ---------------------------------------

TEST_F(UcxTest, TableDescribesTheTransport) {
  EXPECT_EQ(t_->abi_major, uint32_t(PB_TRANSPORT_ABI_MAJOR));
  EXPECT_EQ(std::string(t_->name), "ucx");
  EXPECT_GE(t_->struct_size, sizeof(pb_transport_v1));
  EXPECT_NE(t_->write_signal, nullptr);
  pb_plugin_ctx* ctx = makeContext(0);
  ASSERT_NE(ctx, nullptr);
  pb_transport_properties_v1 props{};
  props.struct_size = sizeof(props);
  ASSERT_EQ(t_->properties(ctx, &props), PB_OK);
  EXPECT_EQ(props.mem_types, uint32_t(PB_MEM_HOST)) << "this UCX has no CUDA support";
  // The progress thread (on by default) calls signal_landed for what it lands and completes;
  // UCX_TLS=tcp pins nothing, so the core may register callers' buffers per call.
  EXPECT_EQ(props.flags, uint32_t(PB_CAP_ONE_SIDED_WRITE | PB_CAP_ATOMIC_SIGNAL | PB_CAP_NEEDS_PROXY |
                                  PB_CAP_SIGNAL_NOTIFY | PB_CAP_CHEAP_REGISTRATION));
  EXPECT_GT(props.bandwidth_gbps, 0.0);
  EXPECT_GT(props.latency_us, 0.0);
  EXPECT_GT(props.max_address_size, 40u);
  EXPECT_GT(props.max_rkey_size, 40u);
  EXPECT_STREQ(t_->last_error(ctx), "");
}

TEST_F(UcxTest, DeclaresItsSettings) {
  ASSERT_NE(makeContext(0), nullptr);
  auto& declared = hosts_.back()->declared;
  ASSERT_EQ(declared.count("tls"), 1u);
  EXPECT_EQ(declared["tls"].type, PB_SETTING_STRING);
  EXPECT_EQ(declared["tls"].defaultValue, "");
  EXPECT_EQ(declared["tls"].rankLocal, 0) << "ranks must agree on transports";
  ASSERT_EQ(declared.count("protocol"), 1u);
  EXPECT_EQ(declared["protocol"].defaultValue, "auto");
  EXPECT_EQ(declared["protocol"].rankLocal, 0) << "ranks must agree on the protocol";
  ASSERT_EQ(declared.count("am_eager"), 1u);
  EXPECT_EQ(declared["am_eager"].defaultValue, "auto");
  ASSERT_EQ(declared.count("ordering"), 1u);
  EXPECT_EQ(declared["ordering"].defaultValue, "flush");
  EXPECT_EQ(declared["ordering"].rankLocal, 0);
  ASSERT_EQ(declared.count("progress_thread"), 1u);
  EXPECT_EQ(declared["progress_thread"].type, PB_SETTING_BOOL);
  EXPECT_EQ(declared["progress_thread"].defaultValue, "1");
}

TEST_F(UcxTest, BadOrderingFailsInit) {
  hosts_.push_back(std::make_unique<FakeHost>(0, "testhost", std::map<std::string, std::string>{{"ordering", "none"}}));
  pb_plugin_ctx* ctx = nullptr;
  EXPECT_EQ(t_->init(&hosts_.back()->services, &ctx), PB_ERR_INVALID);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_NE(std::string(t_->last_error(nullptr)).find("ucx.ordering = 'none'"), std::string::npos)
      << t_->last_error(nullptr);
}

// Which messages go eagerly (docs/perf/2026-11-27-session24-network-path.md,
// 2026-11-28-session36-notices-and-ucx-rendezvous.md).
// tcp_segments=auto asks for larger TCP segments only where UCX may open
// its TCP transport: elsewhere UCX warns at every worker that no transport
// took them ("invalid configurations", seen with UCX_TLS=self,sm).
TEST(UcxTcpSegments, AskedForOnlyWhereUcxMayUseTcp) {
  using plugboard::ucx::tlsMayUseTcp;
  for (const char* tls : {"", "tcp", "all", "rc,tcp", " sm , tcp ", "^ib", "^rc,sm"}) EXPECT_TRUE(tlsMayUseTcp(tls)) << tls;
  for (const char* tls : {"self,sm", "rc", "^tcp", "^sm,tcp", "tcpx", "^all,tcp"}) EXPECT_FALSE(tlsMayUseTcp(tls)) << tls;
}

TEST(UcxEagerRule, AutoSendsLargeMessagesByRendezvousOverTcp) {
  using plugboard::ucx::eagerBelow;
  using plugboard::ucx::kAutoEagerBytes;
  EXPECT_EQ(eagerBelow("1", true), SIZE_MAX);
  EXPECT_EQ(eagerBelow("1", false), SIZE_MAX);
  EXPECT_EQ(eagerBelow("0", true), 0u);
  EXPECT_EQ(eagerBelow("auto", false), 0u);               // RDMA: UCX's choice
  EXPECT_EQ(eagerBelow("auto", true), kAutoEagerBytes);   // TCP: eager below 256 KiB
  EXPECT_EQ(eagerBelow("65536", true), 65536u);            // a byte count wins everywhere
  EXPECT_EQ(eagerBelow("2", false), 2u);
  size_t bytes = 0;
  for (const char* bad : {"", "1", "0", "-5", "64K", "1099511627777", "99999999999999999999", " 7"})
    EXPECT_FALSE(plugboard::ucx::eagerByteCount(bad, &bytes)) << bad;
  EXPECT_TRUE(plugboard::ucx::eagerByteCount("1099511627776", &bytes));
}

TEST_F(UcxTest, BadProtocolFailsInit) {
  for (auto [key, value] : {std::pair<const char*, const char*>{"protocol", "tagged"}, {"am_eager", "yes"},
                            {"am_eager", "64K"}}) {
    hosts_.push_back(std::make_unique<FakeHost>(0, "testhost", std::map<std::string, std::string>{{key, value}}));
    pb_plugin_ctx* ctx = nullptr;
    EXPECT_EQ(t_->init(&hosts_.back()->services, &ctx), PB_ERR_INVALID) << key;
    EXPECT_EQ(ctx, nullptr);
    EXPECT_NE(std::string(t_->last_error(nullptr)).find(std::string("ucx.") + key + " = '" + value + "'"),
              std::string::npos)
        << t_->last_error(nullptr);
  }
}

TEST_F(UcxTest, LogsTransportsAndWhereTheyCameFrom) {
  ASSERT_NE(makeContext(0), nullptr);
  EXPECT_TRUE(hosts_.back()->logged({"INFO UCX 1.", "UCX_TLS=tcp (environment)",
                                     "operations as active messages (ucx.protocol=auto, am_eager=auto)",
                                     "progress thread"}))
      << hosts_.back()->allLogs();
  ASSERT_NE(makeContext(1, modeSettings("rma_flush")), nullptr);
  EXPECT_TRUE(hosts_.back()->logged({"operations as RMA (ucx.protocol=rma), signal ordering by ep flush"}))
      << hosts_.back()->allLogs();
}

TEST_F(UcxTest, RanksWithDifferentProtocolsDoNotConnect) {
  pb_plugin_ctx* ctx0 = makeContext(0);
  pb_plugin_ctx* ctx1 = makeContext(1, modeSettings("rma_flush"));
  ASSERT_TRUE(ctx0 && ctx1);
  std::vector<uint8_t> blob0, blob1;
  pb_conn* c0 = setup(ctx0, 0, 1, &blob0);
  pb_conn* c1 = setup(ctx1, 1, 0, &blob1);
  ASSERT_TRUE(c0 && c1);
  EXPECT_EQ(t_->proxy_connect(c0, blob1.data(), blob1.size()), PB_ERR_INVALID);
  std::string why = error(ctx0);
  EXPECT_NE(why.find("rank 1 (host testhost) uses ucx.protocol rma and rank 0 uses am"), std::string::npos) << why;
  EXPECT_NE(why.find("set the same ucx.protocol on every rank"), std::string::npos) << why;
  EXPECT_EQ(t_->proxy_connect(c1, blob0.data(), blob0.size()), PB_ERR_INVALID);
  EXPECT_NE(error(ctx1).find("rank 0 (host testhost) uses ucx.protocol am and rank 1 uses rma"), std::string::npos)
      << error(ctx1);
}

TEST_F(UcxTest, TlsSettingAppliesWhenUcxTlsIsUnset) {
  ScopedEnv env("UCX_TLS", nullptr);
  pb_plugin_ctx* ctx0 = makeContext(0, {{"tls", "tcp"}});
  pb_plugin_ctx* ctx1 = makeContext(1, {{"tls", "tcp"}});
  ASSERT_TRUE(ctx0 && ctx1);
  EXPECT_TRUE(hostOf_[ctx0]->logged({"UCX_TLS=tcp (ucx.tls setting)"})) << hostOf_[ctx0]->allLogs();
  pb_conn *c0 = nullptr, *c1 = nullptr;
  connectPair(ctx0, ctx1, &c0, &c1);
  EXPECT_TRUE(hostOf_[ctx0]->logged({"rank 0 connected to rank 1 (host testhost) over UCX", "tcp/"}))
      << hostOf_[ctx0]->allLogs();
}

TEST_F(UcxTest, UcxTlsFromTheEnvironmentWinsOverTheSetting) {
  pb_plugin_ctx* ctx = makeContext(0, {{"tls", "rc"}});
  ASSERT_NE(ctx, nullptr);
  EXPECT_TRUE(hostOf_[ctx]->logged({"WARN ucx.tls = 'rc' is ignored: the environment sets UCX_TLS=tcp"}))
      << hostOf_[ctx]->allLogs();
  EXPECT_TRUE(hostOf_[ctx]->logged({"UCX_TLS=tcp (environment)"})) << hostOf_[ctx]->allLogs();
}

TEST_F(UcxTest, CanConnectSameAndOtherHosts) {
  pb_plugin_ctx* ctx = makeContext(0);
  ASSERT_NE(ctx, nullptr);
  // UCX_TLS=tcp: no RDMA resource, so UCX ranks behind ethernet (100).
  EXPECT_TRUE(hostOf_[ctx]->logged({"resources self, tcp (cost 110)"}) ||
              hostOf_[ctx]->logged({"resources tcp (cost 110)"}))
      << hostOf_[ctx]->allLogs();
  for (const char* peerHost : {"testhost", "otherhost"}) {
    Peer peer(0, 1, "testhost", peerHost);
    int cost = -7;
    char reason[128] = "x";
    ASSERT_EQ(t_->can_connect(ctx, &peer.info, &cost, reason, sizeof(reason)), PB_OK) << error(ctx);
    EXPECT_EQ(cost, 110) << peerHost;
    EXPECT_STREQ(reason, "") << peerHost;
  }
}

TEST_F(UcxTest, SharedMemoryOnlyTransportsCannotReachAnotherHost) {
  ScopedEnv env("UCX_TLS", "self,sm");
  FakeHost host(0, "testhost", {});
  pb_plugin_ctx* ctx = nullptr;
  if (t_->init(&host.services, &ctx) != PB_OK) GTEST_SKIP() << "UCX_TLS=self,sm: " << t_->last_error(nullptr);
  ctxs_.push_back(ctx);
  Peer peer(0, 3, "testhost", "otherhost");
  int cost = 0;
  char reason[256] = "";
  ASSERT_EQ(t_->can_connect(ctx, &peer.info, &cost, reason, sizeof(reason)), PB_OK) << error(ctx);
  EXPECT_LT(cost, 0);
  EXPECT_NE(std::string(reason).find("UCX_TLS=self,sm has no transport that leaves the host"), std::string::npos)
      << reason;
  EXPECT_NE(std::string(reason).find("rank 3 (host otherhost)"), std::string::npos) << reason;
}

// ---- memory registration ---------------------------------------------------

TEST_F(UcxTest, CudaMemoryIsUnsupportedWithReason) {
  pb_plugin_ctx* ctx = makeContext(0);
  ASSERT_NE(ctx, nullptr);
  char buf[64];
  pb_mr* mr = reinterpret_cast<pb_mr*>(buf);
  EXPECT_EQ(t_->register_memory(ctx, buf, sizeof(buf), PB_MEM_CUDA, &mr), PB_ERR_UNSUPPORTED);
  EXPECT_EQ(mr, nullptr);
  EXPECT_NE(error(ctx).find("ucx cannot register CUDA memory"), std::string::npos) << error(ctx);
  EXPECT_NE(error(ctx).find("memory types: host"), std::string::npos) << error(ctx);
}

TEST_F(UcxTest, DeregisterTwiceIsInvalid) {
  pb_plugin_ctx* ctx = makeContext(0);
  ASSERT_NE(ctx, nullptr);
  std::vector<uint8_t> mem(64);
  pb_mr* mr = nullptr;
  ASSERT_EQ(t_->register_memory(ctx, mem.data(), mem.size(), PB_MEM_HOST, &mr), PB_OK) << error(ctx);
  EXPECT_EQ(t_->deregister_memory(ctx, mr), PB_OK);
  EXPECT_EQ(t_->deregister_memory(ctx, mr), PB_ERR_INVALID);
  EXPECT_NE(error(ctx).find("not a region registered"), std::string::npos) << error(ctx);
}

TEST_F(UcxPairTest, RkeyRoundTripAndBadKeys) {
  std::vector<uint8_t> mem(100);
  pb_mr* mr = reg(ctx1_, mem.data(), mem.size());
  uint8_t small[8];
  size_t len = sizeof(small);
  EXPECT_EQ(t_->pack_rkey(ctx1_, mr, small, &len), PB_ERR_INVALID) << "buffer too small";
  pb_transport_properties_v1 props{};
  props.struct_size = sizeof(props);
  ASSERT_EQ(t_->properties(ctx1_, &props), PB_OK);
  EXPECT_GT(len, sizeof(small)) << "a failed pack reports the size it needs";
  EXPECT_LE(len, props.max_rkey_size);
  std::vector<uint8_t> key = packed(ctx1_, mr);
  ASSERT_EQ(key.size(), len);
  pb_rkey* rkey = nullptr;
  EXPECT_EQ(t_->import_rkey(c0_, key.data(), key.size() - 1, &rkey), PB_ERR_INVALID);
  EXPECT_NE(error(ctx0_).find("do not add up"), std::string::npos) << error(ctx0_);
  EXPECT_EQ(t_->import_rkey(c0_, key.data(), 12, &rkey), PB_ERR_INVALID);
  auto bad = key;
  bad[0] ^= 0xff;
  EXPECT_EQ(t_->import_rkey(c0_, bad.data(), bad.size(), &rkey), PB_ERR_INVALID);
  EXPECT_NE(error(ctx0_).find("bad magic"), std::string::npos) << error(ctx0_);
  // A flipped bit in the UCX part would reach UCX's parser: the checksum stops it.
  for (size_t at : {size_t(9), key.size() - 1}) {
    bad = key;
    bad[at] ^= 0x10;
    EXPECT_EQ(t_->import_rkey(c0_, bad.data(), bad.size(), &rkey), PB_ERR_INVALID) << "byte " << at;
    EXPECT_NE(error(ctx0_).find("checksum"), std::string::npos) << error(ctx0_);
  }
  std::vector<uint8_t> garbage(key.size(), 0x5a);
  EXPECT_EQ(t_->import_rkey(c0_, garbage.data(), garbage.size(), &rkey), PB_ERR_INVALID);
  EXPECT_EQ(t_->import_rkey(c0_, nullptr, 40, &rkey), PB_ERR_INVALID);
  EXPECT_EQ(rkey, nullptr);
  ASSERT_EQ(t_->import_rkey(c0_, key.data(), key.size(), &rkey), PB_OK) << error(ctx0_);
  EXPECT_EQ(t_->release_rkey(c0_, rkey), PB_OK);
  EXPECT_EQ(t_->release_rkey(c0_, rkey), PB_ERR_INVALID) << "released twice";
}

TEST_F(UcxTest, BadPeerAddressIsInvalid) {
  pb_plugin_ctx* ctx = makeContext(0);
  ASSERT_NE(ctx, nullptr);
  std::vector<uint8_t> blob;
  pb_conn* conn = setup(ctx, 0, 1, &blob);
  ASSERT_NE(conn, nullptr);
  EXPECT_EQ(t_->proxy_connect(conn, blob.data(), blob.size() - 1), PB_ERR_INVALID);
  EXPECT_NE(error(ctx).find("from rank 1"), std::string::npos) << error(ctx);
  EXPECT_EQ(t_->proxy_connect(conn, blob.data(), 10), PB_ERR_INVALID);
  std::vector<uint8_t> wrong(blob.size(), 0x5a);
  EXPECT_EQ(t_->proxy_connect(conn, wrong.data(), wrong.size()), PB_ERR_INVALID);
  EXPECT_NE(error(ctx).find("bad magic"), std::string::npos) << error(ctx);
  auto flipped = blob;
  flipped[blob.size() / 2] ^= 0x01;  // inside UCX's worker address
  EXPECT_EQ(t_->proxy_connect(conn, flipped.data(), flipped.size()), PB_ERR_INVALID);
  EXPECT_NE(error(ctx).find("checksum"), std::string::npos) << error(ctx);
  // Our own blob is well formed but says rank 0: not the peer we expect.
  EXPECT_EQ(t_->proxy_connect(conn, blob.data(), blob.size()), PB_ERR_INVALID);
  EXPECT_NE(error(ctx).find("from rank 0, expected rank 1"), std::string::npos) << error(ctx);
  EXPECT_EQ(t_->proxy_connect(conn, nullptr, 0), PB_ERR_INVALID);
}

TEST_F(UcxTest, SetupReportsTheRoomItNeeds) {
  pb_plugin_ctx* ctx = makeContext(0);
  ASSERT_NE(ctx, nullptr);
  Peer info(0, 1, "testhost", "testhost");
  pb_conn* conn = nullptr;
  uint8_t small[16];
  size_t len = sizeof(small);
  EXPECT_EQ(t_->setup(ctx, &info.info, &conn, small, &len), PB_ERR_INVALID);
  EXPECT_EQ(conn, nullptr);
  pb_transport_properties_v1 props{};
  props.struct_size = sizeof(props);
  ASSERT_EQ(t_->properties(ctx, &props), PB_OK);
  EXPECT_GT(len, sizeof(small));
  EXPECT_LE(len, props.max_address_size);
}

TEST_F(UcxTest, OperationsBeforeConnectAreInvalid) {
  pb_plugin_ctx* ctx = makeContext(0);
  ASSERT_NE(ctx, nullptr);
  std::vector<uint8_t> blob;
  pb_conn* conn = setup(ctx, 0, 1, &blob);
  ASSERT_NE(conn, nullptr);
  uint64_t done = 0;
  EXPECT_EQ(t_->proxy_progress(conn, &done), PB_ERR_INVALID);
  EXPECT_NE(error(ctx).find("not connected yet"), std::string::npos) << error(ctx);
  pb_rkey* rkey = nullptr;
  EXPECT_EQ(t_->import_rkey(conn, blob.data(), blob.size(), &rkey), PB_ERR_INVALID);
}

// ---- data path -------------------------------------------------------------

TEST_F(UcxPairTest, ConnectLogsTheLanesUcxChose) {
  EXPECT_TRUE(hostOf_[ctx0_]->logged({"INFO rank 0 connected to rank 1 (host testhost) over UCX", "lane[0]", "tcp/"}))
      << hostOf_[ctx0_]->allLogs();
}

/// The pair connected in mode GetParam() (see modeSettings).
class UcxOrderingTest : public UcxPairTest, public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    UcxTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    connectWith(modeSettings(GetParam()));
  }
};

/// A pair using RMA with flush ordering and no progress threads.
class UcxRmaPolledPairTest : public UcxPairTest {
 protected:
  std::map<std::string, std::string> pairSettings() const override {
    auto s = modeSettings("rma_flush");
    s["progress_thread"] = "0";
    return s;
  }
};

// Many write+signal pairs in flight at once, each write to its own slot:
// whenever the receiver sees the counter at c, slots [0, c) must be whole.
// A checker thread watches the counter while this thread drives both
// workers, so it also looks between two events of one progress call, as a
// waiter on another thread than the proxy's would.
TEST_P(UcxOrderingTest, PipelinedSignalsNeverOvertakeTheirWrites) {
  constexpr size_t kSlot = 256 << 10, kSlots = 48;
  std::vector<uint8_t> src(kSlot * kSlots), dst(kSlot * kSlots, 0);
  fillPattern(src.data(), src.size(), 5);
  std::vector<uint64_t> counter(1, 0);
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  pb_mr* mrDst = reg(ctx1_, dst.data(), dst.size());
  pb_mr* mrCounter = reg(ctx1_, counter.data(), sizeof(uint64_t));
  pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
  pb_rkey* rkCounter = remoteKey(ctx1_, mrCounter, c0_);
  std::atomic<bool> stop{false};
  std::atomic<long> overtaken{-1};
  std::thread checker([&] {
    size_t checked = 0;
    while (!stop && checked < kSlots) {
      uint64_t seen = __atomic_load_n(counter.data(), __ATOMIC_ACQUIRE);
      for (; checked < seen && checked < kSlots; ++checked) {
        const uint8_t* got = dst.data() + checked * kSlot;
        const uint8_t* want = src.data() + checked * kSlot;
        // Last byte first: a write still arriving is most likely incomplete at its end.
        if (got[kSlot - 1] != want[kSlot - 1] || std::memcmp(got, want, kSlot) != 0) {
          overtaken = long(checked);
          return;
        }
      }
    }
  });
  for (size_t i = 0; i < kSlots; ++i) {
    if (i % 2) {
      ASSERT_EQ(t_->write_signal(c0_, mrSrc, i * kSlot, rkDst, i * kSlot, kSlot, rkCounter, 0, 1), PB_OK)
          << error(ctx0_);
    } else {
      ASSERT_EQ(t_->write(c0_, mrSrc, i * kSlot, rkDst, i * kSlot, kSlot), PB_OK) << error(ctx0_);
      ASSERT_EQ(t_->signal(c0_, rkCounter, 0, 1), PB_OK) << error(ctx0_);
    }
  }
  const uint64_t posted = kSlots + kSlots / 2;  // write+signal for even slots, write_signal for odd
  waitCounter(counter.data(), kSlots);
  stop = true;
  checker.join();
  EXPECT_EQ(overtaken.load(), -1) << "the signal for slot " << overtaken.load() << " arrived before its data";
  waitCompleted(ctx0_, c0_, posted);
  EXPECT_EQ(dst, src);
}

// Over UCX's TCP transport every operation shares one lane, so the end-to-
// end tests above would pass even without the flush. This one checks the
// flush itself: while rank 1 does not progress, it cannot acknowledge the
// write, so the flush cannot complete and the signal must stay unposted
// (not completed), even though the small write itself completed locally.
TEST_F(UcxRmaPolledPairTest, FlushModeHoldsTheSignalUntilThePeerHasTheWrite) {
  std::vector<uint8_t> src(4096, 0xab), dst(4096, 0);
  std::vector<uint64_t> counter(1, 0);
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  pb_mr* mrDst = reg(ctx1_, dst.data(), dst.size());
  pb_mr* mrCounter = reg(ctx1_, counter.data(), 8);
  pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
  pb_rkey* rkCounter = remoteKey(ctx1_, mrCounter, c0_);
  ASSERT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, src.size()), PB_OK) << error(ctx0_);
  ASSERT_EQ(t_->signal(c0_, rkCounter, 0, 1), PB_OK) << error(ctx0_);
  uint64_t done = 0;
  auto until = Clock::now() + std::chrono::milliseconds(300);
  while (Clock::now() < until) ASSERT_EQ(t_->proxy_progress(c0_, &done), PB_OK) << error(ctx0_);
  EXPECT_EQ(done, 1u) << "the signal completed before rank 1 could have acknowledged the write";
  EXPECT_EQ(counter[0], 0u);
  waitCompleted(ctx0_, c0_, 2);  // progresses rank 1 too
  waitCounter(counter.data(), 1);
  EXPECT_EQ(dst, src);
}

INSTANTIATE_TEST_SUITE_P(Modes, UcxOrderingTest,
                         ::testing::Values("am", "am_rndv", "am_mixed", "rma_flush", "rma_fence"),
                         [](const auto& info) { return std::string(info.param); });

TEST_F(UcxPairTest, KeyReleasedWhileItsWriteIsInFlight) {
  constexpr size_t kSize = 8 << 20;
  std::vector<uint8_t> src(kSize), dst(kSize, 0);
  fillPattern(src.data(), kSize, 31);
  std::vector<uint64_t> counter(1, 0);
  pb_mr* mrSrc = reg(ctx0_, src.data(), kSize);
  pb_mr* mrDst = reg(ctx1_, dst.data(), kSize);
  pb_mr* mrCounter = reg(ctx1_, counter.data(), 8);
  pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
  pb_rkey* rkCounter = remoteKey(ctx1_, mrCounter, c0_);
  ASSERT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, kSize), PB_OK);
  ASSERT_EQ(t_->signal(c0_, rkCounter, 0, 1), PB_OK);
  releaseKey(c0_, rkDst);  // the operations keep UCX's key alive
  releaseKey(c0_, rkCounter);
  waitCompleted(ctx0_, c0_, 2);
  waitCounter(counter.data(), 1);
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), kSize), 0);
}

TEST_F(UcxPairTest, ProgressThreadLandsDataWithoutTheReceiverPolling) {
  std::vector<uint8_t> src(100000), dst(100000, 0);
  fillPattern(src.data(), src.size(), 41);
  std::vector<uint64_t> counter(1, 0);
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  pb_mr* mrDst = reg(ctx1_, dst.data(), dst.size());
  pb_mr* mrCounter = reg(ctx1_, counter.data(), 8);
  pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
  pb_rkey* rkCounter = remoteKey(ctx1_, mrCounter, c0_);
  ASSERT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, src.size()), PB_OK) << error(ctx0_);
  ASSERT_EQ(t_->signal(c0_, rkCounter, 0, 1), PB_OK) << error(ctx0_);
  // No proxy_progress on either side: both plugin threads do the work.
  auto deadline = Clock::now() + kTimeout;
  while (__atomic_load_n(counter.data(), __ATOMIC_ACQUIRE) < 1) {
    ASSERT_LT(Clock::now(), deadline) << "nothing landed without polling";
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  EXPECT_EQ(dst, src);
  waitCompleted(ctx0_, c0_, 2);
}

TEST_F(UcxPairTest, IdleProgressThreadsSleep) {
  // Both contexts' threads are up and connected; with nothing to do they
  // must block on the worker's event fd, not spin (CI has two cores).
  auto cpu = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
  };
  double before = cpu();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  double used = cpu() - before;
  EXPECT_LT(used, 100.0) << "idle plugin threads used " << used << " ms of CPU in 500 ms";
}

TEST_F(UcxPairTest, SignalsTellTheCoreSomethingLanded) {
  std::vector<uint64_t> counter(1, 0);
  pb_mr* mrCounter = reg(ctx1_, counter.data(), 8);
  pb_rkey* rkCounter = remoteKey(ctx1_, mrCounter, c0_);
  int before = hostOf_[ctx1_]->landings.load();
  ASSERT_EQ(t_->signal(c0_, rkCounter, 0, 5), PB_OK);
  waitCounter(counter.data(), 5);
  EXPECT_GT(hostOf_[ctx1_]->landings.load(), before) << "signal_landed was not called on the receiving side";
}

// The range checks every transport makes are in the shared suite
// (TransportPairTest.OutOfRangeOperationsAreRejected); these are UCX's own.
TEST_F(UcxPairTest, FusedAndForeignOperationsAreRejected) {
  std::vector<uint8_t> src(64), dst(64);
  std::vector<uint64_t> counter(2, 0);
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  pb_mr* mrDst = reg(ctx1_, dst.data(), dst.size());
  pb_mr* mrCounter = reg(ctx1_, counter.data(), 16);
  pb_mr* mrForeign = reg(ctx1_, src.data(), src.size());  // ctx1's region used as ctx0's source
  pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
  pb_rkey* rkCounter = remoteKey(ctx1_, mrCounter, c0_);
  pb_rkey* rkOnOtherConn = remoteKey(ctx0_, reg(ctx0_, dst.data(), dst.size()), c1_);
  EXPECT_EQ(t_->write_signal(c0_, mrSrc, 0, rkDst, 0, 64, rkCounter, 16, 1), PB_ERR_INVALID) << "signal past the end";
  EXPECT_EQ(t_->write_signal(c0_, mrSrc, 0, rkDst, 1, 64, rkCounter, 0, 1), PB_ERR_INVALID) << "write past the end";
  EXPECT_EQ(t_->write(c0_, mrForeign, 0, rkDst, 0, 1), PB_ERR_INVALID);
  EXPECT_NE(error(ctx0_).find("another context"), std::string::npos) << error(ctx0_);
  EXPECT_EQ(t_->write(c0_, mrSrc, 0, rkOnOtherConn, 0, 1), PB_ERR_INVALID);
  EXPECT_NE(error(ctx0_).find("another connection"), std::string::npos) << error(ctx0_);
  // Rejected posts take no sequence number and leave the connection usable.
  ASSERT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, 64), PB_OK) << error(ctx0_);
  ASSERT_EQ(t_->signal(c0_, rkCounter, 8, 1), PB_OK) << error(ctx0_);
  waitCompleted(ctx0_, c0_, 2);
  waitCounter(&counter[1], 1);
}

// With active messages the target stores and adds: it checks the region
// named in each message before it stores a byte (the region id and its
// random check value, so a stale key never reaches a new region).
TEST_F(UcxPolledPairTest, MessageIntoADeregisteredRegionFailsAtTheTarget) {
  std::vector<uint8_t> src(64, 0xab), dst(64, 0);
  std::vector<uint64_t> counter(1, 0);
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  pb_mr* mrDst = reg(ctx1_, dst.data(), dst.size());
  pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
  pb_rkey* rkCounter = remoteKey(ctx1_, reg(ctx1_, counter.data(), sizeof(uint64_t)), c0_);
  deregister(ctx1_, mrDst);
  ASSERT_EQ(t_->write_signal(c0_, mrSrc, 0, rkDst, 0, src.size(), rkCounter, 0, 1), PB_OK) << error(ctx0_);
  EXPECT_EQ(progressUntilFailure(c1_, c0_, ctx0_), PB_ERR_REMOTE);
  EXPECT_NE(error(ctx1_).find("bad ucx message #1 from rank 0 (host testhost): write of 64 bytes to region"),
            std::string::npos)
      << error(ctx1_);
  EXPECT_NE(error(ctx1_).find("not registered here"), std::string::npos) << error(ctx1_);
  EXPECT_EQ(std::count(dst.begin(), dst.end(), 0), 64) << "bytes were stored into a deregistered region";
  EXPECT_EQ(counter[0], 0u) << "the signal of a refused write was applied";
}

/// The default pair with rendezvous allowed (ucx.am_eager=0, no progress threads).
class UcxRndvPolledPairTest : public UcxPairTest {
 protected:
  std::map<std::string, std::string> pairSettings() const override {
    auto s = modeSettings("am_rndv");
    s["progress_thread"] = "0";
    s["lanes"] = "0";  // the endpoint's rendezvous (lanes have threads of their own)
    return s;
  }
};

// A rendezvous message's signal waits for its data and for every earlier
// message: a large write, then a small write_signal that overtakes it on the
// wire, must not show its counter before the large write landed.
TEST_F(UcxRndvPolledPairTest, SignalWaitsForAnEarlierRendezvousWrite) {
  constexpr size_t kLarge = 4 << 20;
  std::vector<uint8_t> big(kLarge), bigDst(kLarge, 0), small(64, 0x5c), smallDst(64, 0);
  fillPattern(big.data(), kLarge, 77);
  std::vector<uint64_t> counter(1, 0);
  pb_mr* mrBig = reg(ctx0_, big.data(), kLarge);
  pb_mr* mrSmall = reg(ctx0_, small.data(), small.size());
  pb_rkey* rkBig = remoteKey(ctx1_, reg(ctx1_, bigDst.data(), kLarge), c0_);
  pb_rkey* rkSmall = remoteKey(ctx1_, reg(ctx1_, smallDst.data(), smallDst.size()), c0_);
  pb_rkey* rkCounter = remoteKey(ctx1_, reg(ctx1_, counter.data(), sizeof(uint64_t)), c0_);
  ASSERT_EQ(t_->write(c0_, mrBig, 0, rkBig, 0, kLarge), PB_OK) << error(ctx0_);
  ASSERT_EQ(t_->write_signal(c0_, mrSmall, 0, rkSmall, 0, small.size(), rkCounter, 0, 1), PB_OK) << error(ctx0_);
  uint64_t done = 0;
  auto deadline = Clock::now() + kTimeout;
  while (__atomic_load_n(counter.data(), __ATOMIC_ACQUIRE) == 0) {
    ASSERT_LT(Clock::now(), deadline);
    ASSERT_EQ(t_->proxy_progress(c1_, &done), PB_OK) << error(ctx1_);
    if (__atomic_load_n(counter.data(), __ATOMIC_ACQUIRE)) break;
    ASSERT_EQ(t_->proxy_progress(c0_, &done), PB_OK) << error(ctx0_);
  }
  EXPECT_EQ(bigDst, big) << "the signal was applied before the earlier large write landed";
  EXPECT_EQ(smallDst, small);
  waitCompleted(ctx0_, c0_, 2);
}

// A refused rendezvous message fails at both ends: the target names the
// sender, and the sender's request completes with the target's error.
TEST_F(UcxRndvPolledPairTest, RendezvousIntoADeregisteredRegionFailsAtBothEnds) {
  expectWriteIntoDeregisteredFailsAtBothEnds(4 << 20, "ucx message #1 to rank 1 (host testhost)");
}

TEST_F(UcxPairTest, ZeroByteRegionTakesZeroByteWrites) {
  std::vector<uint8_t> src(8);
  uint8_t target = 0x77;
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  pb_mr* mrEmpty = reg(ctx1_, &target, 0);
  pb_rkey* rkEmpty = remoteKey(ctx1_, mrEmpty, c0_);
  ASSERT_EQ(t_->write(c0_, mrSrc, 0, rkEmpty, 0, 0), PB_OK) << error(ctx0_);
  EXPECT_EQ(t_->write(c0_, mrSrc, 0, rkEmpty, 0, 1), PB_ERR_INVALID);
  EXPECT_EQ(t_->signal(c0_, rkEmpty, 0, 1), PB_ERR_INVALID);
  waitCompleted(ctx0_, c0_, 1);
  EXPECT_EQ(target, 0x77);
}

// ---- close -----------------------------------------------------------------

TEST_F(UcxPairTest, CleanCloseIsNotAnError) {
  std::vector<uint8_t> src(8), dstMem(8);
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  pb_mr* mrDst = reg(ctx1_, dstMem.data(), dstMem.size());
  pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
  // Rank 0 keeps progressing (its proxy thread) while rank 1 closes.
  std::atomic<bool> stop{false};
  std::atomic<pb_status> progressStatus{PB_OK};
  std::thread rank0([&] {
    while (!stop) {
      uint64_t done = 0;
      pb_status st = t_->proxy_progress(c0_, &done);
      if (st != PB_OK) progressStatus = st;
      std::this_thread::yield();
    }
  });
  auto start = Clock::now();
  forgetKeysOf(c1_);
  freeEnds({c1_});
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(1900)) << "free() waited out its 2 s grace: the marker did not land";
  // UCX resets rank 0's endpoint when rank 1's goes; that is no error.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  rank0.join();
  EXPECT_EQ(progressStatus.load(), PB_OK) << error(ctx0_);
  uint64_t done = 0;
  EXPECT_EQ(t_->proxy_progress(c0_, &done), PB_OK) << error(ctx0_);
  EXPECT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, 0), PB_ERR_REMOTE) << "posting after the peer closed";
  std::string reason = error(ctx0_);
  EXPECT_NE(reason.find("rank 1 (host testhost) closed the ucx connection"), std::string::npos) << reason;
  EXPECT_EQ(t_->proxy_progress(c0_, &done), PB_OK) << "a refused post does not break the connection";
}

// ---- lanes (README "Lanes") ----------------------------------------------------

class UcxLaneTest : public UcxPairTest {
 protected:
  std::map<std::string, std::string> pairSettings() const override { return modeSettings("am_lanes"); }
};

TEST_F(UcxLaneTest, LanesAreOpenedAndLogged) {
  EXPECT_TRUE(hostOf_[ctx0_]->logged({"2 lane(s) for writes of at least 65536 bytes (ucx.lanes=2)"}))
      << hostOf_[ctx0_]->allLogs();
  EXPECT_TRUE(hostOf_[ctx0_]->logged({"; 2 ucx lane(s) for writes of at least 65536 bytes"}))
      << hostOf_[ctx0_]->allLogs();
}

TEST_F(UcxLaneTest, WritesAcrossLanesLandWholeBeforeTheirSignal) {
  // Odd sizes and offsets: pieces of whole pages, eager and rendezvous, the
  // last lane's short or empty; each signal lands only after every piece.
  const size_t sizes[] = {65536, 65536 + 4097, (size_t(4) << 20) + 123, 4096 * 16 + 1};
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
    waitCompleted(ctx0_, c0_, 3 * (i + 1));
  }
}

TEST_F(UcxLaneTest, APeerWithoutLanesGetsWholeWrites) {
  pb_plugin_ctx* plain = makeContext(1, {{"protocol", "am"}, {"lanes", "0"}});
  ASSERT_NE(plain, nullptr);
  pb_conn *mine = nullptr, *theirs = nullptr;
  connectPair(ctx0_, plain, &mine, &theirs);
  EXPECT_TRUE(hostOf_[ctx0_]->logged({"; 0 ucx lane(s)"})) << "lanes used: as many as both ends have";
  constexpr size_t kSize = size_t(1) << 20;
  std::vector<uint8_t> src(kSize), dst(kSize, 0);
  std::vector<uint64_t> counter(1, 0);
  fillPattern(src.data(), kSize, 11);
  pb_mr* mrSrc = reg(ctx0_, src.data(), kSize);
  pb_rkey* rkDst = remoteKey(plain, reg(plain, dst.data(), kSize), mine);
  pb_rkey* rkCounter = remoteKey(plain, reg(plain, counter.data(), sizeof(uint64_t)), mine);
  ASSERT_EQ(t_->write_signal(mine, mrSrc, 0, rkDst, 0, kSize, rkCounter, 0, 1), PB_OK) << error(ctx0_);
  waitCounter(counter.data(), 1);
  EXPECT_EQ(src, dst);
}

// As RendezvousIntoADeregisteredRegionFailsAtBothEnds, over lanes: the
// target refuses the pieces, and the sender's lanes learn it.
TEST_F(UcxLaneTest, PiecesIntoADeregisteredRegionFailAtBothEnds) {
  expectWriteIntoDeregisteredFailsAtBothEnds(1 << 20, "ucx write #1 to rank 1 (host testhost) failed: ucx lane");
}

TEST_F(UcxTest, BadLaneAndSegmentSettingsFailInitNamingThem) {
  for (auto [key, value] : {std::pair<const char*, const char*>{"lanes", "17"}, {"lanes", "two"},
                            {"lane_bytes", "4096"}, {"lane_bytes", "1M"}, {"tcp_segments", "64k"}}) {
    hosts_.push_back(std::make_unique<FakeHost>(0, "testhost", std::map<std::string, std::string>{{key, value}}));
    pb_plugin_ctx* ctx = nullptr;
    EXPECT_EQ(t_->init(&hosts_.back()->services, &ctx), PB_ERR_INVALID) << key << "=" << value;
    EXPECT_EQ(ctx, nullptr);
    EXPECT_NE(std::string(t_->last_error(nullptr)).find(std::string("ucx.") + key + " = '" + value + "'"),
              std::string::npos)
        << t_->last_error(nullptr);
  }
  hosts_.push_back(std::make_unique<FakeHost>(
      0, "testhost", std::map<std::string, std::string>{{"lanes", "2"}, {"protocol", "rma"}}));
  pb_plugin_ctx* ctx = nullptr;
  EXPECT_EQ(t_->init(&hosts_.back()->services, &ctx), PB_ERR_INVALID);
  EXPECT_NE(std::string(t_->last_error(nullptr)).find("ucx.lanes = 2 needs ucx.protocol=am"), std::string::npos)
      << t_->last_error(nullptr);
}

TEST_F(UcxPolledPairTest, FreeWithAPeerThatNeverProgressesIsBounded) {
  // Nobody progresses rank 1: the close marker cannot land, free() gives up.
  auto start = Clock::now();
  freeEnds({c0_});
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(8));
  EXPECT_TRUE(hostOf_[ctx0_]->logged({"WARN could not tell rank 1 (host testhost)"})) << hostOf_[ctx0_]->allLogs();
}

}  // namespace
