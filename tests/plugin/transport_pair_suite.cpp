// The shared scenarios of transport_pair_suite.hpp. Compiled into each
// transport's plugin test binary, which instantiates the suites that apply.
#include "transport_pair_suite.hpp"

#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace plugboard::test {

// Not every transport instantiates these (e.g. libfabric checks write sizes
// per signal mode in its own file).
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TransportDeclareTest);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TransportOrderingTest);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TransportWriteSizeTest);

// ---- loading, init, finalize -------------------------------------------------

TEST_P(TransportLoadTest, EntryRefusesAnotherMajor) {
  EXPECT_EQ(t_->abi_major, uint32_t(PB_TRANSPORT_ABI_MAJOR));
  EXPECT_EQ(std::string(t_->name), transport().name);
  EXPECT_GE(t_->struct_size, sizeof(pb_transport_v1));
  void* handle = dlopen(transport().pluginPath, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto entry = reinterpret_cast<pb_transport_entry_v1_fn>(dlsym(handle, PB_TRANSPORT_ENTRY_SYMBOL_V1));
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry(2, 0), nullptr);
  dlclose(handle);
}

TEST_P(TransportLoadTest, InitWithWrongHostMajorFailsWithReason) {
  FakeHost host(0, "testhost", {});
  host.services.abi_major = 7;
  pb_plugin_ctx* ctx = reinterpret_cast<pb_plugin_ctx*>(&host);  // must be overwritten
  EXPECT_EQ(t_->init(&host.services, &ctx), PB_ERR_VERSION);
  EXPECT_EQ(ctx, nullptr);
  std::string expected = transport().name + ": the core speaks transport ABI 7." + std::to_string(PB_TRANSPORT_ABI_MINOR);
  EXPECT_NE(std::string(t_->last_error(nullptr)).find(expected), std::string::npos) << t_->last_error(nullptr);
}

TEST_P(TransportLoadTest, FinalizeRefusesWhileConnectionsAreOpen) {
  skipUnlessUsable();
  if (IsSkipped()) return;
  pb_plugin_ctx* ctx = makeContext(0);
  ASSERT_NE(ctx, nullptr);
  std::vector<uint8_t> blob;
  ASSERT_NE(setup(ctx, 0, 1, &blob), nullptr);
  EXPECT_EQ(t_->finalize(ctx), PB_ERR_INVALID);
  EXPECT_NE(error(ctx).find("still open"), std::string::npos) << error(ctx);
}

TEST_P(TransportDeclareTest, HostThatThrowsFromDeclareIsReportedNotFatal) {
  FakeHost host(0, "testhost", {});
  host.services.declare_setting = [](void*, const pb_setting_decl_v1*) -> pb_status {
    throw std::runtime_error("PLUGBOARD_SOME_SETTING: bad value");
  };
  pb_plugin_ctx* ctx = nullptr;
  EXPECT_EQ(t_->init(&host.services, &ctx), PB_ERR_INVALID);
  std::string expected = "declaring setting '" + transport().firstSettingKey + "': PLUGBOARD_SOME_SETTING: bad value";
  EXPECT_NE(std::string(t_->last_error(nullptr)).find(expected), std::string::npos) << t_->last_error(nullptr);
}

// ---- data path ---------------------------------------------------------------

TEST_P(TransportWriteSizeTest, WriteArrivesByteForByte) {
  const size_t size = writeSize();
  constexpr size_t kSrcOff = 3, kDstOff = 5, kSlack = 16;
  std::vector<uint8_t> src(size + kSlack), dst(size + kSlack, 0xEE);
  fillPattern(src.data(), src.size(), 1);
  std::vector<uint64_t> counter(1, 0);
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  pb_rkey* rkDst = remoteKey(ctx1_, reg(ctx1_, dst.data(), dst.size()), c0_);
  pb_rkey* rkCounter = remoteKey(ctx1_, reg(ctx1_, counter.data(), sizeof(uint64_t)), c0_);

  ASSERT_EQ(t_->write(c0_, mrSrc, kSrcOff, rkDst, kDstOff, size), PB_OK) << error(ctx0_);
  ASSERT_EQ(t_->signal(c0_, rkCounter, 0, 1), PB_OK) << error(ctx0_);
  ASSERT_EQ(t_->flush(c0_), PB_OK) << error(ctx0_);
  waitCompleted(ctx0_, c0_, 2);
  waitCounter(counter.data(), 1);
  EXPECT_EQ(std::memcmp(dst.data() + kDstOff, src.data() + kSrcOff, size), 0);
  for (size_t i = 0; i < kDstOff; ++i) ASSERT_EQ(dst[i], 0xEE) << "byte " << i << " before the target changed";
  for (size_t i = kDstOff + size; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE) << "byte " << i << " past the target";
}

TEST_P(TransportOrderingTest, SignalBecomesVisibleOnlyAfterEarlierWrites) {
  skipUnlessCapable(ctx0_, PB_CAP_ATOMIC_SIGNAL, "PB_CAP_ATOMIC_SIGNAL (signal())");
  if (IsSkipped()) return;
  constexpr size_t kSize = 1 << 20;
  constexpr uint64_t kRounds = 24;
  std::vector<uint8_t> src(kSize), dst(kSize, 0), expect(kSize);
  std::vector<uint64_t> counter(2, 0);
  pb_mr* mrSrc = reg(ctx0_, src.data(), kSize);
  pb_rkey* rkDst = remoteKey(ctx1_, reg(ctx1_, dst.data(), kSize), c0_);
  pb_rkey* rkCounter = remoteKey(ctx1_, reg(ctx1_, counter.data(), 2 * sizeof(uint64_t)), c0_);
  for (uint64_t round = 1; round <= kRounds; ++round) {
    fillPattern(src.data(), kSize, unsigned(round));
    ASSERT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, kSize), PB_OK) << error(ctx0_);
    ASSERT_EQ(t_->signal(c0_, rkCounter, 8, 3), PB_OK) << error(ctx0_);
    // The receiving side observes the counter first, then the data.
    waitCounter(&counter[1], 3 * round);
    fillPattern(expect.data(), kSize, unsigned(round));
    ASSERT_EQ(std::memcmp(dst.data(), expect.data(), kSize), 0) << "round " << round << ": signal overtook its write";
    waitCompleted(ctx0_, c0_, 2 * round);  // Only now may src be refilled.
  }
  EXPECT_EQ(__atomic_load_n(&counter[1], __ATOMIC_ACQUIRE), 3 * kRounds);
  EXPECT_EQ(counter[0], 0u) << "signal hit the wrong word";
}

TEST_P(TransportPairTest, ManyWritesInFlightCompleteInOrder) {
  // More writes than a provider's transmit queue holds, posted without
  // progress in between; reverse order of offsets, so a mix-up shows.
  constexpr size_t kChunk = 1000, kCount = 5000;
  std::vector<uint8_t> src(kChunk * kCount), dst(kChunk * kCount, 0);
  fillPattern(src.data(), src.size(), 9);
  std::vector<uint64_t> counter(1, 0);
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  pb_rkey* rkDst = remoteKey(ctx1_, reg(ctx1_, dst.data(), dst.size()), c0_);
  pb_rkey* rkCounter = remoteKey(ctx1_, reg(ctx1_, counter.data(), sizeof(uint64_t)), c0_);
  for (size_t i = 0; i < kCount; ++i) {
    size_t off = (kCount - 1 - i) * kChunk;
    ASSERT_EQ(t_->write(c0_, mrSrc, off, rkDst, off, kChunk), PB_OK) << error(ctx0_);
  }
  ASSERT_EQ(t_->signal(c0_, rkCounter, 0, 1), PB_OK) << error(ctx0_);
  uint64_t last = 0;
  auto deadline = Clock::now() + kSuiteTimeout;
  while (last < kCount + 1) {
    ASSERT_LT(Clock::now(), deadline) << "completion stuck at " << last;
    uint64_t done = 0;
    ASSERT_EQ(t_->proxy_progress(c0_, &done), PB_OK) << error(ctx0_);
    ASSERT_GE(done, last) << "completion went backwards";
    ASSERT_LE(done, kCount + 1) << "completed runs ahead of what was posted";
    last = done;
    ASSERT_NO_FATAL_FAILURE(progressOthers(c0_));
  }
  waitCounter(counter.data(), 1);
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), src.size()), 0);
}

TEST_P(TransportPairTest, BothDirectionsAtOnce) {
  constexpr size_t kSize = 16 << 20;
  std::vector<uint8_t> a(kSize), b(kSize), intoA(kSize), intoB(kSize);
  fillPattern(a.data(), kSize, 21);
  fillPattern(b.data(), kSize, 22);
  std::vector<uint64_t> counterA(1, 0), counterB(1, 0);
  pb_mr* mrA = reg(ctx0_, a.data(), kSize);
  pb_mr* mrB = reg(ctx1_, b.data(), kSize);
  pb_rkey* rkIntoB = remoteKey(ctx1_, reg(ctx1_, intoB.data(), kSize), c0_);
  pb_rkey* rkCounterB = remoteKey(ctx1_, reg(ctx1_, counterB.data(), 8), c0_);
  pb_rkey* rkIntoA = remoteKey(ctx0_, reg(ctx0_, intoA.data(), kSize), c1_);
  pb_rkey* rkCounterA = remoteKey(ctx0_, reg(ctx0_, counterA.data(), 8), c1_);
  ASSERT_EQ(t_->write(c0_, mrA, 0, rkIntoB, 0, kSize), PB_OK) << error(ctx0_);
  ASSERT_EQ(t_->write(c1_, mrB, 0, rkIntoA, 0, kSize), PB_OK) << error(ctx1_);
  ASSERT_EQ(t_->signal(c0_, rkCounterB, 0, 1), PB_OK) << error(ctx0_);
  ASSERT_EQ(t_->signal(c1_, rkCounterA, 0, 1), PB_OK) << error(ctx1_);
  waitCounter(counterA.data(), 1);
  waitCounter(counterB.data(), 1);
  EXPECT_EQ(std::memcmp(a.data(), intoB.data(), kSize), 0);
  EXPECT_EQ(std::memcmp(b.data(), intoA.data(), kSize), 0);
  waitCompleted(ctx0_, c0_, 2);
  waitCompleted(ctx1_, c1_, 2);
}

TEST_P(TransportPairTest, WriteSignalIsOneOperationWithWriteThenSignalOrdering) {
  // write_signal (ABI 1.1, optional): one sequence number, the same ordering
  // as write() then signal(): when the counter moves, its own write and every
  // earlier write are in place. Sizes around the transports' inline limits
  // (a transport may carry small writes inside the signal's message).
  if (!t_->write_signal) GTEST_SKIP() << "write_signal is NULL (the core posts write, then signal)";
  skipUnlessCapable(ctx0_, PB_CAP_ATOMIC_SIGNAL, "PB_CAP_ATOMIC_SIGNAL (signal())");
  if (IsSkipped()) return;
  constexpr size_t kBig = 1 << 20, kMax = 300000;
  std::vector<uint8_t> src(kMax), dst(kMax, 0), bigSrc(kBig), bigDst(kBig, 0), expect(kMax);
  std::vector<uint64_t> counter(2, 0);
  pb_mr* mrSrc = reg(ctx0_, src.data(), kMax);
  pb_mr* mrBig = reg(ctx0_, bigSrc.data(), kBig);
  pb_rkey* rkDst = remoteKey(ctx1_, reg(ctx1_, dst.data(), kMax), c0_);
  pb_rkey* rkBig = remoteKey(ctx1_, reg(ctx1_, bigDst.data(), kBig), c0_);
  pb_rkey* rkCounter = remoteKey(ctx1_, reg(ctx1_, counter.data(), 2 * sizeof(uint64_t)), c0_);
  uint64_t seq = 0, expected = 0;
  unsigned round = 0;
  for (size_t size : {size_t(0), size_t(8), size_t(3000), size_t(4000), size_t(16288), size_t(16289), kMax}) {
    SCOPED_TRACE("size " + std::to_string(size));
    ++round;
    fillPattern(src.data(), kMax, round);
    fillPattern(bigSrc.data(), kBig, round + 100);
    // A large plain write first: the fused operation's signal must cover it too.
    ASSERT_EQ(t_->write(c0_, mrBig, 0, rkBig, 0, kBig), PB_OK) << error(ctx0_);
    ASSERT_EQ(t_->write_signal(c0_, mrSrc, 0, rkDst, 7, size - std::min<size_t>(size, 7), rkCounter, 8, round),
              PB_OK)
        << error(ctx0_);
    seq += 2;
    expected += round;
    waitCounter(&counter[1], expected);
    fillPattern(expect.data(), kMax, round);
    const size_t n = size - std::min<size_t>(size, 7);
    ASSERT_EQ(std::memcmp(dst.data() + 7, expect.data(), n), 0) << "the counter moved before its own write landed";
    ASSERT_EQ(std::memcmp(bigDst.data(), bigSrc.data(), kBig), 0) << "the counter moved before an earlier write landed";
    waitCompleted(ctx0_, c0_, seq);  // one sequence number each: the write, then the fused operation
  }
  EXPECT_EQ(__atomic_load_n(&counter[1], __ATOMIC_ACQUIRE), expected);
  EXPECT_EQ(counter[0], 0u) << "signal hit the wrong word";
  EXPECT_EQ(t_->write_signal(c0_, mrSrc, 0, rkDst, 0, 8, rkCounter, 4, 1), PB_ERR_INVALID)
      << "a misaligned signal target must be refused";
  EXPECT_EQ(t_->write_signal(c0_, mrSrc, 0, rkDst, kMax - 4, 8, rkCounter, 8, 1), PB_ERR_INVALID)
      << "a write past the destination must be refused";
}

// The checks every transport makes; each file adds the ones only its
// transport makes (fused writes, foreign handles, wording of reasons).
TEST_P(TransportPairTest, OutOfRangeOperationsAreRejected) {
  std::vector<uint8_t> src(64), dst(64);
  std::vector<uint64_t> counter(2, 0);
  pb_mr* mrSrc = reg(ctx0_, src.data(), src.size());
  pb_rkey* rkDst = remoteKey(ctx1_, reg(ctx1_, dst.data(), dst.size()), c0_);
  pb_rkey* rkCounter = remoteKey(ctx1_, reg(ctx1_, counter.data(), 16), c0_);
  const size_t kHuge = SIZE_MAX;
  EXPECT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, 65), PB_ERR_INVALID);
  EXPECT_NE(error(ctx0_).find("source range"), std::string::npos) << error(ctx0_);
  EXPECT_EQ(t_->write(c0_, mrSrc, 65, rkDst, 0, 0), PB_ERR_INVALID);
  EXPECT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 60, 8), PB_ERR_INVALID);
  EXPECT_NE(error(ctx0_).find("destination range"), std::string::npos) << error(ctx0_);
  EXPECT_EQ(t_->write(c0_, mrSrc, 8, rkDst, 0, kHuge), PB_ERR_INVALID) << "size overflow";
  EXPECT_EQ(t_->write(c0_, mrSrc, kHuge, rkDst, 0, 2), PB_ERR_INVALID) << "offset overflow";
  EXPECT_EQ(t_->write(c0_, mrSrc, 0, rkDst, kHuge - 1, 4), PB_ERR_INVALID) << "offset overflow";
  EXPECT_EQ(t_->signal(c0_, rkCounter, 12, 1), PB_ERR_INVALID) << "unaligned";
  EXPECT_EQ(t_->signal(c0_, rkCounter, 16, 1), PB_ERR_INVALID) << "past the end";
  EXPECT_EQ(t_->signal(c0_, rkCounter, kHuge - 3, 1), PB_ERR_INVALID) << "offset overflow";
  EXPECT_EQ(t_->write(c0_, nullptr, 0, rkDst, 0, 1), PB_ERR_INVALID);
  // Rejected posts take no sequence number and leave the connection usable.
  ASSERT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, 64), PB_OK) << error(ctx0_);
  ASSERT_EQ(t_->signal(c0_, rkCounter, 8, 1), PB_OK) << error(ctx0_);
  waitCompleted(ctx0_, c0_, 2);
  waitCounter(&counter[1], 1);
}

// ---- close -------------------------------------------------------------------

TEST_P(TransportPairTest, FreeNeverHangsWithWritesInFlight) {
  constexpr size_t kSize = 32 << 20;
  // Kept to the end of the process: the writes abandoned by free() may still
  // be landing (UCX's rendezvous receives, plugins/ucx/README.md), and the
  // fixture deregisters the regions only after this body returns.
  static std::vector<uint8_t> src(kSize), dst(kSize);
  pb_mr* mrSrc = reg(ctx0_, src.data(), kSize);
  pb_rkey* rkDst = remoteKey(ctx1_, reg(ctx1_, dst.data(), kSize), c0_);
  for (int i = 0; i < 8; ++i) ASSERT_EQ(t_->write(c0_, mrSrc, 0, rkDst, 0, kSize), PB_OK) << error(ctx0_);
  auto start = Clock::now();
  freeEnds({c0_, c1_});
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
}

}  // namespace plugboard::test
