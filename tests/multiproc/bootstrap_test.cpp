// TcpBootstrap across forked rank processes on loopback: rendezvous,
// collectives, point-to-point messages, and the errors users will meet.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "multiproc.hpp"
#include "plugboard/bootstrap.hpp"
#include "plugboard/error.hpp"

namespace plugboard {
namespace {

using namespace std::chrono_literals;
using test::runRanks;
using test::runRanksEach;

constexpr auto kRunLimit = std::chrono::milliseconds(90s);  // harness kills ranks after this
constexpr auto kOpTimeout = std::chrono::milliseconds(30s);

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A per-rank byte pattern, so a misplaced or shifted byte is caught.
char patternByte(int rank, size_t i) { return static_cast<char>((i * 131 + static_cast<size_t>(rank) * 17 + (i >> 12)) & 0xff); }

// Counters visible to every forked rank.
struct SharedCounters {
  SharedCounters() {
    void* p = mmap(nullptr, sizeof(std::atomic<int>) * 8, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
    counters = new (p) std::atomic<int>[8]();
  }
  ~SharedCounters() { munmap(counters, sizeof(std::atomic<int>) * 8); }
  std::atomic<int>* counters;
};

// A loopback port nobody listens on right now (the kernel picked it).
uint16_t freeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  uint16_t port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

class BootstrapRanks : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapRanks, AllGatherPlacesEveryRanksValue) {
  test::expectAllPassed(runRanks(GetParam(), kRunLimit, [](int rank, int nranks, const UniqueId& id) {
    TcpBootstrap b(rank, nranks, id, kOpTimeout);
    ASSERT_EQ(b.rank(), rank);
    ASSERT_EQ(b.size(), nranks);
    std::vector<uint64_t> words(static_cast<size_t>(nranks), 0);
    words[static_cast<size_t>(rank)] = 0xabc000 + static_cast<uint64_t>(rank) * 7919;
    b.allGather(words.data(), sizeof(uint64_t));
    for (int r = 0; r < nranks; ++r) EXPECT_EQ(words[static_cast<size_t>(r)], 0xabc000 + static_cast<uint64_t>(r) * 7919);
    // A second, wider round right after the first must not mix their data.
    const size_t width = 37;
    std::vector<char> slots(width * static_cast<size_t>(nranks), 0);
    for (size_t i = 0; i < width; ++i) slots[static_cast<size_t>(rank) * width + i] = patternByte(rank, i);
    b.allGather(slots.data(), width);
    for (int r = 0; r < nranks; ++r)
      for (size_t i = 0; i < width; ++i)
        ASSERT_EQ(slots[static_cast<size_t>(r) * width + i], patternByte(r, i)) << "slot " << r << " byte " << i;
  }));
}

TEST_P(BootstrapRanks, AllGatherBlobsKeepsEachSize) {
  test::expectAllPassed(runRanks(GetParam(), kRunLimit, [](int rank, int nranks, const UniqueId& id) {
    TcpBootstrap b(rank, nranks, id, kOpTimeout);
    auto sizeOf = [](int r) { return static_cast<size_t>(r == 0 ? 0 : r * 1000 + 3); };  // rank 0: empty
    std::vector<char> mine(sizeOf(rank));
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = patternByte(rank, i);
    auto all = b.allGatherBlobs(mine);
    ASSERT_EQ(all.size(), static_cast<size_t>(nranks));
    for (int r = 0; r < nranks; ++r) {
      ASSERT_EQ(all[static_cast<size_t>(r)].size(), sizeOf(r)) << "blob of rank " << r;
      for (size_t i = 0; i < sizeOf(r); ++i) ASSERT_EQ(all[static_cast<size_t>(r)][i], patternByte(r, i));
    }
    auto empties = b.allGatherBlobs({});
    for (const auto& blob : empties) EXPECT_TRUE(blob.empty());
  }));
}

TEST_P(BootstrapRanks, BarrierWaitsForEveryRank) {
  SharedCounters shared;
  std::atomic<int>* arrived = shared.counters;
  test::expectAllPassed(runRanks(GetParam(), kRunLimit, [arrived](int rank, int nranks, const UniqueId& id) {
    TcpBootstrap b(rank, nranks, id, kOpTimeout);
    for (int round = 1; round <= 3; ++round) {
      if (rank == nranks - 1) std::this_thread::sleep_for(50ms);  // a late rank the others must wait for
      arrived->fetch_add(1);
      b.barrier();
      EXPECT_GE(arrived->load(), round * nranks) << "barrier " << round << " returned before every rank arrived";
      b.barrier();  // nobody starts the next round before all have checked
    }
  }));
}

TEST_P(BootstrapRanks, SendRecvRingWithOutOfOrderTags) {
  test::expectAllPassed(runRanks(GetParam(), kRunLimit, [](int rank, int nranks, const UniqueId& id) {
    TcpBootstrap b(rank, nranks, id, kOpTimeout);
    const int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
    std::string two = "tag two from " + std::to_string(rank), one = "tag one from " + std::to_string(rank);
    b.send(two.data(), two.size(), right, 2);
    b.send(one.data(), one.size(), right, 1);
    b.send(nullptr, 0, right, 1);  // an empty message keeps its place in the tag's order
    auto gotOne = b.recv(left, 1);
    auto gotEmpty = b.recv(left, 1);
    auto gotTwo = b.recv(left, 2);
    EXPECT_EQ(std::string(gotOne.begin(), gotOne.end()), "tag one from " + std::to_string(left));
    EXPECT_TRUE(gotEmpty.empty());
    EXPECT_EQ(std::string(gotTwo.begin(), gotTwo.end()), "tag two from " + std::to_string(left));
  }));
}

// Every rank sends 8 MiB before receiving: only works if waiting senders
// keep draining their incoming connections.
TEST_P(BootstrapRanks, LargeMessageArrivesIntact) {
  test::expectAllPassed(runRanks(GetParam(), kRunLimit, [](int rank, int nranks, const UniqueId& id) {
    TcpBootstrap b(rank, nranks, id, kOpTimeout);
    const size_t size = 8u << 20;
    const int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
    std::vector<char> out(size);
    for (size_t i = 0; i < size; ++i) out[i] = patternByte(rank, i);
    b.send(out.data(), out.size(), right, 9);
    std::vector<char> in = b.recv(left, 9);
    ASSERT_EQ(in.size(), size);
    size_t bad = 0;
    while (bad < size && in[bad] == patternByte(left, bad)) ++bad;
    EXPECT_EQ(bad, size) << "first wrong byte from rank " << left << " at offset " << bad;
    b.barrier();
  }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapRanks, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

// ---- failures ----------------------------------------------------------------

TEST(Bootstrap, MissingRankIsNamedInTheTimeout) {
  test::RankBody waitForAll = [](int rank, int nranks, const UniqueId& id) {
    auto start = std::chrono::steady_clock::now();
    try {
      TcpBootstrap b(rank, nranks, id, 2s);
      FAIL() << "rank " << rank << " joined a job whose rank 3 never started";
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_EQ(e.code(), ErrorCode::Timeout) << msg;
      EXPECT_LT(std::chrono::steady_clock::now() - start, 15s) << msg;
      EXPECT_TRUE(contains(msg, "rank " + std::to_string(rank))) << msg;
      if (rank == 0) {
        EXPECT_TRUE(contains(msg, "ranks that never joined: 3")) << msg;
      }
    }
  };
  test::expectAllPassed(runRanksEach({waitForAll, waitForAll, waitForAll, nullptr}, kRunLimit));
}

TEST(Bootstrap, RanksDisagreeingOnSizeFailOnBothSides) {
  auto body = [](int claimedSize) {
    return [claimedSize](int rank, int, const UniqueId& id) {
      try {
        TcpBootstrap b(rank, claimedSize, id, 10s);
        FAIL() << "rank " << rank << " joined although the ranks disagree on the size";
      } catch (const Error& e) {
        std::string msg = e.what();
        EXPECT_EQ(e.code(), ErrorCode::Remote) << msg;
        EXPECT_TRUE(contains(msg, "rank 0 has 2")) << msg;
        EXPECT_TRUE(contains(msg, "rank 1 has 3")) << msg;
      }
    };
  };
  test::expectAllPassed(runRanksEach({body(2), body(3)}, kRunLimit));
}

TEST(Bootstrap, RecvFromSilentPeerTimesOutNamingIt) {
  test::RankBody sender = [](int rank, int nranks, const UniqueId& id) {
    TcpBootstrap b(rank, nranks, id, kOpTimeout);
    b.send("x", 1, 1, 3);
    b.barrier();
  };
  test::RankBody waiter = [](int rank, int nranks, const UniqueId& id) {
    TcpBootstrap b(rank, nranks, id, 2s);
    auto start = std::chrono::steady_clock::now();
    try {
      b.recv(0, 7);
      FAIL() << "recv of a tag rank 0 never sent returned";
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_EQ(e.code(), ErrorCode::Timeout) << msg;
      EXPECT_TRUE(contains(msg, "rank 1")) << msg;
      EXPECT_TRUE(contains(msg, "from rank 0")) << msg;
      EXPECT_TRUE(contains(msg, "tag 7")) << msg;
      EXPECT_LT(std::chrono::steady_clock::now() - start, 15s) << msg;
    }
    auto got = b.recv(0, 3);  // what did arrive meanwhile is still there
    EXPECT_EQ(std::string(got.begin(), got.end()), "x");
    b.barrier();
  };
  test::expectAllPassed(runRanksEach({sender, waiter}, kRunLimit));
}

TEST(Bootstrap, RecvFromClosedPeerIsRemoteError) {
  test::RankBody leaver = [](int rank, int nranks, const UniqueId& id) {
    TcpBootstrap b(rank, nranks, id, kOpTimeout);
    b.barrier();
  };
  test::RankBody waiter = [](int rank, int nranks, const UniqueId& id) {
    TcpBootstrap b(rank, nranks, id, 10s);
    b.barrier();
    try {
      b.recv(0, 5);
      FAIL() << "recv from a rank that has gone returned";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Remote) << e.what();
      EXPECT_TRUE(contains(e.what(), "rank 0")) << e.what();
    }
  };
  test::expectAllPassed(runRanksEach({leaver, waiter}, kRunLimit));
}

TEST(Bootstrap, UniqueIdFromAddressLetsRankZeroBind) {
  const uint16_t port = freeLoopbackPort();
  ASSERT_NE(port, 0);
  const std::string addr = "127.0.0.1:" + std::to_string(port);
  EXPECT_EQ(TcpBootstrap::uniqueIdAddress(TcpBootstrap::uniqueIdFromAddress(addr)), addr);
  test::expectAllPassed(runRanks(3, kRunLimit, [addr](int rank, int nranks, const UniqueId&) {
    TcpBootstrap b(rank, nranks, TcpBootstrap::uniqueIdFromAddress(addr), kOpTimeout);
    std::vector<int> ranks(static_cast<size_t>(nranks), -1);
    ranks[static_cast<size_t>(rank)] = rank;
    b.allGather(ranks.data(), sizeof(int));
    for (int r = 0; r < nranks; ++r) EXPECT_EQ(ranks[static_cast<size_t>(r)], r);
  }));
}

TEST(Bootstrap, RankOfAnotherJobAtTheSameAddressIsRefusedAndTheJobGoesOn) {
  const uint16_t port = freeLoopbackPort();
  ASSERT_NE(port, 0);
  const std::string addr = "127.0.0.1:" + std::to_string(port);
  const UniqueId ours = TcpBootstrap::uniqueIdFromAddress(addr, "PLUGBOARD_JOB_ID=ours");
  const UniqueId stale = TcpBootstrap::uniqueIdFromAddress(addr, "PLUGBOARD_JOB_ID=earlier");
  EXPECT_NE(ours.bytes, stale.bytes);
  EXPECT_EQ(TcpBootstrap::uniqueIdAddress(stale), addr);  // same root, other job
  auto member = [ours](int rank, std::chrono::milliseconds delay) {
    return [ours, rank, delay](int, int, const UniqueId&) {
      std::this_thread::sleep_for(delay);  // rank 1 joins after the stranger knocked
      TcpBootstrap b(rank, 2, ours, kOpTimeout);
      int v[2] = {-1, -1};
      v[rank] = rank;
      b.allGather(v, sizeof(int));
      EXPECT_EQ(v[0], 0);
      EXPECT_EQ(v[1], 1);
    };
  };
  test::RankBody stranger = [stale](int, int, const UniqueId&) {
    auto start = std::chrono::steady_clock::now();
    try {
      TcpBootstrap b(1, 2, stale, 10s);
      FAIL() << "a rank of another job joined";
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_EQ(e.code(), ErrorCode::Config) << msg;
      EXPECT_TRUE(contains(msg, "serves another job")) << msg;
      EXPECT_TRUE(contains(msg, "PLUGBOARD_JOB_ID")) << msg;
      EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << msg;  // told at once, not by a timeout
    }
  };
  test::expectAllPassed(runRanksEach({member(0, 0ms), member(1, 1500ms), stranger}, kRunLimit));
}

TEST(Bootstrap, BadArgumentsAreInvalidUsage) {
  UniqueId id = TcpBootstrap::createUniqueId("lo");
  EXPECT_TRUE(contains(TcpBootstrap::uniqueIdAddress(id), "127.0.0.1:"));
  try {
    TcpBootstrap b(2, 2, id, 1s);
    FAIL() << "rank 2 of 2 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidUsage) << e.what();
    EXPECT_TRUE(contains(e.what(), "rank 2 of 2")) << e.what();
  }
  try {
    TcpBootstrap b(1, 2, UniqueId{}, 1s);
    FAIL() << "an all-zero id was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidUsage) << e.what();
  }
}

}  // namespace
}  // namespace plugboard
