// The communicator end to end on loopback: every rank writes a pattern into
// every peer's buffer with one-sided writes, signals, and checks every byte.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <thread>

#include "comm_fixture.hpp"
#include "multiproc.hpp"

using namespace plugboard;
using namespace plugboard::test;

namespace {

constexpr auto kTestTimeout = std::chrono::seconds(60);

uint8_t patternByte(int writer, int reader, size_t i) {
  return static_cast<uint8_t>((writer * 131 + reader * 31 + i * 7 + (i >> 8)) & 0xff);
}

// Each rank owns a buffer of nranks slots; rank w writes slot w of rank r's
// buffer, signals r, and r checks every slot after nranks-1 signals.
void allToAllWrites(Communicator& comm, size_t slot) {
  const int n = comm.size(), me = comm.rank();
  std::vector<uint8_t> inbox(slot * n, 0), outbox(slot * n);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < slot; ++i) outbox[r * slot + i] = patternByte(me, r, i);
  auto conns = comm.connectAll();
  RegisteredMemory in = comm.registerMemory(inbox.data(), inbox.size());
  RegisteredMemory out = comm.registerMemory(outbox.data(), outbox.size());
  std::map<int, RemoteMemory> remote;
  std::map<int, std::unique_ptr<Host2HostSemaphore>> sems;
  for (auto& [p, c] : conns) comm.sendMemory(in, p);
  for (auto& [p, c] : conns) remote[p] = comm.recvMemory(p);
  for (auto& [p, c] : conns) sems[p] = std::make_unique<Host2HostSemaphore>(comm, c);
  for (auto& [p, c] : conns) {
    c->write(remote[p], me * slot, out, p * slot, slot);
    sems[p]->signal();
  }
  for (auto& [p, c] : conns) c->flush();
  for (auto& [p, s] : sems) s->wait();
  for (int w = 0; w < n; ++w) {
    if (w == me) continue;
    for (size_t i = 0; i < slot; ++i)
      if (inbox[w * slot + i] != patternByte(w, me, i))
        throw std::runtime_error("rank " + std::to_string(me) + ": byte " + std::to_string(i) + " from rank " +
                                 std::to_string(w) + " is wrong");
  }
  comm.bootstrap().barrier();  // no rank tears down while a peer still reads
}

void runAllToAll(int nranks, size_t slot, const std::string& yaml, bool envShortcut) {
  auto results = runRanks(nranks, kTestTimeout, [&](int rank, int n, const UniqueId& id) {
    if (envShortcut) setenv("PLUGBOARD_TRANSPORTS", "ethernet", 1);
    CommunicatorOptions opts = yaml.empty() ? CommunicatorOptions{} : yamlOptions(yaml);
    Communicator comm(loopbackBootstrap(rank, n, id), opts);
    for (int p = 0; p < n; ++p)
      if (p != rank && comm.transportFor(p) != "ethernet") throw std::runtime_error("wrong transport " + comm.transportFor(p));
    allToAllWrites(comm, slot);
  });
  expectAllPassed(results);
}

}  // namespace

TEST(Communicator, TwoRanksByYaml) { runAllToAll(2, 4097, "transports: [ethernet]\nrules:\n  - peers: any\n    use: [ethernet]\n", false); }
TEST(Communicator, ThreeRanksByEnvShortcut) { runAllToAll(3, 1 << 16, "", true); }
TEST(Communicator, FourRanksByYaml) { runAllToAll(4, 1 << 20, "transports: [ethernet]\nethernet:\n  ifname: lo\n", false); }
TEST(Communicator, FourRanksByEnvLargeWrites) { runAllToAll(4, 8 << 20, "", true); }

TEST(Communicator, EveryRankComputesTheSameSelection) {
  auto results = runRanks(4, kTestTimeout, [](int rank, int n, const UniqueId& id) {
    // Ranks 0,1 claim host "a", ranks 2,3 host "b": the rules must see that.
    setenv("PLUGBOARD_HOST_ID", rank < 2 ? "a" : "b", 1);
    Communicator comm(loopbackBootstrap(rank, n, id),
                      yamlOptions("transports: [ethernet]\nrules:\n  - peers: same-host\n    use: [ethernet]\n"
                                  "  - peers: different-host\n    use: [ethernet]\n"));
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      std::string why = comm.selectionReason(p);
      bool same = (p < 2) == (rank < 2);
      if (why.find(same ? "same-host" : "different-host") == std::string::npos)
        throw std::runtime_error("rank " + std::to_string(rank) + " -> " + std::to_string(p) + ": " + why);
      // Each rank's YAML is its own temp file: compare what follows the path.
      auto sansPath = [](const std::string& w) { return w.substr(w.find(".yaml:")); };
      std::string mine = comm.transportFor(p) + " / " + sansPath(why);
      comm.bootstrap().send(mine.data(), mine.size(), p, 77);
    }
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      auto theirs = comm.bootstrap().recv(p, 77);
      std::string why = comm.selectionReason(p);
      std::string expect = comm.transportFor(p) + " / " + why.substr(why.find(".yaml:"));
      if (std::string(theirs.begin(), theirs.end()) != expect)
        throw std::runtime_error("rank " + std::to_string(p) + " chose differently for our pair");
    }
    if (comm.hostOf(3) != "b" || comm.hostOf(0) != "a") throw std::runtime_error("host identities not exchanged");
  });
  expectAllPassed(results);
}

// Each rank reports its host's hardware threads at set-up; every rank then
// says alike whether a host runs at least as many ranks as it has threads.
// Rank 0 alone on host "solo", ranks 1 and 2 on host "pair": on a machine
// of 2 threads (the CI kind) "pair" is scarce and "solo" is not.
TEST(Communicator, EveryRankSaysAlikeWhereCoresAreScarce) {
  expectAllPassed(runRanks(3, kTestTimeout, [](int rank, int n, const UniqueId& id) {
    setenv("PLUGBOARD_HOST_ID", rank == 0 ? "solo" : "pair", 1);
    setenv("PLUGBOARD_TRANSPORTS", "ethernet", 1);
    Communicator comm(loopbackBootstrap(rank, n, id));
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    for (int r = 0; r < n; ++r) {
      const bool expected = (r == 0 ? 1u : 2u) >= cores;
      if (comm.coresScarceOn(r) != expected)
        throw std::runtime_error("rank " + std::to_string(rank) + " says cores are " +
                                 (expected ? "not " : "") + "scarce on rank " + std::to_string(r) + "'s host (" +
                                 std::to_string(cores) + " threads)");
    }
    requireError([&] { comm.coresScarceOn(n); }, ErrorCode::InvalidUsage, {"coresScarceOn", "out of range"});
  }));
}

TEST(Communicator, MisspelledTransportFailsOnEveryRank) {
  auto results = runRanks(3, kTestTimeout, [](int rank, int n, const UniqueId& id) {
    setenv("PLUGBOARD_TRANSPORTS", "etherent", 1);
    requireError([&] { Communicator comm(loopbackBootstrap(rank, n, id)); }, ErrorCode::Plugin,
                 {"transport 'etherent' could not be loaded", "did you mean 'ethernet'", "rank 0"});
  });
  expectAllPassed(results);
}

TEST(Communicator, MissingPluginFailsOnEveryRank) {
  auto results = runRanks(2, kTestTimeout, [](int rank, int n, const UniqueId& id) {
    // A name no build produces (ucx, the old choice here, is built where UCX is installed).
    requireError([&] { Communicator comm(loopbackBootstrap(rank, n, id), yamlOptions("transports: [notbuilt]\n")); },
                 ErrorCode::Plugin, {"transport 'notbuilt' could not be loaded", "libplugboard-notbuilt.so: not found"});
  });
  expectAllPassed(results);
}

TEST(Communicator, OneRankFailingIsReportedByAll) {
  auto results = runRanks(3, kTestTimeout, [](int rank, int n, const UniqueId& id) {
    setenv("PLUGBOARD_TRANSPORTS", rank == 2 ? "nosuch" : "ethernet", 1);
    requireError([&] { Communicator comm(loopbackBootstrap(rank, n, id)); }, ErrorCode::Plugin,
                 {"rank 2 (host", "failed to initialise", "'nosuch' could not be loaded"});
  });
  expectAllPassed(results);
}

TEST(Communicator, UnknownYamlKeyFailsWithFileAndLine) {
  auto results = runRanks(2, kTestTimeout, [](int rank, int n, const UniqueId& id) {
    requireError([&] { Communicator comm(loopbackBootstrap(rank, n, id), yamlOptions("transports: [ethernet]\ntimeuot: 5\n")); },
                 ErrorCode::Config, {".yaml:2", "unknown setting 'timeuot'", "did you mean 'timeout'"});
  });
  expectAllPassed(results);
}

TEST(Communicator, DisagreeingSettingsFailWithDiff) {
  auto results = runRanks(3, kTestTimeout, [](int rank, int n, const UniqueId& id) {
    setenv("PLUGBOARD_TRANSPORTS", "ethernet", 1);
    setenv("PLUGBOARD_TIMEOUT", rank == 1 ? "5" : "30", 1);
    requireError([&] { Communicator comm(loopbackBootstrap(rank, n, id)); }, ErrorCode::Config,
                 {"settings differ between ranks", "rank 0 has   timeout=30", "rank 1 has   timeout=5"});
  });
  expectAllPassed(results);
}

TEST(Communicator, RankThatNeverJoinsTimesOut) {
  std::vector<RankBody> bodies(3);
  for (int r = 0; r < 2; ++r)
    bodies[r] = [](int rank, int n, const UniqueId& id) {
      auto start = std::chrono::steady_clock::now();
      requireError([&] { Communicator comm(loopbackBootstrap(rank, n, id, std::chrono::seconds(2))); }, ErrorCode::Timeout,
                   {"rank 2"});
      if (std::chrono::steady_clock::now() - start > std::chrono::seconds(20)) throw std::runtime_error("timeout took too long");
    };
  expectAllPassed(runRanksEach(bodies, kTestTimeout));
}

TEST(Communicator, SemaphoreWaitTimesOutNamingPeer) {
  auto results = runRanks(2, kTestTimeout, [](int rank, int n, const UniqueId& id) {
    setenv("PLUGBOARD_TRANSPORTS", "ethernet", 1);
    Communicator comm(loopbackBootstrap(rank, n, id));
    auto conns = comm.connectAll();
    Host2HostSemaphore sem(comm, conns.at(1 - rank));
    requireError([&] { sem.wait(std::chrono::milliseconds(300)); }, ErrorCode::Timeout,
                 {"semaphore wait for rank " + std::to_string(1 - rank), "over ethernet", "expected signal 1, received 0"});
    comm.bootstrap().barrier();
  });
  expectAllPassed(results);
}

TEST(Communicator, DeadPeerBecomesAnErrorNotAHang) {
  auto results = runRanks(2, kTestTimeout, [](int rank, int n, const UniqueId& id) {
    setenv("PLUGBOARD_TRANSPORTS", "ethernet", 1);
    Communicator comm(loopbackBootstrap(rank, n, id));
    auto conns = comm.connectAll();
    Host2HostSemaphore sem(comm, conns.at(1 - rank));
    comm.bootstrap().barrier();
    if (rank == 1) _exit(0);  // dies without closing anything
    requireError([&] { sem.wait(std::chrono::seconds(20)); }, ErrorCode::Remote, {"rank 1", "ethernet"});
  });
  // Rank 1 exits 0 on purpose; rank 0 must have seen the error.
  expectAllPassed(results);
}

TEST(Communicator, BadArgumentsAreClearErrors) {
  auto results = runRanks(2, kTestTimeout, [](int rank, int n, const UniqueId& id) {
    setenv("PLUGBOARD_TRANSPORTS", "ethernet", 1);
    Communicator comm(loopbackBootstrap(rank, n, id));
    requireError([&] { comm.connect(rank); }, ErrorCode::InvalidUsage, {"is not another rank"});
    requireError([&] { comm.connect(7); }, ErrorCode::InvalidUsage, {"peer rank 7"});
    requireError([&] { comm.registerMemory(nullptr, 16); }, ErrorCode::InvalidUsage, {"null pointer"});
    requireError([&] { comm.recvMemory(1 - rank); }, ErrorCode::InvalidUsage, {"connect() and setup() first"});
    auto conns = comm.connectAll();
    std::vector<char> buf(64);
    RegisteredMemory mem = comm.registerMemory(buf.data(), buf.size());
    comm.sendMemory(mem, 1 - rank);
    RemoteMemory remote = comm.recvMemory(1 - rank);
    auto& c = conns.at(1 - rank);
    requireError([&] { c->write(remote, 60, mem, 0, 8); }, ErrorCode::InvalidUsage, {"out of range"});
    requireError([&] { c->signal(remote, 3, 1); }, ErrorCode::InvalidUsage, {"aligned 8-byte"});
    comm.bootstrap().barrier();
  });
  expectAllPassed(results);
}
