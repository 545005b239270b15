// Communicator::abort() and asyncError(), across forked ranks over ethernet
// on loopback: an abort from another thread ends a blocked host collective,
// a semaphore wait and a flush with Error(Aborted); every later call fails
// the same way at once; the process then builds a new communicator that
// works. asyncError() reports a dead peer without any call waiting.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "comm_fixture.hpp"
#include "multiproc.hpp"
#include "plugboard/host_collectives.hpp"

using namespace plugboard;
using namespace plugboard::test;

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTestTimeout = std::chrono::seconds(60);
/// How long after abort() a blocked wait may take to end: the goal is
/// < 100 ms (waits sleep at most 1 ms between checks); the bound leaves
/// room for a loaded CI machine.
constexpr auto kAbortBound = std::chrono::seconds(2);

void useEthernet() { setenv("PLUGBOARD_TRANSPORTS", "ethernet", 1); }

/// Runs call on this thread and abort() from another after delay; returns
/// how long the call outlived the abort. Throws unless the call ended with
/// Error(Aborted) naming this rank.
Clock::duration abortDuring(Communicator& comm, const std::function<void()>& call, std::chrono::milliseconds delay) {
  Clock::time_point abortedAt{};
  std::thread aborter([&] {
    std::this_thread::sleep_for(delay);
    abortedAt = Clock::now();
    comm.abort();
  });
  Clock::time_point endedAt{};
  try {
    requireError(call, ErrorCode::Aborted, {"rank " + std::to_string(comm.rank()), "aborted"});
  } catch (...) {
    aborter.join();
    throw;
  }
  endedAt = Clock::now();
  aborter.join();
  return endedAt - abortedAt;
}

/// Throws unless the wait ended within kAbortBound of the abort; prints it.
void requireQuick(Clock::duration took, const char* what) {
  const double ms = std::chrono::duration<double, std::milli>(took).count();
  std::printf("%s: %.2f ms\n", what, ms);
  if (took > kAbortBound) throw std::runtime_error(std::string(what) + " took " + std::to_string(ms) + " ms after abort()");
}

/// One float allreduce of every rank's rank + 1; throws on a wrong sum.
void checkedAllReduce(HostCollectives& hc, int n) {
  float in = static_cast<float>(hc.communicator().rank() + 1), out = 0;
  hc.allReduce(&in, &out, 1, DataType::Float32, ReduceOp::Sum);
  if (out != static_cast<float>(n * (n + 1) / 2)) throw std::runtime_error("allreduce gave " + std::to_string(out));
}

}  // namespace

TEST(CommunicatorAbort, EndsABlockedCollectiveAndANewCommunicatorWorks) {
  expectAllPassed(runRanks(2, kTestTimeout, [](int rank, int n, const UniqueId& id) {
    useEthernet();
    auto boot = loopbackBootstrap(rank, n, id);
    {
      auto comm = std::make_unique<Communicator>(boot);
      HostCollectives hc(*comm);
      checkedAllReduce(hc, n);
      if (comm->asyncError()) throw std::runtime_error(std::string("asyncError before any failure: ") + comm->asyncError()->what());
      if (rank == 0) {
        // Rank 1 never joins this allreduce: only the abort can end it.
        std::vector<float> in(1000, 1.0f), out(1000);
        auto call = [&] { hc.allReduce(in.data(), out.data(), in.size(), DataType::Float32, ReduceOp::Sum); };
        requireQuick(abortDuring(*comm, call, std::chrono::milliseconds(300)), "a blocked allreduce, from abort() to its end");
        if (!comm->aborted()) throw std::runtime_error("aborted() is false after abort()");
        auto err = comm->asyncError();
        if (!err || err->code() != ErrorCode::Aborted) throw std::runtime_error("asyncError does not report the abort");
        const auto start = Clock::now();
        requireError(call, ErrorCode::Aborted, {"aborted"});
        requireError([&] { comm->checkErrors(); }, ErrorCode::Aborted, {"rank 0", "Communicator::abort"});
        comm->abort();  // idempotent
        requireQuick(Clock::now() - start, "three calls after the abort, in all");
      }
      // Rank 1 keeps its connections open until rank 0's abort is done, so
      // that rank 0's allreduce can end only by the abort, never by a
      // closed connection.
      boot->barrier();
    }  // destroyed after the abort: local, no collective step
    // A new communicator on the same bootstrap, as a job that recovers would.
    Communicator again(boot);
    HostCollectives hc(again);
    for (int i = 0; i < 3; ++i) checkedAllReduce(hc, n);
  }));
}

TEST(CommunicatorAbort, EndsASemaphoreWaitAndAFlush) {
  expectAllPassed(runRanks(2, kTestTimeout, [](int rank, int n, const UniqueId& id) {
    useEthernet();
    auto boot = loopbackBootstrap(rank, n, id);
    Communicator comm(boot);
    auto conn = comm.connectAll().at(1 - rank);
    Host2HostSemaphore sem(comm, conn);
    if (rank == 0) {
      // Rank 1 never signals.
      requireQuick(abortDuring(comm, [&] { sem.wait(std::chrono::seconds(30)); }, std::chrono::milliseconds(200)),
                   "a semaphore wait, from abort() to its end");
      requireError([&] { conn->flush(); }, ErrorCode::Aborted, {"rank 0 -> rank 1", "aborted"});
      requireError([&] { sem.signal(); }, ErrorCode::Aborted, {"aborted"});
    }
    boot->barrier();
  }));
}

TEST(CommunicatorAbort, AsyncErrorReportsADeadPeerWithoutWaiting) {
  expectAllPassed(runRanks(2, kTestTimeout, [](int rank, int n, const UniqueId& id) {
    useEthernet();
    auto boot = loopbackBootstrap(rank, n, id);
    Communicator comm(boot);
    HostCollectives hc(comm);
    checkedAllReduce(hc, n);
    boot->barrier();
    if (rank == 1) _exit(0);  // gone without closing anything
    // No call is made: the proxy thread finds the lost connection.
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    std::optional<Error> err;
    while (!(err = comm.asyncError()) && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!err) throw std::runtime_error("asyncError reported nothing 20 s after rank 1 died");
    const std::string what = err->what();
    if (what.find("rank 1") == std::string::npos) throw std::runtime_error("asyncError does not name rank 1: " + what);
    if (comm.aborted()) throw std::runtime_error("a dead peer is not an abort");
  }));
}

// A rank waiting in a bootstrap call (here a recv its peer never answers;
// the same wait as GpuCollectives' or ncclCommInitRank's barriers) ends
// with Error(Aborted) soon after Communicator::abort(), not at the
// bootstrap timeout (30 s); a bootstrap call begun after the abort works.
TEST(CommunicatorAbort, EndsABootstrapWaitAndLaterBootstrapCallsWork) {
  expectAllPassed(runRanks(2, kTestTimeout, [](int rank, int n, const UniqueId& id) {
    useEthernet();
    auto boot = loopbackBootstrap(rank, n, id, std::chrono::seconds(30));
    Communicator comm(boot);
    if (rank == 1) {  // never sends tag 5; receives what rank 0 sends after its abort
      const std::vector<char> got = boot->recv(0, 7);
      if (got != std::vector<char>{'o', 'k'}) throw std::runtime_error("rank 1 received the wrong message");
      return;
    }
    requireQuick(abortDuring(comm, [&] { boot->recv(1, 5); }, std::chrono::milliseconds(300)), "bootstrap recv");
    boot->send("ok", 2, 1, 7);
  }));
}

namespace {

// After abort(), what the communicator would exchange through the
// bootstrap (set-up of connections, host collectives, sendMemory, a
// failover) fails at once by name; before, it waited for peers that had
// aborted too until the bootstrap's timeout. The bootstrap itself goes on.
TEST(CommunicatorAbort, SetUpOnAnAbortedCommunicatorFailsAtOnce) {
  expectAllPassed(runRanks(2, kTestTimeout, [](int rank, int n, const UniqueId& id) {
    useEthernet();
    auto boot = loopbackBootstrap(rank, n, id);
    Communicator comm(boot);
    comm.abort();
    const auto start = Clock::now();
    requireError([&] { HostCollectives hc(comm); }, ErrorCode::Aborted,
                 {"rank " + std::to_string(rank) + " (host ", "aborted", "setup()"});
    requireError([&] { comm.connectAll(); }, ErrorCode::Aborted, {"setup()"});
    std::vector<char> bytes(64);
    RegisteredMemory mem = comm.registerMemory(bytes.data(), bytes.size(), MemoryKind::Host);
    requireError([&] { comm.sendMemory(mem, 1 - rank, 5); }, ErrorCode::Aborted, {"sendMemory()"});
    requireError([&] { comm.recvMemory(1 - rank, 5); }, ErrorCode::Aborted, {"recvMemory()"});
    requireError([&] { comm.failover(1 - rank); }, ErrorCode::Aborted, {"failover()"});
    requireQuick(Clock::now() - start, "set-up calls on an aborted communicator, all five");
    boot->barrier();
  }));
}

}  // namespace
