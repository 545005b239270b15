// Every host collective x data type x op x odd counts x in/out-of-place x
// roots, for 1, 2, 3, 4, 5 and 8 forked ranks over the ethernet plugin,
// checked element by element against collective_reference.hpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

#include <unistd.h>

#include "close_check.hpp"
#include "collective_reference.hpp"
#include "comm_fixture.hpp"
#include "multiproc.hpp"
#include "plugboard/host_collectives.hpp"

using namespace plugboard;
using namespace plugboard::test;

namespace {

const std::vector<DataType> kTypes = {DataType::Int8,       DataType::Uint8,     DataType::Int32,   DataType::Uint32,
                                      DataType::Int64,      DataType::Uint64,    DataType::Float16, DataType::BFloat16,
                                      DataType::Float32,    DataType::Float64,   DataType::Float8E4M3,
                                      DataType::Float8E5M2};
const std::vector<ReduceOp> kOps = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg};
// 0, 1, primes, and one past the one-step threshold (set to 4 KiB below) with a
// chunk of 4 KiB, so the pipelined two-step path runs with many chunks.
const std::vector<size_t> kCounts = {0, 1, 7, 1009, 12347};

struct Case {
  int rank, nranks;
  DataType type;
  ReduceOp op;
  size_t count;
  bool inPlace;
  int root;
  std::string describe(const char* what) const {
    return std::string(what) + " rank " + std::to_string(rank) + "/" + std::to_string(nranks) + " " + dataTypeName(type) +
           " " + reduceOpName(op) + " count " + std::to_string(count) + (inPlace ? " in-place" : "") + " root " +
           std::to_string(root);
  }
};

void check(const Case& c, const char* what, const void* buf, size_t count, size_t firstElement,
           const std::function<double(size_t)>& expected) {
  for (size_t i = 0; i < count; ++i) {
    double got = loadValue(buf, i, c.type), want = expected(firstElement + i);
    if (!sameValue(got, want, c.type, c.op))
      throw std::runtime_error(c.describe(what) + ": element " + std::to_string(firstElement + i) + " is " +
                               std::to_string(got) + ", expected " + std::to_string(want));
  }
}

using CaseBody = std::function<void(HostCollectives&, const Case&)>;

void allReduceCase(HostCollectives& hc, const Case& c) {
  size_t es = dataTypeSize(c.type);
  std::vector<char> send(c.count * es + 1), recv(c.count * es + 1);
  fillInputs(send.data(), c.count, 0, c.rank, c.type, c.op);
  void* out = c.inPlace ? send.data() : recv.data();
  hc.allReduce(send.data(), out, c.count, c.type, c.op);
  check(c, "allreduce", out, c.count, 0, [&](size_t i) { return expectedValue(i, c.nranks, c.type, c.op); });
}

void reduceScatterCase(HostCollectives& hc, const Case& c) {
  size_t es = dataTypeSize(c.type), n = static_cast<size_t>(c.nranks);
  std::vector<char> send(n * c.count * es + 1), recv(c.count * es + 1);
  fillInputs(send.data(), n * c.count, 0, c.rank, c.type, c.op);
  void* out = c.inPlace ? send.data() + c.rank * c.count * es : recv.data();
  hc.reduceScatter(send.data(), out, c.count, c.type, c.op);
  check(c, "reducescatter", out, c.count, c.rank * c.count, [&](size_t i) { return expectedValue(i, c.nranks, c.type, c.op); });
}

void reduceCase(HostCollectives& hc, const Case& c) {
  size_t es = dataTypeSize(c.type);
  std::vector<char> send(c.count * es + 1), recv(c.count * es + 1);
  fillInputs(send.data(), c.count, 0, c.rank, c.type, c.op);
  void* out = c.inPlace ? send.data() : recv.data();
  hc.reduce(send.data(), out, c.count, c.type, c.op, c.root);
  if (c.rank == c.root)
    check(c, "reduce", out, c.count, 0, [&](size_t i) { return expectedValue(i, c.nranks, c.type, c.op); });
}

void allGatherCase(HostCollectives& hc, const Case& c) {
  size_t es = dataTypeSize(c.type), n = static_cast<size_t>(c.nranks);
  std::vector<char> send(c.count * es + 1), recv(n * c.count * es + 1);
  fillInputs(send.data(), c.count, 0, c.rank, c.type, ReduceOp::Sum);
  const void* in = send.data();
  if (c.inPlace) {
    std::memcpy(recv.data() + c.rank * c.count * es, send.data(), c.count * es);
    in = recv.data() + c.rank * c.count * es;
  }
  hc.allGather(in, recv.data(), c.count, c.type);
  for (int r = 0; r < c.nranks; ++r)
    check(c, "allgather", recv.data() + r * c.count * es, c.count, 0,
          [&](size_t i) { std::vector<char> t(8); storeValue(t.data(), 0, c.type, inputValue(r, i, c.type, ReduceOp::Sum)); return loadValue(t.data(), 0, c.type); });
}

void broadcastCase(HostCollectives& hc, const Case& c) {
  size_t es = dataTypeSize(c.type);
  std::vector<char> send(c.count * es + 1), recv(c.count * es + 1, 0);
  fillInputs(send.data(), c.count, 0, c.root, c.type, ReduceOp::Sum);
  void* out = c.inPlace && c.rank == c.root ? send.data() : recv.data();
  hc.broadcast(send.data(), out, c.count, c.type, c.root);
  check(c, "broadcast", out, c.count, 0,
        [&](size_t i) { std::vector<char> t(8); storeValue(t.data(), 0, c.type, inputValue(c.root, i, c.type, ReduceOp::Sum)); return loadValue(t.data(), 0, c.type); });
}

void allToAllCase(HostCollectives& hc, const Case& c) {
  size_t es = dataTypeSize(c.type), n = static_cast<size_t>(c.nranks);
  std::vector<char> send(n * c.count * es + 1), recv(n * c.count * es + 1);
  // Block j of rank r holds inputValue(r * 100 + j, ...).
  for (size_t j = 0; j < n; ++j) fillInputs(send.data() + j * c.count * es, c.count, 0, c.rank * 100 + static_cast<int>(j), c.type, ReduceOp::Sum);
  void* out = c.inPlace ? send.data() : recv.data();
  hc.allToAll(send.data(), out, c.count, c.type);
  for (int r = 0; r < c.nranks; ++r)
    check(c, "alltoall", static_cast<char*>(out) + r * c.count * es, c.count, 0, [&](size_t i) {
      std::vector<char> t(8);
      storeValue(t.data(), 0, c.type, inputValue(r * 100 + c.rank, i, c.type, ReduceOp::Sum));
      return loadValue(t.data(), 0, c.type);
    });
}

void sendRecvCase(HostCollectives& hc, const Case& c) {
  // A ring: send to rank+1, receive from rank-1, with sendRecv; then the
  // reverse direction with separate send/recv ordered to avoid a cycle.
  size_t es = dataTypeSize(c.type);
  int next = (c.rank + 1) % c.nranks, prev = (c.rank + c.nranks - 1) % c.nranks;
  std::vector<char> send(c.count * es + 1), recv(c.count * es + 1);
  fillInputs(send.data(), c.count, 0, c.rank, c.type, ReduceOp::Sum);
  auto from = [&](int r) {
    return [&, r](size_t i) { std::vector<char> t(8); storeValue(t.data(), 0, c.type, inputValue(r, i, c.type, ReduceOp::Sum)); return loadValue(t.data(), 0, c.type); };
  };
  if (c.inPlace) {  // one buffer: what arrives must not overwrite what is still to be sent
    std::vector<char> buf = send;
    hc.sendRecv(buf.data(), c.count, next, buf.data(), c.count, prev, c.type);
    check(c, "sendrecv in place", buf.data(), c.count, 0, from(prev));
    return;
  }
  hc.sendRecv(send.data(), c.count, next, recv.data(), c.count, prev, c.type);
  check(c, "sendrecv", recv.data(), c.count, 0, from(prev));
  if (c.nranks < 2) return;
  if (c.rank % 2 == 0) {
    hc.send(send.data(), c.count, c.type, prev);
    hc.recv(recv.data(), c.count, c.type, next);
  } else {
    hc.recv(recv.data(), c.count, c.type, next);
    hc.send(send.data(), c.count, c.type, prev);
  }
  check(c, "send/recv", recv.data(), c.count, 0, from(next));
}

// Runs body for every type, op (when reduces), count, placement and root.
// directBytes: host_direct_bytes ("0": every message in chunks; "1024":
// the larger counts as direct transfers, the smaller in chunks). Direct
// transfers go in pieces of 4 KiB, so the larger ones take several, the
// last one short.
void runMatrix(int nranks, bool reduces, bool rooted, const CaseBody& body, const char* directBytes = "0",
               const char* halvingBytes = "0", const char* smallBytes = "4096") {
  auto results = runRanks(nranks, std::chrono::seconds(240), [&](int rank, int n, const UniqueId& id) {
    setenv("PLUGBOARD_TRANSPORTS", "ethernet", 1);
    setenv("PLUGBOARD_HOST_CHUNK_BYTES", "4096", 1);
    setenv("PLUGBOARD_ALLREDUCE_SMALL_BYTES", smallBytes, 1);
    setenv("PLUGBOARD_HOST_DIRECT_BYTES", directBytes, 1);
    setenv("PLUGBOARD_HOST_DIRECT_PIECE_BYTES", "4096", 1);
    setenv("PLUGBOARD_ALLREDUCE_HALVING_BYTES", halvingBytes, 1);
    // Allgathers on 4 and 8 ranks by doubling up to 64 KiB gathered (1009
    // elements, in several 4 KiB chunks; 12347 bytes on 4 ranks), above it
    // (the other 12347-element cases) by the direct exchange.
    setenv("PLUGBOARD_ALLGATHER_DOUBLING_BYTES", "65536", 1);
    Communicator comm(loopbackBootstrap(rank, n, id));
    HostCollectives hc(comm);
    std::vector<ReduceOp> ops = reduces ? kOps : std::vector<ReduceOp>{ReduceOp::Sum};
    for (DataType t : kTypes)
      for (ReduceOp op : ops)
        for (size_t count : kCounts)
          for (bool inPlace : {false, true})
            for (int root = 0; root < (rooted ? n : 1); root += (rooted && n > 3 ? n - 1 : 1))
              body(hc, Case{rank, n, t, op, count, inPlace, rooted ? root : -1});
    comm.bootstrap().barrier();
  });
  expectAllPassed(results);
}

class HostCollectivesTest : public ::testing::TestWithParam<int> {};
/// The same matrices with direct transfers (ethernet registers cheaply).
class HostCollectivesDirectTest : public ::testing::TestWithParam<int> {};

}  // namespace

TEST_P(HostCollectivesTest, AllReduce) { runMatrix(GetParam(), true, false, allReduceCase); }
TEST_P(HostCollectivesTest, ReduceScatter) { runMatrix(GetParam(), true, false, reduceScatterCase); }
TEST_P(HostCollectivesTest, Reduce) { runMatrix(GetParam(), true, true, reduceCase); }
TEST_P(HostCollectivesTest, AllGather) { runMatrix(GetParam(), false, false, allGatherCase); }
TEST_P(HostCollectivesTest, Broadcast) { runMatrix(GetParam(), false, true, broadcastCase); }
TEST_P(HostCollectivesTest, AllToAll) { runMatrix(GetParam(), false, false, allToAllCase); }
TEST_P(HostCollectivesTest, SendRecv) { runMatrix(GetParam(), false, false, sendRecvCase); }

INSTANTIATE_TEST_SUITE_P(Ranks, HostCollectivesTest, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

TEST_P(HostCollectivesDirectTest, AllReduce) { runMatrix(GetParam(), true, false, allReduceCase, "1024"); }
TEST_P(HostCollectivesDirectTest, ReduceScatter) { runMatrix(GetParam(), true, false, reduceScatterCase, "1024"); }
TEST_P(HostCollectivesDirectTest, Reduce) { runMatrix(GetParam(), true, true, reduceCase, "1024"); }
TEST_P(HostCollectivesDirectTest, AllGather) { runMatrix(GetParam(), false, false, allGatherCase, "1024"); }
TEST_P(HostCollectivesDirectTest, Broadcast) { runMatrix(GetParam(), false, true, broadcastCase, "1024"); }
TEST_P(HostCollectivesDirectTest, AllToAll) { runMatrix(GetParam(), false, false, allToAllCase, "1024"); }
TEST_P(HostCollectivesDirectTest, SendRecv) { runMatrix(GetParam(), false, false, sendRecvCase, "1024"); }

INSTANTIATE_TEST_SUITE_P(Ranks, HostCollectivesDirectTest, ::testing::Values(2, 3, 5),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

namespace {
/// The allreduce matrix with every allreduce but the empty ones on 4 or 8
/// ranks going by recursive halving and doubling (no small size), in 4 KiB
/// chunks: 1 and 7 elements leave segments empty.
class HostAllReduceHalvingTest : public ::testing::TestWithParam<int> {};
}  // namespace

TEST_P(HostAllReduceHalvingTest, AllReduce) {
  runMatrix(GetParam(), true, false, allReduceCase, "0", "1000000", "0");
}

INSTANTIATE_TEST_SUITE_P(Ranks, HostAllReduceHalvingTest, ::testing::Values(4, 8),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

namespace {

/// Rank r's input: values that round differently in every order of
/// summation, and a NaN on rank i % n at every 7th element i (min and max
/// give NaN or the number depending on which operand is first).
std::vector<float> bitsInput(int rank, int nranks, size_t count) {
  std::vector<float> v(count);
  uint32_t x = 2654435761u * static_cast<uint32_t>(rank + 1);
  for (size_t i = 0; i < count; ++i) {
    x = x * 1664525u + 1013904223u;
    v[i] = static_cast<float>(x >> 8) * 1e-3f - 8e3f;
    if (i % 7 == 0 && static_cast<int>(i % static_cast<size_t>(nranks)) == rank) v[i] = NAN;
  }
  return v;
}

}  // namespace

// Every rank of an allreduce gets the same bits, whatever the path (one
// step, recursive doubling with each chunk reduced as it lands, halving
// and doubling, two steps)
// and placement: a rank that combined its partner's partial in another
// order than the partner did would differ where min and max meet a NaN.
class HostAllReduceBitsTest : public ::testing::TestWithParam<int> {};

TEST_P(HostAllReduceBitsTest, EveryRankGetsTheSameBits) {
  expectAllPassed(runRanks(GetParam(), std::chrono::seconds(120), [](int rank, int n, const UniqueId& id) {
    CommunicatorOptions o;
    // Chunks of 4 KiB: 1500 floats (6000 B) take two on the doubling path;
    // 1900 floats (7600 B, above allreduce_doubling_bytes but not
    // allreduce_small_bytes) and 3000 floats (12000 B) go by halving and
    // doubling on 4 and 8 ranks (7600 B by doubling on 2, one step on 3);
    // 40000 floats by the two-step exchange.
    o.overrides = {{"transports", "ethernet"},           {"timeout", "20"},
                   {"host_chunk_bytes", "4096"},        {"allreduce_small_bytes", "8192"},
                   {"allreduce_doubling_bytes", "6500"}, {"allreduce_halving_bytes", "100000"}};
    Communicator comm(loopbackBootstrap(rank, n, id), o);
    HostCollectives hc(comm);
    for (size_t count : {size_t{1}, size_t{1500}, size_t{1900}, size_t{3000}, size_t{40000}})
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max})
        for (bool inPlace : {false, true}) {
          std::vector<float> in = bitsInput(rank, n, count), out(count);
          float* result = inPlace ? in.data() : out.data();
          hc.allReduce(in.data(), result, count, DataType::Float32, op);
          std::vector<float> all(count * static_cast<size_t>(n));
          hc.allGather(result, all.data(), count, DataType::Float32);
          for (int r = 0; r < n; ++r)
            if (std::memcmp(all.data() + r * count, all.data(), count * sizeof(float)) != 0)
              throw std::runtime_error("allreduce of " + std::to_string(count) + " floats, " + reduceOpName(op) +
                                       (inPlace ? " in place" : "") + ": rank " + std::to_string(r) +
                                       "'s result differs from rank 0's");
        }
  }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, HostAllReduceBitsTest, ::testing::Values(2, 3, 4, 8),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

namespace {

/// Ethernet, direct transfers from 1 KiB, a 10 s timeout.
CommunicatorOptions directOverEthernet() {
  CommunicatorOptions o;
  o.overrides = {{"transports", "ethernet"}, {"host_direct_bytes", "1024"}, {"timeout", "10"}};
  return o;
}

}  // namespace

// Ranks that disagree on a message's size, where one or both would take a
// direct transfer, fail with an error naming the disagreement, never a hang.
TEST(HostCollectivesDirect, DisagreeingSizesEndInANamedError) {
  expectAllPassed(runRanks(2, std::chrono::seconds(60), [](int rank, int n, const UniqueId& id) {
    Communicator comm(loopbackBootstrap(rank, n, id), directOverEthernet());
    HostCollectives hc(comm);
    std::vector<float> buf(8192, 1.0f);
    // Both direct, sizes differ: the sender refuses the offer; the receiver
    // hears of it through the sender's failure notice.
    requireError([&] {
      if (rank == 0) hc.send(buf.data(), 4096, DataType::Float32, 1);
      else hc.recv(buf.data(), 8192, DataType::Float32, 0);
    }, ErrorCode::Remote, {"disagree"});
  }));
  expectAllPassed(runRanks(2, std::chrono::seconds(60), [](int rank, int n, const UniqueId& id) {
    Communicator comm(loopbackBootstrap(rank, n, id), directOverEthernet());
    HostCollectives hc(comm);
    std::vector<float> buf(4096, 1.0f);
    // A small message in chunks where the receiver expects a direct one: the
    // receiver names it (the sender's part completes, as in the chunked path).
    if (rank == 0) {
      hc.send(buf.data(), 100, DataType::Float32, 1);
    } else {
      requireError([&] { hc.recv(buf.data(), 4096, DataType::Float32, 0); }, ErrorCode::Remote,
                   {"disagree", "rank 0"});
    }
    comm.bootstrap().barrier();
  }));
}

// All-peers exchanges at the default host_direct_bytes (256 KiB): on 4 ranks
// a message travels direct from 87382 bytes (a third of it). An allreduce
// whose segments are 21846 and 21845 floats sends some messages of one
// exchange direct (87384 bytes) and some in chunks (87380): both ends of each
// pair choose alike and every result is right; the allgathers and alltoalls
// just above and below the line too.
TEST(HostCollectivesDirect, AllPeersMessagesAroundTheSharedLineAgreeAndAreRight) {
  expectAllPassed(runRanks(4, std::chrono::seconds(120), [](int rank, int n, const UniqueId& id) {
    CommunicatorOptions o;
    o.overrides = {{"transports", "ethernet"}, {"timeout", "20"}};
    Communicator comm(loopbackBootstrap(rank, n, id), o);
    HostCollectives hc(comm);
    auto value = [](int r, size_t i) { return static_cast<float>((r + 1) * 1000 + static_cast<int>(i % 997)); };
    auto fail = [&](const std::string& what, size_t i, float got, float want) {
      throw std::runtime_error(what + ": element " + std::to_string(i) + " is " + std::to_string(got) + ", expected " +
                               std::to_string(want));
    };
    const size_t straddling = 4 * 21845 + 2;
    std::vector<float> in(straddling), out(straddling);
    for (size_t i = 0; i < straddling; ++i) in[i] = value(rank, i);
    hc.allReduce(in.data(), out.data(), straddling, DataType::Float32, ReduceOp::Sum);
    for (size_t i = 0; i < straddling; ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r) want += value(r, i);
      if (out[i] != want) fail("allreduce", i, out[i], want);
    }
    for (const size_t perRank : {size_t(21845), size_t(21846)}) {
      std::vector<float> mine(perRank * n), all(perRank * n);
      for (size_t i = 0; i < mine.size(); ++i) mine[i] = value(rank, i);
      hc.allGather(mine.data(), all.data(), perRank, DataType::Float32);
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < perRank; ++i)
          if (all[r * perRank + i] != value(r, i)) fail("allgather", r * perRank + i, all[r * perRank + i], value(r, i));
      hc.allToAll(mine.data(), all.data(), perRank, DataType::Float32);
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < perRank; ++i) {
          const float want = value(r, rank * perRank + i);
          if (all[r * perRank + i] != want) fail("alltoall", r * perRank + i, all[r * perRank + i], want);
        }
    }
  }));
}

// The algorithm lines are byte counts: a negative one is refused by name
// when the host collectives are made, before any call picks a path.
TEST(HostCollectivesSettings, NegativeAlgorithmLimitsAreRefusedByName) {
  for (const std::string key : {"allreduce_small_bytes", "allreduce_halving_bytes", "allreduce_doubling_bytes",
                                "allgather_doubling_bytes", "host_direct_bytes"}) {
    SCOPED_TRACE(key);
    expectAllPassed(runRanks(1, std::chrono::seconds(30), [&](int rank, int n, const UniqueId& id) {
      CommunicatorOptions o;
      o.overrides = {{"transports", "ethernet"}, {key, "-1"}};
      Communicator comm(loopbackBootstrap(rank, n, id), o);
      try {
        HostCollectives hc(comm);
      } catch (const Error& e) {
        if (e.code() == ErrorCode::Config && std::string(e.what()).find(key + " must be >= 0") != std::string::npos)
          return;
        throw std::runtime_error(std::string("wrong error: ") + e.what());
      }
      throw std::runtime_error(key + " = -1 was accepted");
    }));
  }
}

namespace {

/// Ethernet, a 10 s timeout, closing waits closeTimeout seconds at most.
CommunicatorOptions closeOptions(const std::string& closeTimeout) {
  CommunicatorOptions o;
  o.overrides = {{"transports", "ethernet"}, {"timeout", "10"}, {"close_timeout", closeTimeout}};
  return o;
}

}  // namespace

// Send, then leave at once: the sender's call ends before the receiver has
// consumed (and returned slots for) what it sent. Closing waits for the
// receiver, so its late receive neither fails nor finds the link broken.
// With close_timeout 0 (no wait) the receive failed.
TEST(HostCollectivesClose, ASenderThatLeavesAtOnceDoesNotFailItsLateReceiver) {
  for (const std::string direct : {"0", "4096"}) {
    SCOPED_TRACE("host_direct_bytes " + direct);
    expectAllPassed(runRanks(2, std::chrono::seconds(60), [&](int rank, int n, const UniqueId& id) {
      senderLeavesAtOnce(rank, n, id, {{"transports", "ethernet"}, {"host_direct_bytes", direct}});
    }));
  }
}

// A peer that never closes delays closing by close_timeout, no longer.
TEST(HostCollectivesClose, APeerThatDoesNotCloseDelaysClosingByCloseTimeoutOnly) {
  expectAllPassed(runRanks(2, std::chrono::seconds(60), [&](int rank, int n, const UniqueId& id) {
    auto boot = loopbackBootstrap(rank, n, id);
    Communicator comm(boot, closeOptions("1"));
    auto hc = std::make_unique<HostCollectives>(comm);
    float x = 1;
    hc->allReduce(&x, &x, 1, DataType::Float32, ReduceOp::Sum);
    constexpr int kClosed = 91;
    const char byte = 1;
    if (rank == 0) {
      const auto start = std::chrono::steady_clock::now();
      hc.reset();
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      boot->send(&byte, 1, 1, kClosed);
      if (seconds < 0.9 || seconds > 8)
        throw std::runtime_error("closing took " + std::to_string(seconds) + " s with close_timeout 1");
      return;
    }
    boot->recv(0, kClosed);  // rank 1 closes only after rank 0 gave up waiting
  }));
}

// A peer whose process ends without destroying anything (no "closing"
// word) is noticed (ethernet fails the connection; transports that notice
// only when posting leave it to the closed bootstrap connection): no wait
// for close_timeout (10 s here).
TEST(HostCollectivesClose, APeerThatExitsWithoutClosingDoesNotDelayClosing) {
  expectAllPassed(runRanks(2, std::chrono::seconds(60), [&](int rank, int n, const UniqueId& id) {
    Communicator comm(loopbackBootstrap(rank, n, id), closeOptions("10"));
    auto hc = std::make_unique<HostCollectives>(comm);
    float x = 1;
    hc->allReduce(&x, &x, 1, DataType::Float32, ReduceOp::Sum);
    if (rank == 1) ::_exit(0);  // no destructor runs
    const auto start = std::chrono::steady_clock::now();
    hc.reset();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds > 5) throw std::runtime_error("closing waited " + std::to_string(seconds) + " s for a peer that had exited");
  }));
}

// Ranks that make different numbers of calls: rank 1 makes two allreduces
// and closes; rank 0's third waits on a peer that has left its last call.
// It ends about a second after the peer's word (its last bytes could still
// be on their way), naming the peer, not at its timeout (30 s here).
TEST(HostCollectivesClose, AWaitOnAPeerThatClosedEndsSoonNamingIt) {
  for (const size_t count : {size_t(1), size_t(300000)}) {  // a chunked and a direct receive
    SCOPED_TRACE("count " + std::to_string(count));
    expectAllPassed(runRanks(2, std::chrono::seconds(60), [&](int rank, int n, const UniqueId& id) {
      CommunicatorOptions o;
      o.overrides = {{"transports", "ethernet"}, {"timeout", "30"}};
      Communicator comm(loopbackBootstrap(rank, n, id), o);
      auto hc = std::make_unique<HostCollectives>(comm);
      std::vector<float> x(count, 1.0f);
      for (int i = 0; i < 2; ++i) hc->allReduce(x.data(), x.data(), count, DataType::Float32, ReduceOp::Sum);
      if (rank == 1) return;  // closes: rank 0 has one call more
      const auto start = std::chrono::steady_clock::now();
      requireError([&] { hc->allReduce(x.data(), x.data(), count, DataType::Float32, ReduceOp::Sum); },
                   ErrorCode::Remote, {"rank 1 (host", "has closed its host collectives", "#3", "same calls"});
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (seconds > 5) throw std::runtime_error("the third allreduce failed after " + std::to_string(seconds) + " s");
    }));
  }
}
