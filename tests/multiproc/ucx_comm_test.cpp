// The communicator end to end over the ucx plugin: 2 and 4 forked ranks on
// loopback with PLUGBOARD_TRANSPORTS=ucx and UCX_TLS=tcp. Every rank writes
// a pattern into every peer's buffer and signals it; host allreduce runs
// over it; a rank that dies is reported, not waited for. Skipped where the
// plugin was not built (no UCX at configure time).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>

#include "collective_reference.hpp"
#include "close_check.hpp"
#include "comm_fixture.hpp"
#include "multiproc.hpp"
#include "plugboard/host_collectives.hpp"

using namespace plugboard;
using namespace plugboard::test;

namespace {

constexpr auto kTestTimeout = std::chrono::seconds(90);
const std::string kPlugin = std::string(PLUGBOARD_TEST_PLUGIN_DIR) + "/libplugboard-ucx.so";

bool ucxBuilt() {
  struct stat st;
  return ::stat(kPlugin.c_str(), &st) == 0;
}

#define SKIP_WITHOUT_UCX() \
  if (!ucxBuilt()) GTEST_SKIP() << kPlugin << " was not built (UCX not found when configuring)"

/// Run in each rank before its communicator: ucx only, over TCP; with an
/// RMA ordering ("flush", "fence"), the RMA protocol instead of the
/// default active messages.
void useUcx(const char* rmaOrdering = nullptr) {
  setenv("PLUGBOARD_TRANSPORTS", "ucx", 1);
  setenv("UCX_TLS", "tcp", 1);
  if (rmaOrdering) {
    setenv("PLUGBOARD_UCX_PROTOCOL", "rma", 1);
    setenv("PLUGBOARD_UCX_ORDERING", rmaOrdering, 1);
  }
}

uint8_t patternByte(int writer, int reader, size_t i) {
  return static_cast<uint8_t>((writer * 131 + reader * 31 + i * 7 + (i >> 8)) & 0xff);
}

// Each rank owns a buffer of nranks slots; rank w writes slot w of rank r's
// buffer and signals r, for several rounds; r checks every slot of a round
// before the next one overwrites them.
void allToAllWrites(Communicator& comm, size_t slot, int rounds) {
  const int n = comm.size(), me = comm.rank();
  std::vector<uint8_t> inbox(slot * n, 0), outbox(slot * n);
  auto conns = comm.connectAll();
  for (auto& [p, c] : conns)
    if (c->transport() != "ucx") throw std::runtime_error("rank " + std::to_string(me) + " uses " + c->transport());
  RegisteredMemory in = comm.registerMemory(inbox.data(), inbox.size());
  RegisteredMemory out = comm.registerMemory(outbox.data(), outbox.size());
  std::map<int, RemoteMemory> remote;
  std::map<int, std::unique_ptr<Host2HostSemaphore>> sems;
  for (auto& [p, c] : conns) comm.sendMemory(in, p);
  for (auto& [p, c] : conns) remote[p] = comm.recvMemory(p);
  for (auto& [p, c] : conns) sems[p] = std::make_unique<Host2HostSemaphore>(comm, c);
  for (int round = 0; round < rounds; ++round) {
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < slot; ++i) outbox[r * slot + i] = patternByte(me + round, r, i);
    for (auto& [p, c] : conns) {
      c->write(remote[p], me * slot, out, p * slot, slot);
      sems[p]->signal();
    }
    for (auto& [p, c] : conns) c->flush();  // outbox is rewritten next round
    for (auto& [p, s] : sems) s->wait();
    for (int w = 0; w < n; ++w) {
      if (w == me) continue;
      for (size_t i = 0; i < slot; ++i)
        if (inbox[w * slot + i] != patternByte(w + round, me, i))
          throw std::runtime_error("rank " + std::to_string(me) + " round " + std::to_string(round) + ": byte " +
                                   std::to_string(i) + " from rank " + std::to_string(w) + " is wrong");
    }
    comm.bootstrap().barrier();  // nobody writes round + 1 while a peer still reads round
  }
}

/// lanes: the ucx.lanes setting ("" leaves the default, none on CI's kind).
void runAllToAll(int nranks, size_t slot, const char* ordering = nullptr, const char* lanes = "") {
  auto results = runRanks(nranks, kTestTimeout, [&](int rank, int n, const UniqueId& id) {
    useUcx(ordering);
    if (*lanes) setenv("PLUGBOARD_UCX_LANES", lanes, 1);
    Communicator comm(loopbackBootstrap(rank, n, id));
    allToAllWrites(comm, slot, 4);
  });
  expectAllPassed(results);
}

void runAllReduce(int nranks) {
  auto results = runRanks(nranks, kTestTimeout, [](int rank, int n, const UniqueId& id) {
    useUcx();
    setenv("PLUGBOARD_HOST_CHUNK_BYTES", "4096", 1);  // many chunks: the pipelined path
    setenv("PLUGBOARD_ALLREDUCE_SMALL_BYTES", "4096", 1);
    Communicator comm(loopbackBootstrap(rank, n, id));
    HostCollectives hc(comm);
    for (DataType type : {DataType::Float32, DataType::Int64})
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max})
        for (size_t count : {size_t(1), size_t(1009), size_t(70001)}) {
          size_t es = dataTypeSize(type);
          std::vector<char> send(count * es), recv(count * es);
          fillInputs(send.data(), count, 0, rank, type, op);
          hc.allReduce(send.data(), recv.data(), count, type, op);
          for (size_t i = 0; i < count; ++i) {
            double got = loadValue(recv.data(), i, type), want = expectedValue(i, n, type, op);
            if (!sameValue(got, want, type, op))
              throw std::runtime_error("rank " + std::to_string(rank) + " " + dataTypeName(type) + " " +
                                       reduceOpName(op) + " count " + std::to_string(count) + ": element " +
                                       std::to_string(i) + " is " + std::to_string(got) + ", expected " +
                                       std::to_string(want));
          }
        }
    comm.bootstrap().barrier();
  });
  expectAllPassed(results);
}

}  // namespace

TEST(UcxCommunicator, TwoRanksAllToAll) {
  SKIP_WITHOUT_UCX();
  runAllToAll(2, 4097);
}

// Large writes without lanes are in the plugin's own tests.
TEST(UcxCommunicator, FourRanksAllToAllLargeWritesOverLanes) {
  SKIP_WITHOUT_UCX();
  runAllToAll(4, (1 << 20) + 4097, nullptr, "2");
}

TEST(UcxCommunicator, FourRanksAllToAllOverRmaWithFenceOrdering) {
  SKIP_WITHOUT_UCX();
  runAllToAll(4, 1 << 16, "fence");
}

TEST(UcxCommunicator, TwoRanksHostAllReduce) {
  SKIP_WITHOUT_UCX();
  runAllReduce(2);
}

TEST(UcxCommunicator, FourRanksHostAllReduce) {
  SKIP_WITHOUT_UCX();
  runAllReduce(4);
}

TEST(UcxCommunicator, DeadPeerBecomesAnErrorNotAHang) {
  SKIP_WITHOUT_UCX();
  auto results = runRanks(2, kTestTimeout, [](int rank, int n, const UniqueId& id) {
    useUcx();
    Communicator comm(loopbackBootstrap(rank, n, id));
    auto conns = comm.connectAll();
    Host2HostSemaphore sem(comm, conns.at(1 - rank));
    comm.bootstrap().barrier();
    if (rank == 1) _exit(0);  // dies without closing anything
    requireError([&] { sem.wait(std::chrono::seconds(30)); }, ErrorCode::Remote, {"rank 1", "ucx"});
  });
  // Rank 1 exits 0 on purpose; rank 0 must have seen the error.
  expectAllPassed(results);
}

// Closing waits for a peer still in its last call (close_check.hpp), with
// direct transfers (cheap registration) and in chunks.
TEST(UcxCommunicator, ASenderThatLeavesAtOnceDoesNotFailItsLateReceiver) {
  SKIP_WITHOUT_UCX();
  for (const std::string direct : {"0", "4096"}) {
    SCOPED_TRACE("host_direct_bytes " + direct);
    expectAllPassed(runRanks(2, kTestTimeout, [&](int rank, int n, const UniqueId& id) {
      useUcx();
      senderLeavesAtOnce(rank, n, id, {{"host_direct_bytes", direct}});
    }));
  }
}
