// Tests of libplugboard-faulty.so through its C ABI, wrapping the ethernet
// plugin: with no fault and with every operation delayed it passes the
// shared transport suites (a delay must never change a result); each other
// fault does exactly what its setting says to the bytes and counters that
// land, and the failures it injects come back as errors naming the rank,
// host and operation.
#include "plugin_test_support.hpp"
#include "transport_pair_suite.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#ifndef PLUGBOARD_FAULTY_PLUGIN
#error "PLUGBOARD_FAULTY_PLUGIN must name libplugboard-faulty.so"
#endif

namespace {

using plugboard::test::TransportUnderTest;

const pb_transport_v1* plugin() {
  static const pb_transport_v1* table = plugboard::test::loadPluginTable(PLUGBOARD_FAULTY_PLUGIN);
  return table;
}

/// faulty over ethernet with these settings. Held operations move only when
/// the sender's connection is polled, so waits poll every connection.
TransportUnderTest faultyOverEthernet(const std::string& label, std::map<std::string, std::string> settings) {
  TransportUnderTest d;
  d.label = label;
  d.name = "faulty";
  d.pluginPath = PLUGBOARD_FAULTY_PLUGIN;
  d.table = &plugin;
  d.settings = std::move(settings);
  d.settings["inner"] = "ethernet";
  d.firstSettingKey = "inner";
  d.progressWhileWaiting = &plugboard::test::pollTheOtherConnections;
  return d;
}

const TransportUnderTest* passThrough() {
  static const TransportUnderTest t = faultyOverEthernet("faulty_none", {{"fault", "none"}});
  return &t;
}

const TransportUnderTest* everyOpDelayed() {
  static const TransportUnderTest t =
      faultyOverEthernet("faulty_delay", {{"fault", "delay"}, {"count", "0"}, {"delay_us", "300"}});
  return &t;
}

}  // namespace

using plugboard::test::TransportDeclareTest;
using plugboard::test::TransportLoadTest;
using plugboard::test::TransportOrderingTest;
using plugboard::test::TransportPairTest;
using plugboard::test::TransportWriteSizeTest;
PLUGBOARD_INSTANTIATE_TRANSPORT_SUITE(TransportLoadTest, passThrough());
PLUGBOARD_INSTANTIATE_TRANSPORT_SUITE(TransportDeclareTest, passThrough());
PLUGBOARD_INSTANTIATE_TRANSPORT_SUITE(TransportPairTest, passThrough(), everyOpDelayed());
PLUGBOARD_INSTANTIATE_TRANSPORT_SUITE(TransportOrderingTest, passThrough(), everyOpDelayed());
PLUGBOARD_INSTANTIATE_WRITE_SIZES(passThrough());

namespace plugboard::test {
namespace {

/// A pair of faulty contexts over ethernet, each with its own fault settings.
class FaultyTest : public TransportFixture {
 protected:
  const TransportUnderTest& transport() const override { return *passThrough(); }

  /// Contexts for ranks 0 and 1 with settings added to the pass-through ones.
  void makePair(const std::map<std::string, std::string>& extra) {
    auto settings = transport().settings;
    for (const auto& [k, v] : extra) settings[k] = v;
    ctx0_ = makeContextWith(0, settings);
    ctx1_ = makeContextWith(1, settings);
    ASSERT_TRUE(ctx0_ && ctx1_);
  }
  void connect(const std::map<std::string, std::string>& extra) {
    ASSERT_NO_FATAL_FAILURE(makePair(extra));
    ASSERT_NO_FATAL_FAILURE(connectPair(ctx0_, ctx1_, &c0_, &c1_));
  }
  /// Rank 1's buffers, registered and imported on c0_.
  void targets(size_t bytes) {
    src_.assign(bytes, 0);
    dst_.assign(bytes, 0);
    fillPattern(src_.data(), bytes, 5);
    mrSrc_ = reg(ctx0_, src_.data(), bytes);
    rkDst_ = remoteKey(ctx1_, reg(ctx1_, dst_.data(), bytes), c0_);
    rkCounter_ = remoteKey(ctx1_, reg(ctx1_, &counter_, sizeof(counter_)), c0_);
  }
  uint64_t counter() const { return __atomic_load_n(&counter_, __ATOMIC_ACQUIRE); }
  /// Polls both connections for d (the counter must not move meanwhile for "nothing landed").
  void pollFor(std::chrono::milliseconds d) {
    for (auto end = Clock::now() + d; Clock::now() < end;) ASSERT_NO_FATAL_FAILURE(progressOthers());
  }

  pb_plugin_ctx* ctx0_ = nullptr;
  pb_plugin_ctx* ctx1_ = nullptr;
  pb_conn* c0_ = nullptr;
  pb_conn* c1_ = nullptr;
  std::vector<uint8_t> src_, dst_;
  uint64_t counter_ = 0;
  pb_mr* mrSrc_ = nullptr;
  pb_rkey* rkDst_ = nullptr;
  pb_rkey* rkCounter_ = nullptr;
};

/// describe's text (ABI 1.5) of a context.
std::string describeText(const pb_transport_v1* t, pb_plugin_ctx* ctx) {
  size_t needed = 0;
  if (t->describe(ctx, nullptr, 0, &needed) != PB_ERR_NOMEM) return "(no length)";
  std::string text(needed, '\0');
  if (t->describe(ctx, text.data(), text.size(), &needed) != PB_OK) return "(failed)";
  text.resize(needed - 1);
  return text;
}

TEST_F(FaultyTest, DescribesItsFaultAndTheInnerTransport) {
  ASSERT_NO_FATAL_FAILURE(makePair({{"fault", "fail_op"}, {"ranks", "1"}, {"after", "7"}}));
  ASSERT_NE(t_->describe, nullptr);
  const std::string r0 = describeText(t_, ctx0_), r1 = describeText(t_, ctx1_);
  EXPECT_EQ(r0.rfind("wraps ethernet\nno fault injected on rank 0\nethernet: interfaces up: ", 0), 0u) << r0;
  EXPECT_EQ(r1.rfind("wraps ethernet\ninjecting fault 'fail_op' on rank 1 over ethernet (after 7, count 1)\n", 0), 0u)
      << r1;
}

TEST_F(FaultyTest, DropReportsCompletionButNothingLands) {
  ASSERT_NO_FATAL_FAILURE(connect({{"fault", "drop"}, {"ops", "signal"}}));
  targets(64);
  ASSERT_EQ(t_->signal(c0_, rkCounter_, 0, 4), PB_OK) << error(ctx0_);
  waitCompleted(ctx0_, c0_, 1);
  pollFor(std::chrono::milliseconds(100));
  EXPECT_EQ(counter(), 0u) << "the dropped signal landed";
  ASSERT_EQ(t_->signal(c0_, rkCounter_, 0, 1), PB_OK) << error(ctx0_);  // count=1: the next one passes
  waitCounter(&counter_, 1);
  waitCompleted(ctx0_, c0_, 2);
  EXPECT_EQ(counter(), 1u);
}

TEST_F(FaultyTest, DuplicateAddsASignalTwice) {
  ASSERT_NO_FATAL_FAILURE(connect({{"fault", "duplicate"}, {"ops", "signal"}}));
  targets(64);
  ASSERT_EQ(t_->signal(c0_, rkCounter_, 0, 3), PB_OK) << error(ctx0_);
  waitCompleted(ctx0_, c0_, 1);
  waitCounter(&counter_, 6);
  pollFor(std::chrono::milliseconds(20));
  EXPECT_EQ(counter(), 6u);
}

TEST_F(FaultyTest, TruncateLandsOnlyTheFirstHalf) {
  ASSERT_NO_FATAL_FAILURE(connect({{"fault", "truncate"}, {"ops", "write"}}));
  targets(1000);
  ASSERT_EQ(t_->write(c0_, mrSrc_, 0, rkDst_, 0, 1000), PB_OK) << error(ctx0_);
  ASSERT_EQ(t_->signal(c0_, rkCounter_, 0, 1), PB_OK) << error(ctx0_);
  waitCounter(&counter_, 1);
  waitCompleted(ctx0_, c0_, 2);
  EXPECT_EQ(std::memcmp(dst_.data(), src_.data(), 500), 0);
  EXPECT_EQ(dst_[500], 0) << "the second half landed";
  EXPECT_EQ(dst_[999], 0) << "the second half landed";
}

TEST_F(FaultyTest, CorruptChangesTheMiddleByteOfAWriteSignal) {
  ASSERT_NO_FATAL_FAILURE(connect({{"fault", "corrupt"}, {"ops", "write"}}));
  targets(1000);
  ASSERT_EQ(t_->write_signal(c0_, mrSrc_, 0, rkDst_, 0, 1000, rkCounter_, 0, 1), PB_OK) << error(ctx0_);
  waitCounter(&counter_, 1);
  waitCompleted(ctx0_, c0_, 1);
  EXPECT_EQ(dst_[500], static_cast<uint8_t>(~src_[500]));
  dst_[500] = src_[500];
  EXPECT_EQ(std::memcmp(dst_.data(), src_.data(), 1000), 0) << "more than the middle byte changed";
}

TEST_F(FaultyTest, CorruptSignalAddsOneMore) {
  ASSERT_NO_FATAL_FAILURE(connect({{"fault", "corrupt"}, {"ops", "signal"}}));
  targets(8);
  ASSERT_EQ(t_->signal(c0_, rkCounter_, 0, 5), PB_OK) << error(ctx0_);
  waitCounter(&counter_, 6);
  waitCompleted(ctx0_, c0_, 1);
  EXPECT_EQ(counter(), 6u);
}

TEST_F(FaultyTest, ReorderLetsTheSignalOvertakeItsWrite) {
  ASSERT_NO_FATAL_FAILURE(connect({{"fault", "reorder"}, {"ops", "write"}}));
  targets(4096);
  ASSERT_EQ(t_->write(c0_, mrSrc_, 0, rkDst_, 0, 4096), PB_OK) << error(ctx0_);
  ASSERT_EQ(t_->signal(c0_, rkCounter_, 0, 1), PB_OK) << error(ctx0_);
  // The signal went out at once; the write waits for rank 0's next poll, which has not come.
  for (auto deadline = Clock::now() + kSuiteTimeout; counter() == 0;) ASSERT_LT(Clock::now(), deadline);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(dst_, std::vector<uint8_t>(4096, 0)) << "the write landed before rank 0 polled again";
  waitCompleted(ctx0_, c0_, 2);  // both complete, in order, once the write has
  // A signal posted after the write's completion is not reordered: once it
  // lands, so has the write (and the read below is ordered after it).
  ASSERT_EQ(t_->signal(c0_, rkCounter_, 0, 1), PB_OK) << error(ctx0_);
  waitCounter(&counter_, 2);
  EXPECT_EQ(dst_, src_) << "the reordered write never landed";
}

TEST_F(FaultyTest, DelayHoldsAnOperationForItsTime) {
  ASSERT_NO_FATAL_FAILURE(connect({{"fault", "delay"}, {"delay_us", "50000"}}));
  targets(8);
  const auto start = Clock::now();
  ASSERT_EQ(t_->signal(c0_, rkCounter_, 0, 1), PB_OK) << error(ctx0_);
  ASSERT_EQ(t_->signal(c0_, rkCounter_, 0, 1), PB_OK) << error(ctx0_);  // queued behind it, not delayed again
  waitCounter(&counter_, 2);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(50));
  waitCompleted(ctx0_, c0_, 2);
}

TEST_F(FaultyTest, FailOpFailsThatOperationAndTheConnection) {
  ASSERT_NO_FATAL_FAILURE(connect({{"fault", "fail_op"}, {"after", "2"}, {"ranks", "0"}}));
  targets(64);
  ASSERT_EQ(t_->signal(c0_, rkCounter_, 0, 1), PB_OK) << error(ctx0_);
  ASSERT_EQ(t_->write(c0_, mrSrc_, 0, rkDst_, 0, 64), PB_OK) << error(ctx0_);
  EXPECT_EQ(t_->signal(c0_, rkCounter_, 0, 1), PB_ERR_SYSTEM);
  const std::string why = error(ctx0_);
  for (const char* needle : {"injected fail_op at signal to rank 1 (host testhost) #3", "on rank 0"})
    EXPECT_NE(why.find(needle), std::string::npos) << why;
  uint64_t done = 0;
  EXPECT_EQ(t_->proxy_progress(c0_, &done), PB_ERR_SYSTEM) << "the failure is final for the connection";
  EXPECT_EQ(t_->write(c0_, mrSrc_, 0, rkDst_, 0, 64), PB_ERR_SYSTEM);
}

TEST_F(FaultyTest, FailRegisterFailsTheNamedRegistration) {
  ASSERT_NO_FATAL_FAILURE(makePair({{"fault", "fail_register"}, {"after", "1"}, {"ranks", "1"}}));
  std::vector<uint8_t> a(100), b(200);
  pb_mr* mr = nullptr;
  ASSERT_NE(reg(ctx1_, a.data(), a.size()), nullptr);
  EXPECT_EQ(t_->register_memory(ctx1_, b.data(), b.size(), PB_MEM_HOST, &mr), PB_ERR_SYSTEM);
  EXPECT_EQ(mr, nullptr);
  EXPECT_NE(error(ctx1_).find("injected fail_register at register_memory of 200 bytes #2 on rank 1"),
            std::string::npos) << error(ctx1_);
  EXPECT_NE(reg(ctx0_, b.data(), b.size()), nullptr) << "rank 0 does not inject";
}

TEST_F(FaultyTest, FailConnectFailsProxyConnectNamingThePeer) {
  ASSERT_NO_FATAL_FAILURE(makePair({{"fault", "fail_connect"}, {"ranks", "1"}}));
  std::vector<uint8_t> blob0, blob1;
  pb_conn* c0 = setup(ctx0_, 0, 1, &blob0);
  pb_conn* c1 = setup(ctx1_, 1, 0, &blob1);
  ASSERT_TRUE(c0 && c1);
  EXPECT_EQ(t_->proxy_connect(c1, blob0.data(), blob0.size()), PB_ERR_SYSTEM);
  EXPECT_NE(error(ctx1_).find("injected fail_connect at the connection to rank 0 (host testhost) #1"),
            std::string::npos) << error(ctx1_);
}

TEST_F(FaultyTest, ExitEndsTheProcessWithItsStatus) {
  // In a child: the exit must take the whole process, with the set status.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    makePair({{"fault", "exit"}, {"after", "1"}, {"exit_code", "23"}});
    connectPair(ctx0_, ctx1_, &c0_, &c1_);
    targets(8);
    t_->signal(c0_, rkCounter_, 0, 1);
    t_->signal(c0_, rkCounter_, 0, 1);  // the second operation exits
    ::_exit(99);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child ended by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 23);
}

TEST_F(FaultyTest, OnlyTheNamedRanksInject) {
  ASSERT_NO_FATAL_FAILURE(connect({{"fault", "drop"}, {"count", "0"}, {"ranks", "1"}}));
  targets(8);
  ASSERT_EQ(t_->signal(c0_, rkCounter_, 0, 2), PB_OK) << error(ctx0_);
  waitCounter(&counter_, 2);
  waitCompleted(ctx0_, c0_, 1);
}

TEST_F(FaultyTest, BadSettingsFailInitNamingThem) {
  const std::pair<std::map<std::string, std::string>, std::string> cases[] = {
      {{{"fault", "explode"}}, "setting fault='explode' is not one of none, delay"},
      {{{"ops", "reads"}}, "setting ops='reads' is not one of all, write, signal"},
      {{{"ranks", "1,x"}}, "setting ranks='1,x': 'x' is not a rank"},
      {{{"after", "-1"}}, "setting after='-1' is not an integer"},
      {{{"inner", "nosuch"}}, "cannot load the inner transport 'nosuch' from "},
      {{{"inner", "faulty"}}, "must name another transport"},
  };
  for (const auto& [settings, expected] : cases) {
    FakeHost host(0, "testhost", settings);
    pb_plugin_ctx* ctx = nullptr;
    EXPECT_NE(t_->init(&host.services, &ctx), PB_OK) << expected;
    EXPECT_EQ(ctx, nullptr);
    const std::string why = t_->last_error(nullptr);
    EXPECT_NE(why.find(expected), std::string::npos) << why;
  }
}

TEST_F(FaultyTest, InnerSettingsAreDeclaredUnderAPrefixAndReadBack) {
  FakeHost host(0, "testhost", {{"inner_socket_buffer_bytes", "lots"}});
  pb_plugin_ctx* ctx = nullptr;
  EXPECT_NE(t_->init(&host.services, &ctx), PB_OK) << "the inner transport never saw its setting";
  EXPECT_TRUE(host.declared.count("inner_ifname")) << "ethernet's ifname is not faulty.inner_ifname";
  EXPECT_NE(std::string(t_->last_error(nullptr)).find("socket_buffer_bytes"), std::string::npos)
      << t_->last_error(nullptr);
}

}  // namespace
}  // namespace plugboard::test
