// One communicator, several transports: YAML rules put pairs inside {0,1}
// and {2,3} on ethernet, pairs across on libfabric, and pin 1<->2 to ucx.
// Every collective must be right over that mix, and misconfigurations must
// fail on every rank with a clear error.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "collective_reference.hpp"
#include "comm_fixture.hpp"
#include "multiproc.hpp"
#include "plugboard/host_collectives.hpp"

using namespace plugboard;
using namespace plugboard::test;

namespace {

const char* kMixedYaml =
    "transports: [ethernet, libfabric, ucx]\n"
    "libfabric:\n  provider: tcp\n"
    "ucx:\n  tls: tcp\n"
    "rules:\n"
    "  - peers: {from: \"1\", to: \"2\"}\n    use: [ucx]\n"
    "  - peers: {from: \"0-1\", to: \"2-3\"}\n    use: [libfabric]\n"
    "  - peers: any\n    use: [ethernet]\n";

std::string expectedTransport(int a, int b) {
  if (a > b) std::swap(a, b);
  if (a == 1 && b == 2) return "ucx";
  if (a <= 1 && b >= 2) return "libfabric";
  return "ethernet";
}

bool pluginBuilt(const char* name) {
  struct stat st;
  return stat((std::string(PLUGBOARD_TEST_PLUGIN_DIR) + "/libplugboard-" + name + ".so").c_str(), &st) == 0;
}

#define REQUIRE_MIX()                                                                             \
  if (!pluginBuilt("libfabric") || !pluginBuilt("ucx"))                                           \
  GTEST_SKIP() << "needs the libfabric and ucx plugins (libfabric-dev, libucx-dev not installed)"

/// Throws unless every element of buf equals expect(i).
void checkAll(const char* what, const void* buf, size_t count, DataType t, ReduceOp op,
              const std::function<double(size_t)>& expect) {
  for (size_t i = 0; i < count; ++i)
    if (!sameValue(loadValue(buf, i, t), expect(i), t, op))
      throw std::runtime_error(std::string(what) + ": element " + std::to_string(i) + " is wrong");
}

double plain(int rank, size_t i, DataType t) {
  std::vector<char> tmp(8);
  storeValue(tmp.data(), 0, t, inputValue(rank, i, t, ReduceOp::Sum));
  return loadValue(tmp.data(), 0, t);
}

void everyCollective(HostCollectives& hc, int rank, int n, size_t count, DataType t) {
  size_t es = dataTypeSize(t);
  std::vector<char> a(n * count * es + 8), b(n * count * es + 8);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max}) {
    fillInputs(a.data(), count, 0, rank, t, op);
    hc.allReduce(a.data(), b.data(), count, t, op);
    checkAll("allreduce", b.data(), count, t, op, [&](size_t i) { return expectedValue(i, n, t, op); });
    fillInputs(a.data(), n * count, 0, rank, t, op);
    hc.reduceScatter(a.data(), b.data(), count, t, op);
    checkAll("reducescatter", b.data(), count, t, op, [&](size_t i) { return expectedValue(rank * count + i, n, t, op); });
    fillInputs(a.data(), count, 0, rank, t, op);
    hc.reduce(a.data(), b.data(), count, t, op, 2);
    if (rank == 2) checkAll("reduce", b.data(), count, t, op, [&](size_t i) { return expectedValue(i, n, t, op); });
  }
  fillInputs(a.data(), count, 0, rank, t, ReduceOp::Sum);
  hc.allGather(a.data(), b.data(), count, t);
  for (int r = 0; r < n; ++r)
    checkAll("allgather", b.data() + r * count * es, count, t, ReduceOp::Sum, [&](size_t i) { return plain(r, i, t); });
  hc.broadcast(a.data(), b.data(), count, t, 3);
  checkAll("broadcast", b.data(), count, t, ReduceOp::Sum, [&](size_t i) { return plain(3, i, t); });
  for (int j = 0; j < n; ++j) fillInputs(a.data() + j * count * es, count, 0, rank * 10 + j, t, ReduceOp::Sum);
  hc.allToAll(a.data(), b.data(), count, t);
  for (int r = 0; r < n; ++r)
    checkAll("alltoall", b.data() + r * count * es, count, t, ReduceOp::Sum, [&](size_t i) { return plain(r * 10 + rank, i, t); });
  fillInputs(a.data(), count, 0, rank, t, ReduceOp::Sum);
  hc.sendRecv(a.data(), count, (rank + 1) % n, b.data(), count, (rank + n - 1) % n, t);
  checkAll("sendrecv", b.data(), count, t, ReduceOp::Sum, [&](size_t i) { return plain((rank + n - 1) % n, i, t); });
}

}  // namespace

TEST(MixedTransports, RulesPickATransportPerPairAndEveryCollectiveIsRight) {
  REQUIRE_MIX();
  auto results = runRanks(4, std::chrono::seconds(180), [](int rank, int n, const UniqueId& id) {
    setenv("PLUGBOARD_HOST_CHUNK_BYTES", "4096", 1);
    setenv("PLUGBOARD_ALLREDUCE_SMALL_BYTES", "4096", 1);
    Communicator comm(loopbackBootstrap(rank, n, id), yamlOptions(kMixedYaml));
    for (int p = 0; p < n; ++p)
      if (p != rank && comm.transportFor(p) != expectedTransport(rank, p))
        throw std::runtime_error("rank " + std::to_string(rank) + " -> " + std::to_string(p) + " uses " +
                                 comm.transportFor(p) + ", expected " + expectedTransport(rank, p));
    HostCollectives hc(comm);
    for (size_t count : {size_t(1), size_t(1009), size_t(20011)}) {
      everyCollective(hc, rank, n, count, DataType::Float32);
      everyCollective(hc, rank, n, count, DataType::Int32);
    }
    comm.bootstrap().barrier();
  });
  expectAllPassed(results);
}

TEST(MixedTransports, RanksWithDifferentRulesFailTogether) {
  REQUIRE_MIX();
  auto results = runRanks(3, std::chrono::seconds(60), [](int rank, int n, const UniqueId& id) {
    std::string yaml = std::string("transports: [ethernet, ucx]\nucx:\n  tls: tcp\nrules:\n  - peers: any\n    use: [") +
                       (rank == 1 ? "ucx" : "ethernet") + "]\n";
    requireError([&] { Communicator comm(loopbackBootstrap(rank, n, id), yamlOptions(yaml)); }, ErrorCode::Config,
                 {"settings differ between ranks", "rules[0]"});
  });
  expectAllPassed(results);
}

TEST(MixedTransports, ProviderThatDoesNotExistFailsOnEveryRank) {
  REQUIRE_MIX();
  auto results = runRanks(2, std::chrono::seconds(60), [](int rank, int n, const UniqueId& id) {
    requireError([&] {
      Communicator comm(loopbackBootstrap(rank, n, id), yamlOptions("transports: [libfabric]\nlibfabric:\n  provider: nosuchfabric\n"));
    }, ErrorCode::Plugin, {"nosuchfabric", "failed to initialise"});
  });
  expectAllPassed(results);
}

TEST(MixedTransports, RuleNamingATransportNoRankLoadedFails) {
  auto results = runRanks(2, std::chrono::seconds(60), [](int rank, int n, const UniqueId& id) {
    setenv("PLUGBOARD_PLUGIN_PATH", PLUGBOARD_TEST_PLUGIN_DIR, 1);
    requireError([&] {
      Communicator comm(loopbackBootstrap(rank, n, id),
                        yamlOptions("transports: auto\nrules:\n  - peers: any\n    use: [infiniband]\n"));
    }, ErrorCode::Config, {".yaml:3", "'infiniband'", "no rank loaded"});
  });
  expectAllPassed(results);
}
