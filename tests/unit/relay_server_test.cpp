// The host relay's serving thread (RelayServer) against a thread that plays
// the relay kernel on plain memory: calls served in order with their data,
// posted or sent as packets, announced and unannounced (graph replay)
// calls, and every way the service fails: a throwing run, a call out of
// sequence, a call too large, a bad collective, packets that never come or
// do not fit. Host code only: built and run with or without the GPU path.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpu/collectives/device_ctx.hpp"
#include "collectives/relay_server.hpp"
#include "plugboard/datatype.hpp"

using namespace plugboard;
using namespace plugboard::gpucoll;

namespace {

constexpr uint64_t kCapacity = 4096;

/// The shared words and data area, as the kernel would see them.
struct FakeArea {
  std::unique_ptr<RelayWords> words = std::make_unique<RelayWords>();
  std::vector<char> data = std::vector<char>(kCapacity);
  std::vector<uint64_t> inPackets = std::vector<uint64_t>(kRelayInPackets);
  std::vector<uint64_t> outPackets = std::vector<uint64_t>(kRelayOutPackets);
  uint64_t posted = 0;  // the last call's number, posted or sent as packets

  FakeArea() { std::memset(static_cast<void*>(words.get()), 0, sizeof(RelayWords)); }

  RelayArea area() { return {words.get(), data.data(), kCapacity, inPackets.data(), outPackets.data()}; }

  /// Sends call posted + 1 as packets, as the kernel does: the header, then
  /// `in` (inBytes of it) in 4-byte words, every store one 8-byte packet;
  /// `upTo` packets of the header only (a kernel that stopped half-way).
  void sendPackets(const RelayHeader& h, const std::vector<uint8_t>& in, uint64_t upTo = ~0ull) {
    const uint32_t flag = relayFlag(++posted);
    const uint64_t n = kRelayHeaderPackets + (h.inBytes + 3) / 4;
    for (uint64_t i = n; i-- > 0;) {  // the first packet last: the server starts on it
      if (i >= upTo) continue;
      uint32_t w = 0;
      if (i < kRelayHeaderPackets) {
        w = h.word(static_cast<int>(i));
      } else {
        const uint64_t at = 4 * (i - kRelayHeaderPackets);
        std::memcpy(&w, in.data() + at, std::min<uint64_t>(4, h.inBytes - at));
      }
      __atomic_store_n(&inPackets[i], relayPacket(w, flag), __ATOMIC_RELEASE);
    }
  }

  /// Waits (bounded) until the out-packets of the last call all carry its
  /// flag (at least one, as the kernel waits), and returns their bytes.
  std::vector<uint8_t> awaitResultPackets(uint64_t outBytes) const {
    const uint32_t flag = relayFlag(posted);
    std::vector<uint8_t> out(outBytes);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (uint64_t i = 0; i == 0 || 4 * i < outBytes; ++i) {
      uint64_t p;
      while ((p = __atomic_load_n(&outPackets[i], __ATOMIC_ACQUIRE)) >> 32 != flag)
        if (std::chrono::steady_clock::now() > end) return {};
      const uint32_t w = static_cast<uint32_t>(p);
      if (4 * i < outBytes) std::memcpy(out.data() + 4 * i, &w, std::min<uint64_t>(4, outBytes - 4 * i));
    }
    return out;
  }

  /// Posts call posted + 1 (or `number`) of int32 values as the kernel does.
  void post(const std::vector<int32_t>& values, uint32_t coll = static_cast<uint32_t>(Coll::AllReduce),
            uint64_t number = 0, int32_t root = 0) {
    std::memcpy(data.data(), values.data(), values.size() * sizeof(int32_t));
    postCall({values.size(), static_cast<uint32_t>(DataType::Int32), static_cast<uint32_t>(ReduceOp::Sum), coll, root},
             number);
  }

  /// Posts `call` as written, with no data.
  void postCall(const RelayCall& call, uint64_t number = 0) {
    words->call.count = call.count;
    words->call.type = call.type;
    words->call.op = call.op;
    words->call.coll = call.coll;
    words->call.root = call.root;
    words->call.recvCount = call.recvCount;
    words->call.recvPeer = call.recvPeer;
    posted = number ? number : posted + 1;
    __atomic_store_n(&words->posted, posted, __ATOMIC_RELEASE);
  }

  /// Waits (bounded) for `done` to reach the last posted call or `failed`.
  bool awaitDone(std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) const {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (done() < posted && !failed())
      if (std::chrono::steady_clock::now() > end) return false;
    return done() >= posted;
  }

  bool awaitFailed(std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) const {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!failed())
      if (std::chrono::steady_clock::now() > end) return false;
    return true;
  }

  uint64_t done() const { return __atomic_load_n(&words->done, __ATOMIC_ACQUIRE); }
  bool failed() const { return __atomic_load_n(&words->failed, __ATOMIC_ACQUIRE) != 0; }

  int32_t at(size_t i) const {
    int32_t v;
    std::memcpy(&v, data.data() + i * sizeof(int32_t), sizeof(v));
    return v;
  }
};

/// A run function that adds 1000 to every int32 (what a peer's data would add).
void addThousand(const RelayCall& c, char* data) {
  for (uint64_t i = 0; i < c.count; ++i) {
    int32_t v;
    std::memcpy(&v, data + i * sizeof(v), sizeof(v));
    v += 1000;
    std::memcpy(data + i * sizeof(v), &v, sizeof(v));
  }
}

std::unique_ptr<RelayServer> serve(FakeArea& a, RelayServer::RunFn run) {
  return std::make_unique<RelayServer>(a.area(), 2, std::move(run), "rank 0 (test): relay");
}

/// A run function that adds 1 to every byte of a uint8 call.
void addOneToEachByte(const RelayCall& c, char* data) {
  for (uint64_t i = 0; i < c.count; ++i) data[i] = static_cast<char>(static_cast<uint8_t>(data[i]) + 1);
}

constexpr uint32_t kUint8 = static_cast<uint32_t>(DataType::Uint8);
constexpr uint32_t kAllReduce = static_cast<uint32_t>(Coll::AllReduce);

/// The header of a uint8 allreduce of n bytes in and out at offset 0.
RelayHeader bytesCall(uint32_t n) {
  RelayHeader h;
  h.call = {n, kUint8, static_cast<uint32_t>(ReduceOp::Sum), kAllReduce, 0};
  h.inBytes = h.outBytes = n;
  return h;
}

}  // namespace

TEST(RelayServer, ServesAnnouncedCallsInOrderWithTheirData) {
  FakeArea a;
  std::vector<uint64_t> counts;
  auto server = serve(a, [&](const RelayCall& c, char* data) {
    counts.push_back(c.count);
    addThousand(c, data);
  });
  for (int32_t call = 1; call <= 200; ++call) {
    const size_t n = 1 + static_cast<size_t>(call) % 7;
    server->expectCall();
    a.post(std::vector<int32_t>(n, call));
    ASSERT_TRUE(a.awaitDone()) << "call " << call << ": " << server->failure();
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(a.at(i), call + 1000) << "call " << call << " element " << i;
  }
  EXPECT_EQ(server->served(), 200u);
  EXPECT_EQ(a.done(), 200u);
  EXPECT_EQ(counts.size(), 200u);
  EXPECT_EQ(counts[5], 7u);  // call 6: 1 + 6 % 7
  EXPECT_EQ(server->failure(), "");
  EXPECT_FALSE(a.failed());
}

TEST(RelayServer, FindsACallNoHostCallAnnouncedAfterItWentIdle) {
  FakeArea a;
  // A 1 ms spin window and a 20 ms idle poll: the thread is asleep when the
  // call comes, as after a pause before a CUDA graph replay.
  RelayServer server(a.area(), 2, addThousand, "rank 0 (test): relay", std::chrono::microseconds(1000),
                     std::chrono::microseconds(20000));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  a.post({7, 8});
  ASSERT_TRUE(a.awaitDone()) << server.failure();
  EXPECT_EQ(a.at(0), 1007);
  EXPECT_EQ(a.at(1), 1008);
}

TEST(RelayServer, AnAnnouncedCallThatComesLateIsStillServed) {
  FakeArea a;
  auto server = serve(a, addThousand);
  server->expectCall();  // as a kernel queued behind a long one: the spin gives up after kHintSpin
  std::this_thread::sleep_for(RelayServer::kHintSpin + std::chrono::milliseconds(50));
  a.post({3});
  ASSERT_TRUE(a.awaitDone()) << server->failure();
  EXPECT_EQ(a.at(0), 1003);
}

TEST(RelayServer, ARunThatThrowsEndsTheServiceNamingTheCallAndTheReason) {
  FakeArea a;
  auto server = serve(a, [](const RelayCall& c, char* data) {
    if (c.count == 3) throw std::runtime_error("rank 1 (host b) closed its connection");
    addThousand(c, data);
  });
  a.post({1});
  ASSERT_TRUE(a.awaitDone());
  a.post({1, 2, 3});
  ASSERT_TRUE(a.awaitFailed());
  EXPECT_LT(a.done(), a.posted);
  const std::string why = server->failure();
  EXPECT_NE(why.find("rank 0 (test): relay: call 2 failed: rank 1 (host b) closed its connection"), std::string::npos)
      << why;
  a.post({4});  // nobody serves it any more
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(a.done(), 1u);
  EXPECT_EQ(server->served(), 1u);
}

TEST(RelayServer, ACallOutOfSequenceFailsNamingBothNumbers) {
  FakeArea a;
  auto server = serve(a, addThousand);
  a.post({1});
  ASSERT_TRUE(a.awaitDone());
  a.post({2}, static_cast<uint32_t>(Coll::AllReduce), 5);
  ASSERT_TRUE(a.awaitFailed());
  EXPECT_NE(server->failure().find("the device posted call 5 where call 2 was due"), std::string::npos)
      << server->failure();
  EXPECT_EQ(a.done(), 1u);
}

/// Posts a call the server must refuse before running it; the failure must contain `needle`.
static void expectRefused(const std::function<void(FakeArea&)>& post, const std::string& needle) {
  FakeArea a;
  bool ran = false;
  auto server = serve(a, [&](const RelayCall&, char*) { ran = true; });
  post(a);
  ASSERT_TRUE(a.awaitFailed()) << needle;
  EXPECT_FALSE(ran) << needle;
  EXPECT_NE(server->failure().find(needle), std::string::npos) << server->failure();
}

constexpr uint32_t kInt32 = static_cast<uint32_t>(DataType::Int32);
constexpr uint32_t kSum = static_cast<uint32_t>(ReduceOp::Sum);

TEST(RelayServer, ACallLargerThanTheAreaFailsBeforeItRuns) {
  expectRefused([](FakeArea& a) { a.postCall({kCapacity / 4 + 1, kInt32, kSum, static_cast<uint32_t>(Coll::AllReduce), 0}); },
                "call 1: 1025 elements of 4 bytes exceed the 4096-byte relay area");
  // 513 int32 per block x 2 ranks = 4104 bytes.
  expectRefused([](FakeArea& a) { a.postCall({513, kInt32, kSum, static_cast<uint32_t>(Coll::AllGather), 0}); },
                "513 elements per rank block of 4 bytes exceed the 4096-byte relay area");
}

TEST(RelayServer, ACollectiveItDoesNotRelayABadTypeOrRootFailsNamingIt) {
  expectRefused([](FakeArea& a) { a.postCall({1, kInt32, kSum, 99, 0}); }, "collective 99 is not relayed");
  expectRefused([](FakeArea& a) { a.postCall({1, kInt32, kSum, static_cast<uint32_t>(Coll::SendRecv), 1, 1, 5}); },
                "recv peer 5 is out of range [0, 2)");
  expectRefused([](FakeArea& a) { a.postCall({1, kInt32, kSum, static_cast<uint32_t>(Coll::Send), -1}); },
                "peer -1 is out of range [0, 2)");
  expectRefused([](FakeArea& a) { a.postCall({1, kInt32, kSum, static_cast<uint32_t>(Coll::Broadcast), 2}); },
                "root 2 is out of range [0, 2)");
  expectRefused([](FakeArea& a) { a.postCall({1, 99, kSum, static_cast<uint32_t>(Coll::Reduce), 0}); },
                "data type 99 is unknown");
}

TEST(RelayServer, StartsFromTheCallsAlreadyDone) {
  FakeArea a;
  a.words->done = 41;  // an earlier server of this area served 41 calls
  a.posted = 41;
  a.words->posted = 41;
  auto server = serve(a, addThousand);
  server->expectCall();
  a.post({5});
  ASSERT_TRUE(a.awaitDone()) << server->failure();
  EXPECT_EQ(a.done(), 42u);
  EXPECT_EQ(a.at(0), 1005);
}

// Small calls come as packets between posted ones (the kernel picks by
// size): every byte count from 1 to 13 (words cut at the tail) and the
// packet limit, the results read from the out-packets as the kernel reads
// them, `done` and the call numbers shared by both ways of posting.
TEST(RelayServer, ServesCallsSentAsPacketsBetweenPostedOnesWithTheirData) {
  FakeArea a;
  auto server = serve(a, [](const RelayCall& c, char* data) {
    if (c.type == kUint8) return addOneToEachByte(c, data);
    addThousand(c, data);
  });
  std::vector<uint32_t> sizes;
  for (uint32_t n = 1; n <= 13; ++n) sizes.push_back(n);
  sizes.push_back(static_cast<uint32_t>(kRelayPacketBytes));
  for (uint32_t n : sizes) {
    std::vector<uint8_t> in(n);
    for (uint32_t i = 0; i < n; ++i) in[i] = static_cast<uint8_t>(n * 7 + i);
    server->expectCall();
    a.sendPackets(bytesCall(n), in);
    const std::vector<uint8_t> out = a.awaitResultPackets(n);
    ASSERT_EQ(out.size(), n) << n << " bytes: " << server->failure();
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(out[i], static_cast<uint8_t>(in[i] + 1)) << n << " bytes, byte " << i;
    ASSERT_TRUE(a.awaitDone()) << server->failure();
    a.post({static_cast<int32_t>(n)});  // a posted call after each packet call
    ASSERT_TRUE(a.awaitDone()) << server->failure();
    EXPECT_EQ(a.at(0), static_cast<int32_t>(n) + 1000);
  }
  EXPECT_EQ(server->served(), 2 * sizes.size());
  EXPECT_EQ(server->failure(), "");
}

TEST(RelayServer, APacketCallWithNoResultStillGetsItsDonePacket) {
  FakeArea a;
  auto server = serve(a, addOneToEachByte);
  RelayHeader h = bytesCall(5);
  h.call.coll = static_cast<uint32_t>(Coll::Reduce);
  h.call.root = 1;  // this rank is not the root: nothing comes back
  h.outBytes = 0;
  a.sendPackets(h, {1, 2, 3, 4, 5});
  EXPECT_EQ(a.awaitResultPackets(0).size(), 0u);
  EXPECT_EQ(relayFlag(1), static_cast<uint32_t>(a.outPackets[0] >> 32)) << server->failure();
  ASSERT_TRUE(a.awaitDone());
  EXPECT_EQ(static_cast<uint8_t>(a.data[4]), 6);
}

TEST(RelayServer, PacketsThatNeverAllArriveFailNamingTheFirstMissing) {
  FakeArea a;
  auto server = serve(a, addOneToEachByte);
  const auto start = std::chrono::steady_clock::now();
  a.sendPackets(bytesCall(8), {1, 2, 3, 4, 5, 6, 7, 8}, kRelayHeaderPackets + 1);  // the second data word never comes
  ASSERT_TRUE(a.awaitFailed());
  EXPECT_GE(std::chrono::steady_clock::now() - start, RelayServer::kPacketWait);
  EXPECT_NE(server->failure().find("call 1: packet 9 of its input did not arrive within 1000 ms of the first"),
            std::string::npos)
      << server->failure();
  EXPECT_EQ(a.done(), 0u);
}

TEST(RelayServer, PacketsThatDoNotFitTheAreaOrTheLimitFailBeforeTheCallRuns) {
  expectRefused(
      [](FakeArea& a) {
        RelayHeader h = bytesCall(16);
        h.outOffset = static_cast<uint32_t>(kCapacity) - 8;  // 16 bytes from 8 before the end
        a.sendPackets(h, std::vector<uint8_t>(16));
      },
      "call 1: packets of 16 bytes in at 0 and 16 out at 4088 do not fit the 4096-byte relay area");
  expectRefused(
      [](FakeArea& a) {
        RelayHeader h = bytesCall(8);
        h.inBytes = static_cast<uint32_t>(kRelayPacketBytes) + 4;
        a.sendPackets(h, std::vector<uint8_t>(h.inBytes), kRelayHeaderPackets);
      },
      "or the " + std::to_string(kRelayPacketBytes) + "-byte packet limit");
}
