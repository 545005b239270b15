// Tests of libplugboard-ethernet.so through its C ABI only, as the core
// uses it: dlopen, a fake host-services table, two plugin contexts (ranks 0
// and 1 of one host) in this process, real TCP sockets on loopback. One
// test forks a rank that dies without closing.
#include "plugin_test_support.hpp"
#include "transport_pair_suite.hpp"
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <plugboard/transport.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "../../plugins/ethernet/src/stripe_rule.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#ifndef PLUGBOARD_ETHERNET_PLUGIN
#error "PLUGBOARD_ETHERNET_PLUGIN must name libplugboard-ethernet.so"
#endif

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTimeout = std::chrono::seconds(20);
/// The plugin's wire format version (README "Wire format").
constexpr uint32_t kWireVersion = 2;

/// The plugin's table, loaded once the way the core loads it.
const pb_transport_v1* plugin() {
  static const pb_transport_v1* table = plugboard::test::loadPluginTable(PLUGBOARD_ETHERNET_PLUGIN);
  return table;
}

/// Ethernet as the shared suites see it (transport_pair_suite.hpp): its
/// own sender and receiver threads move the data, so waits drive nothing.
const plugboard::test::TransportUnderTest* ethernetTransport() {
  static const plugboard::test::TransportUnderTest t = [] {
    plugboard::test::TransportUnderTest d;
    d.label = d.name = "ethernet";
    d.pluginPath = PLUGBOARD_ETHERNET_PLUGIN;
    d.table = &plugin;
    d.firstSettingKey = "ifname";
    d.whyUnusable = nullptr;  // loopback TCP is always there
    d.progressWhileWaiting = &plugboard::test::progressesByItself;
    return d;
  }();
  return &t;
}

using plugboard::test::TransportDeclareTest;
using plugboard::test::TransportLoadTest;
using plugboard::test::TransportOrderingTest;
using plugboard::test::TransportPairTest;
using plugboard::test::TransportWriteSizeTest;
/// Ethernet with three stripe sockets each way cutting every write from 4
/// KiB up (so the 4097-byte write has an empty piece): the same suites hold.
const plugboard::test::TransportUnderTest* stripedEthernetTransport() {
  static const plugboard::test::TransportUnderTest t = [] {
    plugboard::test::TransportUnderTest d = *ethernetTransport();
    d.label = "ethernet_striped";
    d.settings = {{"stripe_sockets", "3"}, {"stripe_bytes", "4096"}};
    return d;
  }();
  return &t;
}

/// Ethernet with striping off, whatever the cores (auto may turn it on).
const plugboard::test::TransportUnderTest* oneStreamEthernetTransport() {
  static const plugboard::test::TransportUnderTest t = [] {
    plugboard::test::TransportUnderTest d = *ethernetTransport();
    d.label = "ethernet_one_stream";
    d.settings = {{"stripe_sockets", "0"}};
    return d;
  }();
  return &t;
}

PLUGBOARD_INSTANTIATE_TRANSPORT_SUITE(TransportLoadTest, ethernetTransport());
PLUGBOARD_INSTANTIATE_TRANSPORT_SUITE(TransportDeclareTest, ethernetTransport());
PLUGBOARD_INSTANTIATE_TRANSPORT_SUITE(TransportPairTest, ethernetTransport(), stripedEthernetTransport(),
                                      oneStreamEthernetTransport());
PLUGBOARD_INSTANTIATE_TRANSPORT_SUITE(TransportOrderingTest, ethernetTransport(), stripedEthernetTransport(),
                                      oneStreamEthernetTransport());
INSTANTIATE_TEST_SUITE_P(Conformance, TransportWriteSizeTest,
                         ::testing::Combine(::testing::Values(ethernetTransport(), stripedEthernetTransport()),
                                            ::plugboard::test::suiteWriteSizes()),
                         ::plugboard::test::labelAndSizeOf);

using plugboard::test::FakeHost;
using plugboard::test::fillPattern;
using plugboard::test::Peer;

/// The shared fixture (contexts, connections, regions and keys freed in ABI
/// order) on ethernet; contexts may take their own settings and host name.
class EthernetTest : public plugboard::test::TransportFixture {
 protected:
  const plugboard::test::TransportUnderTest& transport() const override { return *ethernetTransport(); }

  pb_plugin_ctx* makeContext(int rank, std::map<std::string, std::string> settings = {},
                             std::string hostname = "testhost") {
    return makeContextWith(rank, std::move(settings), std::move(hostname));
  }

  /// Rank 1's context for a RawPeer test: one frame stream, as RawPeer accepts.
  pb_plugin_ctx* makeRawPeerContext() { return makeContext(1, {{"stripe_sockets", "0"}}); }

  /// Rank 1 on ctx1, connected to a RawPeer playing rank 0 (*conn: its connection).
  template <typename Peer>
  void connectRawPeer(pb_plugin_ctx* ctx1, Peer& peer, pb_conn** conn) {
    std::vector<uint8_t> blob1;
    *conn = setup(ctx1, 1, 0, &blob1);
    ASSERT_NE(*conn, nullptr);
    auto rawBlob = peer.blob();
    ASSERT_NO_FATAL_FAILURE(peer.connectTo(blob1));
    pb_status st = PB_IN_PROGRESS;
    auto deadline = Clock::now() + kTimeout;
    while (st == PB_IN_PROGRESS && Clock::now() < deadline) st = t_->proxy_connect(*conn, rawBlob.data(), rawBlob.size());
    ASSERT_EQ(st, PB_OK) << error(ctx1);
    ASSERT_NO_FATAL_FAILURE(peer.acceptFrom());
  }
};

/// Two connected ranks of one host: c0_ is rank 0's connection to rank 1.
class EthernetPairTest : public EthernetTest {
 protected:
  void SetUp() override {
    EthernetTest::SetUp();
    if (HasFatalFailure()) return;
    ctx0_ = makeContext(0);
    ctx1_ = makeContext(1);
    ASSERT_TRUE(ctx0_ && ctx1_);
    connectPair(ctx0_, ctx1_, &c0_, &c1_);
  }

  pb_plugin_ctx* ctx0_ = nullptr;
  pb_plugin_ctx* ctx1_ = nullptr;
  pb_conn* c0_ = nullptr;
  pb_conn* c1_ = nullptr;
};

// ---- loading, settings, reachability ---------------------------------------

TEST_F(EthernetTest, TableDescribesTheTransport) {
  EXPECT_EQ(t_->abi_major, uint32_t(PB_TRANSPORT_ABI_MAJOR));
  EXPECT_EQ(std::string(t_->name), "ethernet");
  EXPECT_GE(t_->struct_size, sizeof(pb_transport_v1));
  pb_plugin_ctx* ctx = makeContext(0);
  ASSERT_NE(ctx, nullptr);
  pb_transport_properties_v1 props{};
  props.struct_size = sizeof(props);
  ASSERT_EQ(t_->properties(ctx, &props), PB_OK);
  EXPECT_EQ(props.mem_types, uint32_t(PB_MEM_HOST));
  EXPECT_EQ(props.flags, uint32_t(PB_CAP_ONE_SIDED_WRITE | PB_CAP_ATOMIC_SIGNAL | PB_CAP_NEEDS_PROXY |
                                  PB_CAP_SIGNAL_NOTIFY | PB_CAP_CHEAP_REGISTRATION));
  EXPECT_GT(props.bandwidth_gbps, 0.0);
  EXPECT_GT(props.latency_us, 0.0);
  EXPECT_GT(props.max_address_size, 0u);
  EXPECT_GT(props.max_rkey_size, 0u);
  EXPECT_STREQ(t_->last_error(ctx), "");
}

TEST_F(EthernetTest, DescribesItsInterfacesAndRoutesForPlugboardInfo) {
  ASSERT_NE(t_->describe, nullptr);
  pb_plugin_ctx* ctx = makeContext(0, {{"ifname", "lo"}});
  ASSERT_NE(ctx, nullptr);
  size_t needed = 0;
  ASSERT_EQ(t_->describe(ctx, nullptr, 0, &needed), PB_ERR_NOMEM);
  ASSERT_GT(needed, 1u);
  char small[4] = "abc";
  EXPECT_EQ(t_->describe(ctx, small, sizeof small, &needed), PB_ERR_NOMEM);
  EXPECT_STREQ(small, "abc") << "a buffer too small is left alone";
  std::string text(needed, 'x');
  ASSERT_EQ(t_->describe(ctx, text.data(), text.size(), &needed), PB_OK) << error(ctx);
  EXPECT_EQ(text.back(), '\0');
  for (const char* part : {"interfaces up: ", "lo (loopback) 127.0.0.1", "ifname 'lo' selects: lo", "same-host peers over: lo",
                           "other hosts over: nothing (no selected interface leaves the host)"})
    EXPECT_NE(text.find(part), std::string::npos) << part << " not in:\n" << text;
  size_t none = 0;
  EXPECT_EQ(t_->describe(nullptr, nullptr, 0, &none), PB_ERR_INVALID);
}

TEST_F(EthernetTest, DeclaresItsSettings) {
  ASSERT_NE(makeContext(0), nullptr);
  auto& declared = hosts_.back()->declared;
  ASSERT_EQ(declared.count("ifname"), 1u);
  EXPECT_EQ(declared["ifname"].type, PB_SETTING_STRING);
  EXPECT_EQ(declared["ifname"].defaultValue, "");
  EXPECT_EQ(declared["ifname"].rankLocal, 1);
  ASSERT_EQ(declared.count("socket_buffer_bytes"), 1u);
  EXPECT_EQ(declared["socket_buffer_bytes"].type, PB_SETTING_INT);
  ASSERT_EQ(declared.count("caller_send_bytes"), 1u);
  EXPECT_EQ(declared["caller_send_bytes"].type, PB_SETTING_STRING);
  EXPECT_EQ(declared["caller_send_bytes"].defaultValue, "auto");
  ASSERT_EQ(declared.count("ack_timeout"), 1u);
  EXPECT_EQ(declared["ack_timeout"].type, PB_SETTING_DOUBLE);
  EXPECT_EQ(declared["ack_timeout"].defaultValue, "30");
}

TEST_F(EthernetTest, BadSettingValueFailsInit) {
  for (const auto& [key, value] : std::map<std::string, std::string>{{"socket_buffer_bytes", "lots"},
                                                                       {"caller_send_bytes", "-5"},
                                                                       {"ack_timeout", "-1"}}) {
    hosts_.push_back(std::make_unique<FakeHost>(0, "testhost", std::map<std::string, std::string>{{key, value}}));
    pb_plugin_ctx* ctx = nullptr;
    EXPECT_EQ(t_->init(&hosts_.back()->services, &ctx), PB_ERR_INVALID) << key;
    EXPECT_NE(std::string(t_->last_error(nullptr)).find(key + " = '" + value + "'"), std::string::npos)
        << t_->last_error(nullptr);
  }
}

TEST_F(EthernetTest, SameHostPeerUsesLoopbackByDefault) {
  pb_plugin_ctx* ctx = makeContext(0);
  Peer peer(0, 1, "testhost", "testhost");
  int cost = -7;
  char reason[256] = "x";
  ASSERT_EQ(t_->can_connect(ctx, &peer.info, &cost, reason, sizeof(reason)), PB_OK);
  EXPECT_GE(cost, 0);
}

TEST_F(EthernetTest, IfnameMatchingNothingIsUnreachableWithReason) {
  pb_plugin_ctx* ctx = makeContext(0, {{"ifname", "nosuchif"}});
  Peer peer(0, 1, "testhost", "otherhost");
  int cost = 0;
  char reason[512] = "";
  ASSERT_EQ(t_->can_connect(ctx, &peer.info, &cost, reason, sizeof(reason)), PB_OK);
  EXPECT_LT(cost, 0);
  EXPECT_NE(std::string(reason).find("no interface matches ifname 'nosuchif' (available: "), std::string::npos)
      << reason;
  EXPECT_NE(std::string(reason).find("lo"), std::string::npos) << reason;
  // Even a same-host peer needs a matching interface once ifname is set.
  Peer local(0, 1, "testhost", "testhost");
  ASSERT_EQ(t_->can_connect(ctx, &local.info, &cost, reason, sizeof(reason)), PB_OK);
  EXPECT_LT(cost, 0);
}

TEST_F(EthernetTest, LoopbackOnlyCannotReachAnotherHost) {
  pb_plugin_ctx* ctx = makeContext(0, {{"ifname", "=lo"}});
  Peer peer(0, 3, "testhost", "otherhost");
  int cost = 0;
  char reason[512] = "";
  ASSERT_EQ(t_->can_connect(ctx, &peer.info, &cost, reason, sizeof(reason)), PB_OK);
  EXPECT_LT(cost, 0);
  EXPECT_NE(std::string(reason).find("interface lo is loopback but rank 3 is on host otherhost"), std::string::npos)
      << reason;
  char tiny[8];
  ASSERT_EQ(t_->can_connect(ctx, &peer.info, &cost, tiny, sizeof(tiny)), PB_OK);
  EXPECT_EQ(std::strlen(tiny), sizeof(tiny) - 1) << "reason must be truncated and terminated";
}

TEST_F(EthernetTest, ExplicitLoopbackIfnameConnects) {
  pb_plugin_ctx* ctx0 = makeContext(0, {{"ifname", "lo"}});
  pb_plugin_ctx* ctx1 = makeContext(1, {{"ifname", "=lo"}, {"socket_buffer_bytes", "262144"}});
  pb_conn *c0 = nullptr, *c1 = nullptr;
  connectPair(ctx0, ctx1, &c0, &c1);
}

// ---- memory registration ---------------------------------------------------

TEST_F(EthernetTest, CudaMemoryIsUnsupportedWithReason) {
  pb_plugin_ctx* ctx = makeContext(0);
  char buf[64];
  pb_mr* mr = reinterpret_cast<pb_mr*>(buf);
  EXPECT_EQ(t_->register_memory(ctx, buf, sizeof(buf), PB_MEM_CUDA, &mr), PB_ERR_UNSUPPORTED);
  EXPECT_EQ(mr, nullptr);
  EXPECT_NE(error(ctx).find("ethernet cannot register CUDA memory"), std::string::npos) << error(ctx);
}

TEST_F(EthernetTest, RkeyRoundTripAndBadKeys) {
  pb_plugin_ctx* ctx0 = makeContext(0);
  pb_plugin_ctx* ctx1 = makeContext(1);
  pb_conn *c0 = nullptr, *c1 = nullptr;
  connectPair(ctx0, ctx1, &c0, &c1);
  std::vector<uint8_t> mem(100);
  pb_mr* mr = reg(ctx1, mem.data(), mem.size());
  uint8_t buf[128];
  size_t len = 4;
  EXPECT_EQ(t_->pack_rkey(ctx1, mr, buf, &len), PB_ERR_INVALID) << "buffer too small";
  pb_transport_properties_v1 props{};
  props.struct_size = sizeof(props);
  ASSERT_EQ(t_->properties(ctx1, &props), PB_OK);
  EXPECT_EQ(len, props.max_rkey_size) << "a failed pack reports the size it needs";
  len = sizeof(buf);
  ASSERT_EQ(t_->pack_rkey(ctx1, mr, buf, &len), PB_OK);
  pb_rkey* rkey = nullptr;
  EXPECT_EQ(t_->import_rkey(c0, buf, len - 1, &rkey), PB_ERR_INVALID);
  EXPECT_NE(error(ctx0).find("import_rkey"), std::string::npos) << error(ctx0);
  buf[0] ^= 0xff;
  EXPECT_EQ(t_->import_rkey(c0, buf, len, &rkey), PB_ERR_INVALID);
  EXPECT_NE(error(ctx0).find("bad magic"), std::string::npos) << error(ctx0);
}

// ---- data path -------------------------------------------------------------

TEST_F(EthernetPairTest, WriteSignalLandsDataBeforeCounterWithOneSequenceNumber) {
  // Small (sent inline by post) and large (sent by the sender thread) payloads.
  for (size_t size : {size_t(24), size_t(3) << 20}) {
    std::vector<uint8_t> src(size), dst(size, 0);
    std::vector<uint64_t> counter(2, 0);
    pb_mr* mrSrc = reg(ctx0_, src.data(), size);
    pb_rkey* rkDst = remoteKey(ctx1_, reg(ctx1_, dst.data(), size), c0_);
    pb_rkey* rkCounter = remoteKey(ctx1_, reg(ctx1_, counter.data(), 2 * sizeof(uint64_t)), c0_);
    uint64_t done = 0;
    ASSERT_EQ(t_->proxy_progress(c0_, &done), PB_OK);
    for (uint64_t round = 1; round <= 8; ++round) {
      fillPattern(src.data(), size, unsigned(round + size));
      ASSERT_EQ(t_->write_signal(c0_, mrSrc, 0, rkDst, 0, size, rkCounter, 8, 5), PB_OK) << error(ctx0_);
      waitCounter(&counter[1], 5 * round);
      ASSERT_EQ(std::memcmp(dst.data(), src.data(), size), 0) << size << " B round " << round << ": counter before data";
      waitCompleted(ctx0_, c0_, done + round);  // one sequence number per fused operation
    }
    EXPECT_EQ(counter[0], 0u);
    EXPECT_EQ(t_->write_signal(c0_, mrSrc, 0, rkDst, 0, size, rkCounter, 4, 1), PB_ERR_INVALID)
        << "a misaligned signal target must be refused";
  }
}

TEST_F(EthernetTest, EveryFrameLandsWhoeverSendsIt) {
  // caller_send_bytes decides which frames the posting/polling thread sends
  // and which the sender thread does; the stream must be the same either way,
  // including a caller that stops at a large frame the sender thread takes.
  for (const char* mode : {"0", "all", "65536"}) {
    SCOPED_TRACE(std::string("caller_send_bytes=") + mode);
    std::map<std::string, std::string> settings{{"caller_send_bytes", mode}};
    pb_plugin_ctx* ctx0 = makeContextWith(0, settings);
    pb_plugin_ctx* ctx1 = makeContextWith(1, settings);
    pb_conn *c0 = nullptr, *c1 = nullptr;
    ASSERT_NO_FATAL_FAILURE(connectPair(ctx0, ctx1, &c0, &c1));
    const std::vector<size_t> sizes = {8, 200 * 1024, 40, 70 * 1024, 64 * 1024, 3, 1 << 20, 16};
    size_t total = 0;
    for (size_t n : sizes) total += n;
    std::vector<uint8_t> src(total), dst(total, 0);
    std::vector<uint64_t> counter(1, 0);
    fillPattern(src.data(), total, 7);
    pb_mr* mrSrc = reg(ctx0, src.data(), total);
    pb_rkey* rkDst = remoteKey(ctx1, reg(ctx1, dst.data(), total), c0);
    pb_rkey* rkCounter = remoteKey(ctx1, reg(ctx1, counter.data(), sizeof(uint64_t)), c0);
    size_t at = 0;
    for (size_t n : sizes) {  // posted back to back: small ones queue behind large ones
      ASSERT_EQ(t_->write_signal(c0, mrSrc, at, rkDst, at, n, rkCounter, 0, 1), PB_OK) << error(ctx0);
      at += n;
    }
    waitCounter(&counter[0], sizes.size());
    EXPECT_EQ(std::memcmp(dst.data(), src.data(), total), 0);
    waitCompleted(ctx0, c0, sizes.size());
  }
}

// ---- failures and close ----------------------------------------------------

TEST_F(EthernetPairTest, CleanCloseIsNotAnError) {
  freeConn(c1_);
  uint64_t done = 0;
  // The peer said CLOSE: progress stays healthy, new posts are refused.
  pb_status st = PB_OK;
  auto deadline = Clock::now() + kTimeout;
  std::vector<uint8_t> src(8);
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  std::vector<uint8_t> dstMem(8);
  pb_mr* mrDst = reg(ctx1_, dstMem.data(), dstMem.size());
  pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
  // Wait until the CLOSE was received: a zero-byte write is then refused.
  EXPECT_EQ(t_->proxy_progress(c0_, &done), PB_OK) << error(ctx0_);
  while (Clock::now() < deadline) {
    st = t_->write(c0_, mrSrc, 0, rkDst, 0, 0);
    if (st != PB_OK) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(st, PB_ERR_REMOTE);
  std::string reason = error(ctx0_);
  EXPECT_NE(reason.find("rank 1 (host testhost) closed the ethernet connection"), std::string::npos) << reason;
  EXPECT_EQ(reason.find("unexpectedly"), std::string::npos) << reason;
}

TEST_F(EthernetPairTest, WriteIntoDeregisteredRegionIsABadMessage) {
  std::vector<uint8_t> src(32), dst(32);
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  pb_mr* mrDst = reg(ctx1_, dst.data(), dst.size());
  pb_rkey* rkDst = remoteKey(ctx1_, mrDst, c0_);
  deregister(ctx1_, mrDst);
  ASSERT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, 32), PB_OK);
  uint64_t done = 0;
  pb_status st = PB_OK;
  auto deadline = Clock::now() + kTimeout;
  while (st == PB_OK && Clock::now() < deadline) st = t_->proxy_progress(c1_, &done);
  EXPECT_EQ(st, PB_ERR_REMOTE);
  EXPECT_NE(error(ctx1_).find("bad message from rank 0 (host testhost)"), std::string::npos) << error(ctx1_);
  EXPECT_NE(error(ctx1_).find("not registered"), std::string::npos) << error(ctx1_);
  EXPECT_EQ(t_->proxy_progress(c1_, &done), PB_ERR_REMOTE) << "a connection error is final";
  waitCompleted(ctx0_, c0_, 1);  // src must outlive the send.
}

TEST_F(EthernetTest, BadPeerAddressIsInvalid) {
  pb_plugin_ctx* ctx = makeContext(0);
  std::vector<uint8_t> blob;
  pb_conn* conn = setup(ctx, 0, 1, &blob);
  ASSERT_NE(conn, nullptr);
  EXPECT_EQ(t_->proxy_connect(conn, blob.data(), blob.size() - 1), PB_ERR_INVALID);
  EXPECT_NE(error(ctx).find("from rank 1"), std::string::npos) << error(ctx);
  std::vector<uint8_t> wrong(blob.size(), 0x5a);
  EXPECT_EQ(t_->proxy_connect(conn, wrong.data(), wrong.size()), PB_ERR_INVALID);
  EXPECT_NE(error(ctx).find("bad magic"), std::string::npos) << error(ctx);
}

TEST_F(EthernetTest, StrangerOnTheListenerIsRejected) {
  pb_plugin_ctx* ctx0 = makeContext(0);
  pb_plugin_ctx* ctx1 = makeContext(1);
  std::vector<uint8_t> blob0, blob1;
  pb_conn* c0 = setup(ctx0, 0, 1, &blob0);
  pb_conn* c1 = setup(ctx1, 1, 0, &blob1);
  ASSERT_TRUE(c0 && c1);
  ASSERT_EQ(blob1.size(), 32u);
  // Documented blob layout: family u16 at 12, port u16 at 14, address at 16.
  ASSERT_EQ(blob1[12], 4);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(blob1[14] | (blob1[15] << 8)));
  std::memcpy(&addr.sin_addr, &blob1[16], 4);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << strerror(errno);
  const char junk[25] = "GET / HTTP/1.0\r\nHost: x\n";  // 24 bytes: a hello's length
  ASSERT_EQ(send(fd, junk, sizeof(junk) - 1, 0), ssize_t(sizeof(junk) - 1));
  pb_status st = PB_IN_PROGRESS;
  auto deadline = Clock::now() + kTimeout;
  while (st == PB_IN_PROGRESS && Clock::now() < deadline) st = t_->proxy_connect(c1, blob0.data(), blob0.size());
  close(fd);
  EXPECT_EQ(st, PB_ERR_REMOTE);
  EXPECT_NE(error(ctx1).find("did not start with an ethernet hello"), std::string::npos) << error(ctx1);
}

/// Little-endian store, for speaking the documented wire format by hand.
template <typename T>
void putLE(std::vector<uint8_t>& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(uint8_t(uint64_t(v) >> (8 * i)));
}

template <typename T>
T getLE(const uint8_t* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= uint64_t(p[i]) << (8 * i);
  return T(v);
}

/// Plays rank 0 by hand over raw sockets, so the receiver's own checks can
/// be hit with frames the plugin's sender would never produce.
class RawPeer {
 public:
  /// stripes: how many stripe sockets this rank 0 announces and opens.
  explicit RawPeer(uint32_t stripes = 0) : stripes_(stripes) {
    listenFd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = loopback(0);
    EXPECT_EQ(bind(listenFd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(listenFd_, 4), 0);
    socklen_t len = sizeof(addr);
    getsockname(listenFd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~RawPeer() { hangUp(); }

  /// Closes every socket: the plugin sees the peer go away.
  void hangUp() {
    for (int* fd : {&listenFd_, &out_, &in_})
      if (*fd >= 0) close(std::exchange(*fd, -1));
    for (int& fd : stripeOut_)
      if (fd >= 0) close(std::exchange(fd, -1));
  }

  /// Address blob: "PBEA", version 2, rank 0, family 4, port, 127.0.0.1.
  std::vector<uint8_t> blob() const {
    std::vector<uint8_t> b;
    putLE<uint32_t>(b, 0x41454250);
    putLE<uint32_t>(b, kWireVersion);
    putLE<int32_t>(b, 0);
    putLE<uint16_t>(b, 4);
    putLE<uint16_t>(b, port_);
    for (uint8_t byte : {127, 0, 0, 1}) b.push_back(byte);
    b.resize(32, 0);
    return b;
  }

  /// Connects to the plugin's listener and greets it as rank 0 to rank 1:
  /// the frame stream, then each stripe socket (stripe sockets first when
  /// stripesFirst, to show the plugin files them by number).
  void connectTo(const std::vector<uint8_t>& pluginBlob, bool stripesFirst = false) {
    const uint16_t port = getLE<uint16_t>(&pluginBlob[14]);
    stripeOut_.assign(stripes_, -1);
    if (!stripesFirst) {
      ASSERT_NO_FATAL_FAILURE(out_ = greet(port, 0));
    }
    for (uint32_t i = 0; i < stripes_; ++i) ASSERT_NO_FATAL_FAILURE(stripeOut_[i] = greet(port, i + 1));
    if (stripesFirst) {
      ASSERT_NO_FATAL_FAILURE(out_ = greet(port, 0));
    }
  }

  /// Closes stripe socket `socket` (1-based): it ends at the plugin.
  void closeStripe(uint32_t socket) { close(std::exchange(stripeOut_.at(socket - 1), -1)); }

  /// Sends a Piece frame (type 7) on stripe socket `socket` (1-based).
  void piece(uint32_t socket, uint64_t seq, uint64_t region, uint64_t key, uint64_t offset, uint64_t length,
             const std::vector<uint8_t>& payload) {
    std::vector<uint8_t> f;
    encodeFrame(f, 7, seq, region, key, offset, length, payload);
    ASSERT_EQ(send(stripeOut_.at(socket - 1), f.data(), f.size(), MSG_NOSIGNAL), ssize_t(f.size()));
  }

  /// A socket connected to port and greeted as our socket number `socket`.
  int greet(uint16_t port, uint32_t socketNumber) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = loopback(port);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << strerror(errno);
    std::vector<uint8_t> hello;
    putLE<uint32_t>(hello, 0x48454250);
    putLE<uint32_t>(hello, kWireVersion);
    putLE<int32_t>(hello, 0);
    putLE<int32_t>(hello, 1);
    putLE<uint32_t>(hello, socketNumber);  // 0: the frame stream
    putLE<uint32_t>(hello, stripes_);
    EXPECT_EQ(send(fd, hello.data(), hello.size(), 0), ssize_t(hello.size()));
    return fd;
  }

  /// Accepts the plugin's connection and checks its hello (rank 1 to rank 0).
  void acceptFrom() {
    in_ = accept(listenFd_, nullptr, nullptr);
    ASSERT_GE(in_, 0);
    uint8_t hello[24];
    ASSERT_EQ(recv(in_, hello, sizeof(hello), MSG_WAITALL), ssize_t(sizeof(hello)));
    EXPECT_EQ(getLE<uint32_t>(hello), 0x48454250u);
    EXPECT_EQ(getLE<uint32_t>(hello + 4), kWireVersion);
    EXPECT_EQ(getLE<int32_t>(hello + 8), 1);
    EXPECT_EQ(getLE<int32_t>(hello + 12), 0);
    EXPECT_EQ(getLE<uint32_t>(hello + 16), 0u);  // the frame stream
    EXPECT_EQ(getLE<uint32_t>(hello + 20), 0u);  // no stripe sockets: makeRawPeerContext
  }

  /// Appends one 48-byte frame header and its payload to out.
  static void encodeFrame(std::vector<uint8_t>& out, uint16_t type, uint64_t seq, uint64_t region, uint64_t key,
                          uint64_t offset, uint64_t length, const std::vector<uint8_t>& payload = {}) {
    putLE<uint32_t>(out, 0x46454250);
    putLE<uint16_t>(out, type);
    putLE<uint16_t>(out, 0);
    for (uint64_t v : {seq, region, key, offset, length}) putLE<uint64_t>(out, v);
    out.insert(out.end(), payload.begin(), payload.end());
  }

  /// Sends one 48-byte frame header and its payload.
  void frame(uint16_t type, uint64_t seq, uint64_t region, uint64_t key, uint64_t offset, uint64_t length,
             const std::vector<uint8_t>& payload = {}) {
    std::vector<uint8_t> f;
    encodeFrame(f, type, seq, region, key, offset, length, payload);
    sendBytes(f.data(), f.size());
  }

  /// Sends bytes as they are (no framing).
  void sendBytes(const uint8_t* data, size_t size) {
    ASSERT_EQ(send(out_, data, size, MSG_NOSIGNAL), ssize_t(size));
  }

 private:
  static sockaddr_in loopback(uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
  }
  int listenFd_ = -1, out_ = -1, in_ = -1;
  uint32_t stripes_ = 0;
  std::vector<int> stripeOut_;
  uint16_t port_ = 0;
};

TEST_F(EthernetTest, ReceiverChecksEveryFrameFromTheWire) {
  pb_plugin_ctx* ctx1 = makeRawPeerContext();
  RawPeer peer;
  pb_conn* c1 = nullptr;
  ASSERT_NO_FATAL_FAILURE(connectRawPeer(ctx1, peer, &c1));
  pb_status st = PB_OK;
  auto deadline = Clock::now() + kTimeout;

  std::vector<uint64_t> mem(4, 0);  // 32 bytes: data in [0, 24), a counter at 24.
  pb_mr* mr = reg(ctx1, mem.data(), 32);
  uint8_t key[64];
  size_t keyLen = sizeof(key);
  ASSERT_EQ(t_->pack_rkey(ctx1, mr, key, &keyLen), PB_OK);
  ASSERT_EQ(keyLen, 40u);
  uint64_t region = getLE<uint64_t>(key + 8), secret = getLE<uint64_t>(key + 16);
  EXPECT_EQ(getLE<uint64_t>(key + 24), uint64_t(reinterpret_cast<uintptr_t>(mem.data())));
  EXPECT_EQ(getLE<uint64_t>(key + 32), 32u);

  // Well-formed frames, as documented, land.
  std::vector<uint8_t> payload = {1, 2, 3, 4, 5, 6, 7, 8};
  peer.frame(1, 1, region, secret, 8, 8, payload);
  peer.frame(2, 2, region, secret, 24, 42);
  waitCounter(&mem[3], 42);
  EXPECT_EQ(std::memcmp(&mem[1], payload.data(), 8), 0);
  uint64_t done = 0;
  EXPECT_EQ(t_->proxy_progress(c1, &done), PB_OK) << error(ctx1);

  // A write overrunning the region is refused before any byte is stored.
  peer.frame(1, 3, region, secret, 28, 8, payload);
  st = PB_OK;
  deadline = Clock::now() + kTimeout;
  while (st == PB_OK && Clock::now() < deadline) st = t_->proxy_progress(c1, &done);
  EXPECT_EQ(st, PB_ERR_REMOTE);
  EXPECT_NE(error(ctx1).find("bad message from rank 0 (host testhost): write of 8 bytes at offset 28 overruns"),
            std::string::npos)
      << error(ctx1);
  EXPECT_EQ(mem[3], 42u);
}

/// Rank 1 connected to a RawPeer with two stripe sockets, and a 64 KiB
/// region plus a counter region on rank 1 with their (id, key) pairs.
class EthernetStripedRawTest : public EthernetTest {
 protected:
  void SetUp() override {
    EthernetTest::SetUp();
    if (HasFatalFailure()) return;
    ctx1_ = makeRawPeerContext();
    ASSERT_NE(ctx1_, nullptr);
    ASSERT_NO_FATAL_FAILURE(connectRawPeer(ctx1_, peer_, &c1_));
    data_.assign(kDataBytes, 0);
    counter_.assign(2, 0);
    std::tie(dataRegion_, dataKey_) = idAndKey(reg(ctx1_, data_.data(), data_.size()));
    std::tie(counterRegion_, counterKey_) = idAndKey(reg(ctx1_, counter_.data(), 16));
  }

  /// Region id and key from the documented packed rkey.
  std::pair<uint64_t, uint64_t> idAndKey(pb_mr* mr) {
    uint8_t key[64];
    size_t keyLen = sizeof(key);
    EXPECT_EQ(t_->pack_rkey(ctx1_, mr, key, &keyLen), PB_OK);
    return {getLE<uint64_t>(key + 8), getLE<uint64_t>(key + 16)};
  }

  /// A StripedSignal frame (type 6): header and SignalExt adding value to counter_[1].
  void stripedSignalFrame(uint64_t seq, uint64_t offset, uint64_t length, uint64_t value) {
    std::vector<uint8_t> f;
    RawPeer::encodeFrame(f, 6, seq, dataRegion_, dataKey_, offset, length);
    for (uint64_t v : {counterRegion_, counterKey_, uint64_t(8), value}) putLE<uint64_t>(f, v);
    peer_.sendBytes(f.data(), f.size());
  }

  /// Polls c1_ until it fails (or the timeout); its status.
  pb_status pollUntilFailure() {
    pb_status st = PB_OK;
    uint64_t done = 0;
    auto deadline = Clock::now() + kTimeout;
    while (st == PB_OK && Clock::now() < deadline) st = t_->proxy_progress(c1_, &done);
    return st;
  }

  static constexpr size_t kDataBytes = 64 * 1024;
  RawPeer peer_{2};
  pb_plugin_ctx* ctx1_ = nullptr;
  pb_conn* c1_ = nullptr;
  std::vector<uint8_t> data_;
  std::vector<uint64_t> counter_;
  uint64_t dataRegion_ = 0, dataKey_ = 0, counterRegion_ = 0, counterKey_ = 0;
};

TEST_F(EthernetStripedRawTest, SignalWaitsForEveryPieceOfAStripedWrite) {
  // 12000 bytes over 2 stripe sockets: [0, 8192) on socket 1, [8192, 12000) on 2.
  std::vector<uint8_t> bytes(12000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i * 7 + 1);
  stripedSignalFrame(1, 100, bytes.size(), 9);
  peer_.piece(2, 1, dataRegion_, dataKey_, 100, bytes.size(), {bytes.begin() + 8192, bytes.end()});
  uint64_t done = 0;
  for (auto until = Clock::now() + std::chrono::milliseconds(100); Clock::now() < until;)
    ASSERT_EQ(t_->proxy_progress(c1_, &done), PB_OK) << error(ctx1_);
  EXPECT_EQ(__atomic_load_n(&counter_[1], __ATOMIC_ACQUIRE), 0u) << "signal applied before piece 1 landed";
  peer_.piece(1, 1, dataRegion_, dataKey_, 100, bytes.size(), {bytes.begin(), bytes.begin() + 8192});
  waitCounter(&counter_[1], 9);
  EXPECT_EQ(std::memcmp(data_.data() + 100, bytes.data(), bytes.size()), 0);
  EXPECT_EQ(data_[99], 0);
  EXPECT_EQ(data_[100 + bytes.size()], 0);
}

TEST_F(EthernetStripedRawTest, PieceThatDisagreesWithItsFrameFailsByName) {
  std::vector<uint8_t> bytes(12000, 5);
  stripedSignalFrame(1, 0, bytes.size(), 1);
  peer_.piece(1, 1, dataRegion_, dataKey_, 0, bytes.size(), {bytes.begin(), bytes.begin() + 8192});
  peer_.piece(2, 1, dataRegion_, dataKey_, 4096, bytes.size(), {bytes.begin() + 8192, bytes.end()});
  EXPECT_EQ(pollUntilFailure(), PB_ERR_REMOTE);
  EXPECT_NE(error(ctx1_).find("bad message from rank 0 (host testhost): stripe socket 2 delivered a piece of "
                              "write seq 1 (region"),
            std::string::npos)
      << error(ctx1_);
  EXPECT_NE(error(ctx1_).find("offset 4096, 12000 bytes) where the frame stream expects write seq 1"),
            std::string::npos)
      << error(ctx1_);
  EXPECT_EQ(counter_[1], 0u);
}

TEST_F(EthernetStripedRawTest, PieceOverrunningItsRegionIsRefusedBeforeAnyByteIsStored) {
  std::vector<uint8_t> bytes(8192, 5);
  peer_.piece(1, 1, dataRegion_, dataKey_, kDataBytes - 100, 12000, bytes);
  EXPECT_EQ(pollUntilFailure(), PB_ERR_REMOTE);
  EXPECT_NE(error(ctx1_).find("bad message from rank 0 (host testhost) on ethernet stripe socket 1: striped "
                              "write of 12000 bytes at offset 65436 overruns region"),
            std::string::npos)
      << error(ctx1_);
  EXPECT_TRUE(std::all_of(data_.begin(), data_.end(), [](uint8_t b) { return b == 0; }));
}

TEST_F(EthernetStripedRawTest, StripeSocketThatEndsBeforeItsPieceFailsTheWrite) {
  std::vector<uint8_t> bytes(12000, 5);
  stripedSignalFrame(1, 0, bytes.size(), 1);
  peer_.piece(1, 1, dataRegion_, dataKey_, 0, bytes.size(), {bytes.begin(), bytes.begin() + 8192});
  peer_.closeStripe(2);
  EXPECT_EQ(pollUntilFailure(), PB_ERR_REMOTE);
  EXPECT_NE(error(ctx1_).find("rank 0 (host testhost): stripe socket 2 ended before its piece of write seq 1"),
            std::string::npos)
      << error(ctx1_);
  EXPECT_EQ(counter_[1], 0u);
}

TEST_F(EthernetTest, StripeSocketsMayArriveBeforeTheFrameStream) {
  pb_plugin_ctx* ctx1 = makeRawPeerContext();
  RawPeer peer(3);
  std::vector<uint8_t> blob1;
  pb_conn* c1 = setup(ctx1, 1, 0, &blob1);
  ASSERT_NE(c1, nullptr);
  auto rawBlob = peer.blob();
  ASSERT_NO_FATAL_FAILURE(peer.connectTo(blob1, /*stripesFirst=*/true));
  pb_status st = PB_IN_PROGRESS;
  auto deadline = Clock::now() + kTimeout;
  while (st == PB_IN_PROGRESS && Clock::now() < deadline) st = t_->proxy_connect(c1, rawBlob.data(), rawBlob.size());
  EXPECT_EQ(st, PB_OK) << error(ctx1);
  ASSERT_NO_FATAL_FAILURE(peer.acceptFrom());
}

// A peer may post striped writes the moment its side of the connection is
// up (a failover resends at once), so pieces can land while this side is
// still making its stripe receivers. Each lane's thread used to run the
// frame parser as soon as it landed a piece: a write completed on the lanes
// made so far, the later lanes' pieces lagged, and the next striped write
// failed the connection ("stripe socket 3 delivered a piece of write seq 1
// where the frame stream expects write seq 5", seen on an H200 with 4
// stripes). Here both writes and all their pieces wait in the sockets before
// the connect; 16 stripes and 20 rounds make the old race near certain.
TEST_F(EthernetTest, StripedWritesSentBeforeTheConnectEndsLandWhole) {
  constexpr uint32_t kStripes = 16;
  constexpr size_t kBytes = 64 * 1024;
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    pb_plugin_ctx* ctx1 = makeRawPeerContext();
    ASSERT_NE(ctx1, nullptr);
    std::vector<uint8_t> data(2 * kBytes, 0), bytes(kBytes);
    std::vector<uint64_t> counter(1, 0);
    uint8_t key[64];
    size_t keyLen = sizeof(key);
    ASSERT_EQ(t_->pack_rkey(ctx1, reg(ctx1, data.data(), data.size()), key, &keyLen), PB_OK);
    const uint64_t region = getLE<uint64_t>(key + 8), regionKey = getLE<uint64_t>(key + 16);
    keyLen = sizeof(key);
    ASSERT_EQ(t_->pack_rkey(ctx1, reg(ctx1, counter.data(), 8), key, &keyLen), PB_OK);
    const uint64_t counterRegion = getLE<uint64_t>(key + 8), counterKey = getLE<uint64_t>(key + 16);
    RawPeer peer(kStripes);
    std::vector<uint8_t> blob1;
    pb_conn* c1 = setup(ctx1, 1, 0, &blob1);
    ASSERT_NE(c1, nullptr);
    ASSERT_NO_FATAL_FAILURE(peer.connectTo(blob1));
    for (uint64_t seq = 1; seq <= 2; ++seq) {  // each adds 1 to the counter once every piece landed
      for (size_t i = 0; i < kBytes; ++i) bytes[i] = uint8_t(i * 13 + seq + round);
      std::vector<uint8_t> f;
      const uint64_t offset = (seq - 1) * kBytes;
      RawPeer::encodeFrame(f, 6, seq, region, regionKey, offset, kBytes);
      for (uint64_t v : {counterRegion, counterKey, uint64_t(0), uint64_t(1)}) putLE<uint64_t>(f, v);
      peer.sendBytes(f.data(), f.size());
      for (uint32_t lane = 0; lane < kStripes; ++lane) {  // the plugin's cut: 4 KiB pieces, one a socket
        const size_t from = lane * kBytes / kStripes, to = (lane + 1) * kBytes / kStripes;
        peer.piece(lane + 1, seq, region, regionKey, offset, kBytes, {bytes.begin() + from, bytes.begin() + to});
      }
    }
    const auto rawBlob = peer.blob();
    pb_status st = PB_IN_PROGRESS;
    for (auto deadline = Clock::now() + kTimeout; st == PB_IN_PROGRESS && Clock::now() < deadline;)
      st = t_->proxy_connect(c1, rawBlob.data(), rawBlob.size());
    ASSERT_EQ(st, PB_OK) << error(ctx1);
    ASSERT_NO_FATAL_FAILURE(peer.acceptFrom());
    uint64_t done = 0;
    for (auto deadline = Clock::now() + kTimeout; __atomic_load_n(&counter[0], __ATOMIC_ACQUIRE) < 2;) {
      ASSERT_EQ(t_->proxy_progress(c1, &done), PB_OK) << error(ctx1);
      ASSERT_LT(Clock::now(), deadline) << "the writes' signals never came";
    }
    EXPECT_EQ(data[kBytes - 1], uint8_t((kBytes - 1) * 13 + 1 + round));
    EXPECT_EQ(data[2 * kBytes - 1], bytes[kBytes - 1]);
    EXPECT_EQ(std::memcmp(data.data() + kBytes, bytes.data(), kBytes), 0);
  }
}

TEST_F(EthernetTest, OneSideStripingAndTheOtherNotBothDeliver) {
  // stripe_sockets is rank-local: each direction follows its sender's setting.
  pb_plugin_ctx* ctx0 = makeContext(0, {{"stripe_sockets", "2"}, {"stripe_bytes", "65536"}});
  pb_plugin_ctx* ctx1 = makeContext(1, {{"stripe_sockets", "0"}});
  pb_conn *c0 = nullptr, *c1 = nullptr;
  ASSERT_NO_FATAL_FAILURE(connectPair(ctx0, ctx1, &c0, &c1));
  const size_t size = (1 << 20) + 333;
  struct Side {
    pb_plugin_ctx* ctx;
    pb_conn* conn;
    std::vector<uint8_t> src, dst;
    std::vector<uint64_t> counter;
  } sides[2] = {{ctx0, c0, {}, {}, {}}, {ctx1, c1, {}, {}, {}}};
  for (Side& side : sides) {
    side.src.resize(size);
    side.dst.assign(size, 0);
    side.counter.assign(1, 0);
    fillPattern(side.src.data(), size, unsigned(size + (side.ctx == ctx0)));
  }
  for (int from = 0; from < 2; ++from) {
    Side& a = sides[from];
    Side& b = sides[1 - from];
    pb_mr* mrSrc = reg(a.ctx, a.src.data(), size);
    pb_rkey* rkDst = remoteKey(b.ctx, reg(b.ctx, b.dst.data(), size), a.conn);
    pb_rkey* rkCounter = remoteKey(b.ctx, reg(b.ctx, b.counter.data(), 8), a.conn);
    ASSERT_EQ(t_->write_signal(a.conn, mrSrc, 0, rkDst, 0, size, rkCounter, 0, 1), PB_OK) << error(a.ctx);
    waitCounter(&b.counter[0], 1);
    EXPECT_EQ(std::memcmp(b.dst.data(), a.src.data(), size), 0) << "from rank " << from;
    // The source may go only once the sender reports the write complete
    // (transport.h), which is also what orders its sending threads' last
    // reads before the buffer is freed.
    waitCompleted(a.ctx, a.conn, 1);
  }
}

TEST_F(EthernetTest, ReceiverParsesFramesHoweverTheStreamIsCut) {
  // The receiver reads ahead (several frames per read) and reads large
  // payloads straight into place; every frame must land whatever pieces
  // the stream arrives in: split inside headers, signal extensions and
  // payloads, or many frames at once.
  pb_plugin_ctx* ctx1 = makeRawPeerContext();
  RawPeer peer;
  pb_conn* c1 = nullptr;
  ASSERT_NO_FATAL_FAILURE(connectRawPeer(ctx1, peer, &c1));
  constexpr size_t kData = 64 * 1024;
  std::vector<uint8_t> mem(kData + 8, 0);  // data, then a counter
  pb_mr* mr = reg(ctx1, mem.data(), mem.size());
  uint8_t key[64];
  size_t keyLen = sizeof(key);
  ASSERT_EQ(t_->pack_rkey(ctx1, mr, key, &keyLen), PB_OK);
  const uint64_t region = getLE<uint64_t>(key + 8), secret = getLE<uint64_t>(key + 16);

  std::vector<uint8_t> stream, expected(kData, 0);
  uint64_t seq = 0, counter = 0, rng = 12345;
  auto next = [&rng](uint64_t n) { rng = rng * 6364136223846793005ull + 1442695040888963407ull; return (rng >> 33) % n; };
  for (int i = 0; i < 60; ++i) {
    const size_t size = i % 10 == 9 ? 9000 + next(20000) : next(300);  // some large enough to be read in place
    const size_t offset = next(kData - size);
    std::vector<uint8_t> payload(size);
    for (auto& b : payload) b = uint8_t(next(256));
    std::copy(payload.begin(), payload.end(), expected.begin() + offset);
    if (i % 3 == 0) {  // WriteSignal: header, SignalExt, payload
      RawPeer::encodeFrame(stream, 4, ++seq, region, secret, offset, size);
      for (uint64_t v : {region, secret, uint64_t(kData), uint64_t(i + 1)}) putLE<uint64_t>(stream, v);
      stream.insert(stream.end(), payload.begin(), payload.end());
      counter += i + 1;
    } else {
      RawPeer::encodeFrame(stream, 1, ++seq, region, secret, offset, size, payload);
    }
  }
  RawPeer::encodeFrame(stream, 2, ++seq, region, secret, kData, 1000);  // last: a plain signal
  counter += 1000;

  for (size_t at = 0, piece = 0; at < stream.size(); ++piece) {
    const size_t n = std::min(stream.size() - at, size_t(1 + next(piece % 5 == 0 ? 5000 : 70)));
    ASSERT_NO_FATAL_FAILURE(peer.sendBytes(stream.data() + at, n));
    at += n;
    if (piece % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));  // let a partial frame land
    uint64_t done = 0;
    ASSERT_EQ(t_->proxy_progress(c1, &done), PB_OK) << error(ctx1);  // the caller receives too, not only the thread
  }
  waitCounter(reinterpret_cast<uint64_t*>(&mem[kData]), counter);
  EXPECT_EQ(getLE<uint64_t>(&mem[kData]), counter);
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), mem.begin())) << "a payload landed wrong";
  uint64_t done = 0;
  EXPECT_EQ(t_->proxy_progress(c1, &done), PB_OK) << error(ctx1);
}

// Stream fuzzing: valid frame streams (writes, signals, write-signals into
// one region) mutated at random (bytes flipped, cut short, random bytes
// inserted, a piece repeated), sent in random pieces, then the peer hangs
// up. Whatever the mutation, the connection ends in PB_ERR_REMOTE naming
// the peer (a bad message, or the close), nothing lands outside the
// registered region, and nothing crashes (ASan/UBSan in CI).
TEST_F(EthernetTest, MutatedFrameStreamsFailByNameAndNeverStoreOutsideTheRegion) {
  constexpr size_t kGuard = 4096, kData = 2048;
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  auto next = [&rng](uint64_t n) { rng = rng * 6364136223846793005ull + 1442695040888963407ull; return (rng >> 33) % n; };
  for (int round = 0; round < 40; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    pb_plugin_ctx* ctx1 = makeRawPeerContext();
    RawPeer peer;
    pb_conn* c1 = nullptr;
    ASSERT_NO_FATAL_FAILURE(connectRawPeer(ctx1, peer, &c1));
    std::vector<uint8_t> mem(kGuard + kData + 8 + kGuard, 0xa5);
    pb_mr* mr = reg(ctx1, mem.data() + kGuard, kData + 8);
    uint8_t key[64];
    size_t keyLen = sizeof(key);
    ASSERT_EQ(t_->pack_rkey(ctx1, mr, key, &keyLen), PB_OK);
    const uint64_t region = getLE<uint64_t>(key + 8), secret = getLE<uint64_t>(key + 16);

    std::vector<uint8_t> stream;
    uint64_t seq = 0;
    for (int i = 0; i < 12; ++i) {
      const size_t size = next(400), offset = next(kData - size);
      std::vector<uint8_t> payload(size, uint8_t(i));
      if (i % 4 == 3) {
        RawPeer::encodeFrame(stream, 2, ++seq, region, secret, kData, 1);
      } else if (i % 4 == 2) {
        RawPeer::encodeFrame(stream, 4, ++seq, region, secret, offset, size);
        for (uint64_t v : {region, secret, uint64_t(kData), uint64_t(1)}) putLE<uint64_t>(stream, v);
        stream.insert(stream.end(), payload.begin(), payload.end());
      } else {
        RawPeer::encodeFrame(stream, 1, ++seq, region, secret, offset, size, payload);
      }
    }
    switch (round % 4) {
      case 0:  // flip bytes (headers, extensions or payloads)
        for (int k = 0; k < 1 + int(next(6)); ++k) stream[next(stream.size())] ^= uint8_t(1 + next(255));
        break;
      case 1: stream.resize(next(stream.size())); break;  // cut short
      case 2: {  // random bytes inserted
        std::vector<uint8_t> junk(1 + next(100));
        for (auto& b : junk) b = uint8_t(next(256));
        stream.insert(stream.begin() + long(next(stream.size())), junk.begin(), junk.end());
        break;
      }
      default: {  // a piece repeated (a replayed frame has a stale sequence number)
        const size_t at = next(stream.size()), n = 1 + next(std::min<size_t>(200, stream.size() - at));
        std::vector<uint8_t> piece(stream.begin() + long(at), stream.begin() + long(at + n));
        stream.insert(stream.begin() + long(at), piece.begin(), piece.end());
        break;
      }
    }
    for (size_t at = 0; at < stream.size();) {
      const size_t n = std::min(stream.size() - at, size_t(1 + next(300)));
      ASSERT_NO_FATAL_FAILURE(peer.sendBytes(stream.data() + at, n));
      at += n;
    }
    peer.hangUp();
    uint64_t done = 0;
    pb_status st = PB_OK;
    const auto deadline = Clock::now() + kTimeout;
    while (st == PB_OK && Clock::now() < deadline) st = t_->proxy_progress(c1, &done);
    EXPECT_EQ(st, PB_ERR_REMOTE) << error(ctx1);
    EXPECT_NE(error(ctx1).find("rank 0 (host testhost)"), std::string::npos) << error(ctx1);
    for (size_t i = 0; i < kGuard; ++i) {
      ASSERT_EQ(mem[i], 0xa5) << "a byte before the region changed, at " << i;
      ASSERT_EQ(mem[kGuard + kData + 8 + i], 0xa5) << "a byte after the region changed, at " << i;
    }
    freeConn(c1);  // before mem goes: no thread of the connection is left to touch it
    deregister(ctx1, mr);
  }
}

/// Reads a byte the plugin may be storing right now, with no signal to
/// synchronize on: only to learn that a payload started to land.
__attribute__((no_sanitize("thread"))) uint8_t peekByte(const uint8_t* p) {
  return *static_cast<const volatile uint8_t*>(p);
}

TEST_F(EthernetTest, DeregisteringDuringAStalledPayloadNeitherWaitsNorStoresMore) {
  pb_plugin_ctx* ctx1 = makeRawPeerContext();
  RawPeer peer;
  pb_conn* c1 = nullptr;
  ASSERT_NO_FATAL_FAILURE(connectRawPeer(ctx1, peer, &c1));
  pb_status st = PB_OK;
  auto deadline = Clock::now() + kTimeout;

  std::vector<uint8_t> mem(32, 0);
  pb_mr* mr = reg(ctx1, mem.data(), mem.size());
  uint8_t key[64];
  size_t keyLen = sizeof(key);
  ASSERT_EQ(t_->pack_rkey(ctx1, mr, key, &keyLen), PB_OK);
  uint64_t region = getLE<uint64_t>(key + 8), secret = getLE<uint64_t>(key + 16);

  // A 32-byte write of which the peer sends 8 bytes, then stalls.
  peer.frame(1, 1, region, secret, 0, 32, std::vector<uint8_t>(8, 0xab));
  deadline = Clock::now() + kTimeout;
  while (peekByte(&mem[7]) != 0xab && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(peekByte(&mem[7]), 0xab) << "the first 8 bytes never landed";

  // Deregistration must not wait for the stalled peer. Should it hang, the
  // peer hangs up, which releases it, and the test fails.
  auto deregistered = std::async(std::launch::async, [&] { return t_->deregister_memory(ctx1, mr); });
  bool returned = deregistered.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  if (!returned) peer.hangUp();
  ASSERT_TRUE(returned) << "deregister_memory waited on a peer stalled mid-payload";
  ASSERT_EQ(deregistered.get(), PB_OK) << error(ctx1);
  mrs_.erase(std::find(mrs_.begin(), mrs_.end(), std::make_pair(ctx1, mr)));

  // The rest of the payload must not be stored; the connection fails naming why.
  peer.frame(0, 0, 0, 0, 0, 0);  // 48 more bytes: the remaining 24 of the payload and more
  uint64_t done = 0;
  st = PB_OK;
  deadline = Clock::now() + kTimeout;
  while (st == PB_OK && Clock::now() < deadline) st = t_->proxy_progress(c1, &done);
  EXPECT_EQ(st, PB_ERR_INVALID);
  EXPECT_NE(error(ctx1).find("write of 32 bytes from rank 0 (host testhost) to region"), std::string::npos)
      << error(ctx1);
  EXPECT_NE(error(ctx1).find("was cut short: this rank deregistered the region while"), std::string::npos)
      << error(ctx1);
  EXPECT_EQ(std::count(mem.begin() + 8, mem.end(), 0), 24) << "bytes were stored after deregistration";
}

/// Rank 1 in a child process: set up, connect, then _exit() without free.
/// Blobs travel over pipes; the child exits only once the parent says it is
/// connected too. Returns the child's exit code (never returns in the child).
[[noreturn]] void crashingRank(const pb_transport_v1* t, int toParent, int fromParent) {
  FakeHost host(1, "crashhost", {});
  pb_plugin_ctx* ctx = nullptr;
  if (t->init(&host.services, &ctx) != PB_OK) _exit(10);
  Peer peer(1, 0, "crashhost", "testhost");
  pb_conn* conn = nullptr;
  uint8_t blob[256], parentBlob[256];
  size_t len = sizeof(blob);
  if (t->setup(ctx, &peer.info, &conn, blob, &len) != PB_OK) _exit(11);
  if (write(toParent, blob, len) != ssize_t(len)) _exit(12);
  ssize_t got = read(fromParent, parentBlob, sizeof(parentBlob));
  if (got <= 0) _exit(13);
  pb_status st = PB_IN_PROGRESS;
  auto deadline = Clock::now() + kTimeout;
  while (st == PB_IN_PROGRESS && Clock::now() < deadline) st = t->proxy_connect(conn, parentBlob, size_t(got));
  if (st != PB_OK) _exit(14);
  char go;
  if (read(fromParent, &go, 1) != 1) _exit(15);
  _exit(0);  // No free(): the parent must see a close without CLOSE.
}

TEST_F(EthernetTest, PeerThatDiesWithoutCloseIsReportedByName) {
  int toParent[2], toChild[2];
  ASSERT_EQ(pipe(toParent), 0);
  ASSERT_EQ(pipe(toChild), 0);
  // Fork before this process runs any plugin thread.
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) crashingRank(t_, toParent[1], toChild[0]);
  close(toParent[1]);
  close(toChild[0]);

  pb_plugin_ctx* ctx = makeContext(0);
  Peer peer(0, 1, "testhost", "crashhost");
  pb_conn* conn = nullptr;
  uint8_t blob[256], childBlob[256];
  size_t len = sizeof(blob);
  ASSERT_EQ(t_->setup(ctx, &peer.info, &conn, blob, &len), PB_OK) << error(ctx);
  conns_.push_back(conn);
  ssize_t got = read(toParent[0], childBlob, sizeof(childBlob));
  ASSERT_GT(got, 0);
  ASSERT_EQ(write(toChild[1], blob, len), ssize_t(len));
  pb_status st = PB_IN_PROGRESS;
  auto deadline = Clock::now() + kTimeout;
  while (st == PB_IN_PROGRESS && Clock::now() < deadline) st = t_->proxy_connect(conn, childBlob, size_t(got));
  ASSERT_EQ(st, PB_OK) << error(ctx);
  ASSERT_EQ(write(toChild[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;

  uint64_t done = 0;
  st = PB_OK;
  deadline = Clock::now() + kTimeout;
  while (st == PB_OK && Clock::now() < deadline) st = t_->proxy_progress(conn, &done);
  EXPECT_EQ(st, PB_ERR_REMOTE);
  EXPECT_NE(error(ctx).find("rank 1 (host crashhost) closed the ethernet connection unexpectedly"),
            std::string::npos)
      << error(ctx);
  close(toParent[0]);
  close(toChild[1]);
}

}  // namespace

TEST(EthernetStripeRule, AutoStripesWhereEveryLocalRankHasEightCores) {
  using plugboard::ethernet::stripesFor;
  EXPECT_EQ(stripesFor(true, 0, 16, 2), 4u);   // measured: 2 ranks on 16 cores gain
  EXPECT_EQ(stripesFor(true, 0, 16, 4), 0u);   // 4 ranks on 16 cores lose at 256 KiB - 1 MiB
  EXPECT_EQ(stripesFor(true, 0, 16, 8), 0u);   // 8 ranks on 16 cores lose at 1 MiB
  EXPECT_EQ(stripesFor(true, 0, 32, 4), 4u);   // 4 ranks on 32 cores gain 10-40%
  EXPECT_EQ(stripesFor(true, 0, 2, 2), 0u);    // the CI kind
  EXPECT_EQ(stripesFor(true, 0, 16, 0), 4u);   // an older core: cores alone
  EXPECT_EQ(stripesFor(true, 0, 4, 0), 0u);
  EXPECT_EQ(stripesFor(true, 0, 0, 1), 0u);    // cores unknown
  EXPECT_EQ(stripesFor(false, 3, 2, 8), 3u);   // a count is taken as given
  EXPECT_EQ(stripesFor(false, 0, 64, 1), 0u);
}
