// One conformance-style suite for the scenarios every host-memory transport
// must pass the same way through the C ABI (two ranks of one host in this
// process). Each transport's test file describes itself in a
// TransportUnderTest and instantiates the suites that apply to it (see
// transport_pair_suite.cpp for the scenarios and the instantiation macros
// at the end of this file); its own quirks stay in its own file.
#pragma once

#include "plugin_test_support.hpp"

#include <gtest/gtest.h>
#include <plugboard/transport.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace plugboard::test {

using Clock = std::chrono::steady_clock;

/// Deadline of every wait in the shared scenarios (a failure bound only).
constexpr auto kSuiteTimeout = std::chrono::seconds(30);

/// Called in every wait loop with the connections of the test that are
/// connected, minus the one the loop itself polls: stands in for the other
/// ranks' proxy threads. Returns the first error.
using ProgressWhileWaiting = pb_status (*)(const pb_transport_v1* t, const std::vector<pb_conn*>& others);

/// For transports whose own threads move data: nothing to drive.
inline pb_status progressesByItself(const pb_transport_v1*, const std::vector<pb_conn*>&) {
  std::this_thread::yield();
  return PB_OK;
}

/// For transports that move data only while the target side is polled
/// (UCX over TCP, libfabric with manual progress): one proxy_progress each.
inline pb_status pollTheOtherConnections(const pb_transport_v1* t, const std::vector<pb_conn*>& others) {
  for (pb_conn* conn : others) {
    uint64_t ignored = 0;
    pb_status st = t->proxy_progress(conn, &ignored);
    if (st != PB_OK) return st;
  }
  return PB_OK;
}

/// What the shared suites need to know about one transport (or one
/// configuration of it: the label tells configurations apart).
struct TransportUnderTest {
  std::string label;                   ///< test-name suffix, e.g. "ethernet", "ucx_flush"
  std::string name;                    ///< pb_transport_v1::name
  const char* pluginPath = nullptr;    ///< the .so, for tests that dlopen it themselves
  const pb_transport_v1* (*table)() = nullptr;  ///< the table, loaded once the way the core does
  std::map<std::string, std::string> settings;  ///< every context of the test gets these
  std::string firstSettingKey;         ///< the first key init() declares
  std::string (*whyUnusable)() = nullptr;  ///< "" where contexts can be made here, else the skip reason
  ProgressWhileWaiting progressWhileWaiting = progressesByItself;
  /// free() that waits for the peer's close marker (UCX) needs both ends
  /// freed at once, as ranks do; others are freed one after the other.
  bool freeEndsConcurrently = false;
};

/// Owns the contexts, connections, regions and keys a test makes and frees
/// them in ABI order at the end. transport() is supplied by the
/// parameterised suites below.
class TransportFixture : public ::testing::Test {
 protected:
  virtual const TransportUnderTest& transport() const = 0;

  void SetUp() override {
    t_ = transport().table();
    ASSERT_NE(t_, nullptr);
  }

  void TearDown() override {
    for (auto& [conn, rkey] : rkeys_) EXPECT_EQ(t_->release_rkey(conn, rkey), PB_OK);
    rkeys_.clear();
    freeEnds(conns_);
    for (auto& [ctx, mr] : mrs_) EXPECT_EQ(t_->deregister_memory(ctx, mr), PB_OK) << t_->last_error(ctx);
    for (pb_plugin_ctx* ctx : ctxs_) EXPECT_EQ(t_->finalize(ctx), PB_OK) << t_->last_error(ctx);
  }

  /// Skips the test, with the transport's reason, where it cannot run here.
  void skipUnlessUsable() {
    std::string why = transport().whyUnusable ? transport().whyUnusable() : "";
    if (!why.empty()) GTEST_SKIP() << why;
  }

  /// Skips the test where the transport lacks a capability it needs.
  void skipUnlessCapable(pb_plugin_ctx* ctx, uint32_t capability, const char* what) {
    if (!(properties(ctx).flags & capability))
      GTEST_SKIP() << transport().name << " does not advertise " << what;
  }

  pb_transport_properties_v1 properties(pb_plugin_ctx* ctx) {
    pb_transport_properties_v1 props{};
    props.struct_size = sizeof(props);
    EXPECT_EQ(t_->properties(ctx, &props), PB_OK) << error(ctx);
    return props;
  }

  /// A context of rank whose host serves exactly these settings.
  pb_plugin_ctx* makeContextWith(int rank, std::map<std::string, std::string> settings,
                                 std::string hostname = "testhost") {
    hosts_.push_back(std::make_unique<FakeHost>(rank, std::move(hostname), std::move(settings)));
    pb_plugin_ctx* ctx = nullptr;
    EXPECT_EQ(t_->init(&hosts_.back()->services, &ctx), PB_OK) << t_->last_error(nullptr);
    if (ctx) ctxs_.push_back(ctx);
    return ctx;
  }

  /// A context of rank with the transport's settings.
  pb_plugin_ctx* makeContext(int rank) { return makeContextWith(rank, transport().settings); }

  std::string error(pb_plugin_ctx* ctx) { return t_->last_error(ctx); }

  /// setup() for the connection from rank `local` to rank `peer`.
  pb_conn* setup(pb_plugin_ctx* ctx, int local, int peer, std::vector<uint8_t>* blob) {
    Peer info(local, peer, "testhost", "testhost");
    blob->resize(properties(ctx).max_address_size);
    size_t len = blob->size();
    pb_conn* conn = nullptr;
    EXPECT_EQ(t_->setup(ctx, &info.info, &conn, blob->data(), &len), PB_OK) << error(ctx);
    blob->resize(len);
    if (conn) conns_.push_back(conn);
    return conn;
  }

  /// Connects ctx0 (rank 0) and ctx1 (rank 1), polling both sides as the
  /// core's proxy threads would.
  void connectPair(pb_plugin_ctx* ctx0, pb_plugin_ctx* ctx1, pb_conn** c0, pb_conn** c1) {
    std::vector<uint8_t> blob0, blob1;
    *c0 = setup(ctx0, 0, 1, &blob0);
    *c1 = setup(ctx1, 1, 0, &blob1);
    ASSERT_TRUE(*c0 && *c1);
    pb_status s0 = PB_IN_PROGRESS, s1 = PB_IN_PROGRESS;
    auto deadline = Clock::now() + kSuiteTimeout;
    while ((s0 == PB_IN_PROGRESS || s1 == PB_IN_PROGRESS) && Clock::now() < deadline) {
      if (s0 == PB_IN_PROGRESS) s0 = t_->proxy_connect(*c0, blob1.data(), blob1.size());
      if (s1 == PB_IN_PROGRESS) s1 = t_->proxy_connect(*c1, blob0.data(), blob0.size());
    }
    ASSERT_EQ(s0, PB_OK) << error(ctx0);
    ASSERT_EQ(s1, PB_OK) << error(ctx1);
    connected_.push_back(*c0);
    connected_.push_back(*c1);
  }

  pb_mr* reg(pb_plugin_ctx* ctx, void* ptr, size_t size) {
    pb_mr* mr = nullptr;
    EXPECT_EQ(t_->register_memory(ctx, ptr, size, PB_MEM_HOST, &mr), PB_OK) << error(ctx);
    if (mr) mrs_.emplace_back(ctx, mr);
    return mr;
  }

  void deregister(pb_plugin_ctx* ctx, pb_mr* mr) {
    ASSERT_EQ(t_->deregister_memory(ctx, mr), PB_OK) << error(ctx);
    mrs_.erase(std::find(mrs_.begin(), mrs_.end(), std::make_pair(ctx, mr)));
  }

  /// Releases conn's imported keys and frees it.
  void freeConn(pb_conn* conn) { freeEnds({conn}); }

  /// Packs owner's mr and imports it on conn (the peer's connection).
  pb_rkey* remoteKey(pb_plugin_ctx* owner, pb_mr* mr, pb_conn* conn) {
    std::vector<uint8_t> buf(properties(owner).max_rkey_size);
    size_t len = buf.size();
    EXPECT_EQ(t_->pack_rkey(owner, mr, buf.data(), &len), PB_OK) << error(owner);
    pb_rkey* rkey = nullptr;
    EXPECT_EQ(t_->import_rkey(conn, buf.data(), len, &rkey), PB_OK);
    if (rkey) rkeys_.emplace_back(conn, rkey);
    return rkey;
  }

  /// Releases the keys imported on conns, then frees conns (concurrently
  /// where the transport needs it) and drops them from the books.
  void freeEnds(std::vector<pb_conn*> conns) {
    for (auto it = rkeys_.begin(); it != rkeys_.end();) {
      bool mine = std::find(conns.begin(), conns.end(), it->first) != conns.end();
      if (!mine) {
        ++it;
        continue;
      }
      EXPECT_EQ(t_->release_rkey(it->first, it->second), PB_OK);
      it = rkeys_.erase(it);
    }
    std::vector<pb_status> results(conns.size(), PB_OK);
    if (transport().freeEndsConcurrently) {
      std::vector<std::thread> threads;
      for (size_t i = 0; i < conns.size(); ++i) threads.emplace_back([&, i] { results[i] = t_->free(conns[i]); });
      for (auto& th : threads) th.join();
    } else {
      for (size_t i = 0; i < conns.size(); ++i) results[i] = t_->free(conns[i]);
    }
    for (pb_status st : results) EXPECT_EQ(st, PB_OK);
    for (pb_conn* c : conns) {
      conns_.erase(std::remove(conns_.begin(), conns_.end(), c), conns_.end());
      connected_.erase(std::remove(connected_.begin(), connected_.end(), c), connected_.end());
    }
  }

  /// The transport's progress hook on every connected connection but skip.
  void progressOthers(pb_conn* skip = nullptr) {
    std::vector<pb_conn*> others;
    for (pb_conn* c : connected_) {
      if (c != skip) others.push_back(c);
    }
    ASSERT_EQ(transport().progressWhileWaiting(t_, others), PB_OK) << "proxy_progress on another connection failed";
  }

  /// Polls proxy_progress until seq completed; fails on error or timeout.
  void waitCompleted(pb_plugin_ctx* ctx, pb_conn* conn, uint64_t seq) {
    uint64_t done = 0;
    auto deadline = Clock::now() + kSuiteTimeout;
    while (Clock::now() < deadline) {
      ASSERT_EQ(t_->proxy_progress(conn, &done), PB_OK) << error(ctx);
      ASSERT_LE(done, seq) << "completed runs ahead of what was posted";
      if (done == seq) return;
      ASSERT_NO_FATAL_FAILURE(progressOthers(conn));
    }
    FAIL() << "completion stuck at " << done << ", waiting for " << seq;
  }

  /// Polls target until its proxy_progress fails (what it returns then),
  /// polling other each round too, which must stay PB_OK; gives up with
  /// PB_OK after the suite's timeout.
  pb_status progressUntilFailure(pb_conn* target, pb_conn* other, pb_plugin_ctx* otherCtx) {
    uint64_t done = 0;
    pb_status st = PB_OK;
    auto deadline = Clock::now() + kSuiteTimeout;
    while (st == PB_OK && Clock::now() < deadline) {
      st = t_->proxy_progress(target, &done);
      EXPECT_EQ(t_->proxy_progress(other, &done), PB_OK) << error(otherCtx);
    }
    return st;
  }

  /// Waits until the counter (written by the peer's signals) reaches value.
  void waitCounter(const uint64_t* counter, uint64_t value) {
    auto deadline = Clock::now() + kSuiteTimeout;
    while (__atomic_load_n(counter, __ATOMIC_ACQUIRE) < value) {
      ASSERT_LT(Clock::now(), deadline) << "counter stuck at " << __atomic_load_n(counter, __ATOMIC_ACQUIRE);
      ASSERT_NO_FATAL_FAILURE(progressOthers());
    }
  }

  const pb_transport_v1* t_ = nullptr;
  std::vector<std::unique_ptr<FakeHost>> hosts_;
  std::vector<pb_plugin_ctx*> ctxs_;
  std::vector<pb_conn*> conns_;      // set up, not yet freed
  std::vector<pb_conn*> connected_;  // connected, not yet freed: what progressOthers drives
  std::vector<std::pair<pb_plugin_ctx*, pb_mr*>> mrs_;
  std::vector<std::pair<pb_conn*, pb_rkey*>> rkeys_;
};

/// Two connected ranks of one host: c0_ is rank 0's connection to rank 1.
class ConnectedPairFixture : public TransportFixture {
 protected:
  void SetUp() override {
    TransportFixture::SetUp();
    if (HasFatalFailure()) return;
    skipUnlessUsable();
    if (IsSkipped()) return;
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

/// Loading, init and finalize: no connection made up front.
class TransportLoadTest : public TransportFixture, public ::testing::WithParamInterface<const TransportUnderTest*> {
 protected:
  const TransportUnderTest& transport() const override { return *GetParam(); }
};

/// The host's declare_setting throwing: for transports that guard it.
class TransportDeclareTest : public TransportLoadTest {};

/// Data path and close on a connected pair.
class TransportPairTest : public ConnectedPairFixture,
                          public ::testing::WithParamInterface<const TransportUnderTest*> {
 protected:
  const TransportUnderTest& transport() const override { return *GetParam(); }
};

/// Signal-after-write ordering, per ordering configuration of a transport.
class TransportOrderingTest : public TransportPairTest {};

/// One write of the given size, per transport.
class TransportWriteSizeTest
    : public ConnectedPairFixture,
      public ::testing::WithParamInterface<std::tuple<const TransportUnderTest*, size_t>> {
 protected:
  const TransportUnderTest& transport() const override { return *std::get<0>(GetParam()); }
  size_t writeSize() const { return std::get<1>(GetParam()); }
};

/// Test-name suffix: the transport's label.
inline std::string labelOf(const ::testing::TestParamInfo<const TransportUnderTest*>& info) {
  return info.param->label;
}

/// Test-name suffix: label and size, e.g. "ethernet_4097B".
inline std::string labelAndSizeOf(
    const ::testing::TestParamInfo<std::tuple<const TransportUnderTest*, size_t>>& info) {
  return std::get<0>(info.param)->label + "_" + std::to_string(std::get<1>(info.param)) + "B";
}

/// The sizes every transport's single write is checked at: empty, one
/// byte, just past a page, and large enough to be split.
inline auto suiteWriteSizes() { return ::testing::Values(size_t(0), size_t(1), size_t(4097), size_t(64) << 20); }

}  // namespace plugboard::test

/// Instantiates `suite` (one of the classes above) for the given
/// TransportUnderTest pointers; test names end in each one's label.
#define PLUGBOARD_INSTANTIATE_TRANSPORT_SUITE(suite, ...)                                              \
  INSTANTIATE_TEST_SUITE_P(Conformance, suite, ::testing::Values(__VA_ARGS__), ::plugboard::test::labelOf)

/// Instantiates the write-size sweep for one transport.
#define PLUGBOARD_INSTANTIATE_WRITE_SIZES(transportPtr)                                                   \
  INSTANTIATE_TEST_SUITE_P(Conformance, TransportWriteSizeTest,                                        \
                           ::testing::Combine(::testing::Values(transportPtr), ::plugboard::test::suiteWriteSizes()), \
                           ::plugboard::test::labelAndSizeOf)
