// Failure notices (communicator/failure_notices.hpp): the channel GPU
// collectives use (host code, so it runs here without a GPU), the
// communicator's (Communicator::reportFailure) and who hears it, and the
// bootstrap's polls from a second thread, which the GPU collectives' host
// relay makes while a user's call runs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "collectives/bootstrap_tags.hpp"
#include "comm_fixture.hpp"
#include "communicator/failure_notices.hpp"
#include "communicator/notice_watcher.hpp"
#include "multiproc.hpp"
#include "plugboard/communicator.hpp"
#include "plugboard/host_collectives.hpp"
#include "plugboard/host_plan.hpp"

namespace plugboard {
namespace {

using test::expectAllPassed;
using test::loopbackBootstrap;
using test::runRanks;
using Clock = std::chrono::steady_clock;
constexpr auto kRunLimit = std::chrono::milliseconds(60000);

void useEthernet() { setenv("PLUGBOARD_TRANSPORTS", "ethernet", 1); }

/// Polls until a notice comes (at most 5 s).
Error awaitNotice(FailureNotices& notices) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < deadline) {
    if (const auto& e = notices.poll()) return *e;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  throw std::runtime_error("no failure notice within 5 s");
}

/// Runs body in n ranks, each with a communicator over ethernet; a barrier after.
void inRanks(int n, const std::function<void(int rank, Communicator&, Bootstrap&)>& body) {
  expectAllPassed(runRanks(n, kRunLimit, [&](int rank, int nranks, const UniqueId& id) {
    useEthernet();
    auto boot = loopbackBootstrap(rank, nranks, id);
    Communicator comm(boot);
    body(rank, comm, *boot);
    boot->barrier();
  }));
}

size_t occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// Rank 1 fails (twice: one notice); ranks 0 and 2 learn its reason, named,
// with the ending said once. A later GPU collectives drops what is left.
TEST(GpuFailureNotices, EveryPeerLearnsTheFirstFailureOnce) {
  inRanks(3, [](int rank, Communicator& comm, Bootstrap& boot) {
    FailureNotices notices(comm, NoticeScope::GpuCollectives);
    const std::string ending = " The GPU collectives of this communicator cannot be used any more.";
    if (rank == 1) {
      notices.sendOnce("rank 1 (host x): device wait for rank 2 timed out in allreduce." + ending);
      notices.sendOnce("a second failure, which nobody must hear of");
    } else {
      // pending() sees it first (a poll, no read), then poll() reads it.
      const auto deadline = Clock::now() + std::chrono::seconds(5);
      while (!notices.pending() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (!notices.pending()) throw std::runtime_error("pending() saw no notice within 5 s");
      const Error e = awaitNotice(notices);
      if (notices.pending()) throw std::runtime_error("pending() after the notice was read");
      test::requireError([&] { throw e; }, ErrorCode::Remote,
                         {"rank " + std::to_string(rank) + " (host ", "rank 1 (host ", "told its peers",
                          "timed out in allreduce"});
      if (occurrences(e.what(), "cannot be used any more") != 1) throw std::runtime_error("ending not once: " + std::string(e.what()));
      // Kept: every later poll says the same.
      if (!notices.poll() || std::string(notices.poll()->what()) != e.what()) throw std::runtime_error("notice not kept");
      // A rank that was told tells nobody.
      notices.sendOnce("rank " + std::to_string(rank) + " failed too");
    }
    boot.barrier();
    FailureNotices later(comm, NoticeScope::GpuCollectives);
    later.dropStale();
    std::this_thread::sleep_for(2 * FailureNotices::kPollInterval);
    if (later.poll()) throw std::runtime_error("a stale or second notice: " + std::string(later.poll()->what()));
  });
}

// Bytes that are not a notice are named as such, not taken for a reason.
TEST(GpuFailureNotices, AMalformedNoticeIsNamedAsOne) {
  inRanks(2, [](int rank, Communicator& comm, Bootstrap& boot) {
    FailureNotices notices(comm, NoticeScope::GpuCollectives);
    if (rank == 1) {
      const char junk[5] = {9, 9, 9, 9, 9};
      boot.send(junk, sizeof(junk), 0, kGpuNoticeTag);
    } else {
      const Error e = awaitNotice(notices);
      test::requireError([&] { throw e; }, ErrorCode::Remote, {"rank 1 (host ", "malformed GPU failure notice"});
    }
  });
}

/// Seconds since start.
double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

/// Runs body in n ranks over ethernet with a 30 s "timeout" setting: a wait
/// that ends within seconds ended on a notice, not on the timeout.
void inPatientRanks(int n, const std::function<void(int rank, Communicator&, Bootstrap&)>& body) {
  expectAllPassed(runRanks(n, kRunLimit, [&](int rank, int nranks, const UniqueId& id) {
    useEthernet();
    setenv("PLUGBOARD_TIMEOUT", "30", 1);
    auto boot = loopbackBootstrap(rank, nranks, id);
    Communicator comm(boot);
    body(rank, comm, *boot);
  }));
}

// Rank 1 gives up. Rank 0, waiting for a signal rank 2 never sends, ends
// within seconds naming rank 1 and its reason; rank 2's asyncError() names
// rank 1 before anything read the notice, and checkErrors() throws the
// reason. The reporting rank hears nothing of its own; a second report
// sends nothing.
TEST(CommunicatorNotices, APeersReportedFailureEndsSemaphoreWaitsAndChecks) {
  inPatientRanks(3, [](int rank, Communicator& comm, Bootstrap& boot) {
    auto conns = comm.connectAll();
    std::unique_ptr<Host2HostSemaphore> sem;
    if (rank != 1) sem = std::make_unique<Host2HostSemaphore>(comm, conns.at(2 - rank));
    boot.barrier();
    const std::vector<std::string> named = {"rank " + std::to_string(rank) + " (host ", "rank 1 (host ",
                                            "gave up on the communicator", "its input file is missing",
                                            "create a new one"};
    const auto start = Clock::now();
    if (rank == 1) {
      comm.reportFailure("rank 1 (host x): its input file is missing");
      comm.reportFailure("a second failure, which nobody must hear of");
      std::this_thread::sleep_for(2 * FailureNotices::kPollInterval);
      if (comm.peerFailure()) throw std::runtime_error("the reporting rank heard: " + std::string(comm.peerFailure()->what()));
      comm.checkErrors();
    } else if (rank == 0) {
      test::requireError([&] { sem->wait(); }, ErrorCode::Remote, named);
      if (secondsSince(start) > 5) throw std::runtime_error("the wait ended " + std::to_string(secondsSince(start)) + " s in");
      test::requireError([&] { comm.checkErrors(); }, ErrorCode::Remote, named);  // kept
    } else {
      while (!comm.asyncError() && secondsSince(start) < 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const auto early = comm.asyncError();
      if (!early || std::string(early->what()).find("rank 1 (host ") == std::string::npos)
        throw std::runtime_error("asyncError() did not name rank 1 within 5 s");
      test::requireError([&] { comm.checkErrors(); }, ErrorCode::Remote, named);
      const auto later = comm.asyncError();
      if (!later || std::string(later->what()).find("its input file is missing") == std::string::npos)
        throw std::runtime_error("asyncError() lacks the reason once it was read");
      if (occurrences(later->what(), "second failure") != 0) throw std::runtime_error("the second report was heard");
    }
    boot.barrier();
  });
}

// A HostPlanExecutor run by the user: rank 1's run fails at once (a count
// the plan cannot cut); ranks 0 and 2, waiting in the same plan for rank
// 1's start signal, end within seconds naming rank 1 and why, instead of
// at their 30 s timeout.
TEST(CommunicatorNotices, AFailedPlanRunTellsThePeersWaitingInIt) {
  inPatientRanks(3, [](int rank, Communicator& comm, Bootstrap& boot) {
    const std::string path = std::string(PLUGBOARD_TEST_SOURCE_DIR) + "/../plans/allreduce_ring/3ranks.json";
    HostPlanExecutor ex(comm, loadPlan(path), 1024);
    std::vector<float> buf(6, 1.0f);
    const auto start = Clock::now();
    if (rank == 1) {
      test::requireError([&] { ex.run(buf.data(), buf.data(), 5, DataType::Float32, ReduceOp::Sum); },
                         ErrorCode::InvalidUsage, {"do not cut into"});
    } else {
      test::requireError([&] { ex.run(buf.data(), buf.data(), 6, DataType::Float32, ReduceOp::Sum); },
                         ErrorCode::Remote, {"rank 1 (host ", "gave up on the communicator", "do not cut into"});
      if (secondsSince(start) > 5) throw std::runtime_error("the run ended " + std::to_string(secondsSince(start)) + " s in");
    }
    boot.barrier();
  });
}

// Host collectives hear it too: rank 0's allreduce, which rank 1 never
// joins, ends naming rank 1's reason.
TEST(CommunicatorNotices, AHostCollectiveWaitingOnTheReportingRankEnds) {
  inPatientRanks(2, [](int rank, Communicator& comm, Bootstrap& boot) {
    HostCollectives coll(comm);
    const auto start = Clock::now();
    if (rank == 1) {
      comm.reportFailure("rank 1 (host x): out of memory");
    } else {
      std::vector<float> buf(16, 1.0f);
      test::requireError([&] { coll.allReduce(buf.data(), buf.data(), buf.size(), DataType::Float32, ReduceOp::Sum); },
                         ErrorCode::Remote, {"rank 1 (host ", "out of memory"});
      if (secondsSince(start) > 5) throw std::runtime_error("the call ended " + std::to_string(secondsSince(start)) + " s in");
    }
    boot.barrier();
  });
}

// A notice nobody read belongs to its communicator: the next one built on
// the same bootstrap drops it.
TEST(CommunicatorNotices, ANewCommunicatorOnTheSameBootstrapDropsAnEarlierOnesNotice) {
  expectAllPassed(runRanks(2, kRunLimit, [](int rank, int nranks, const UniqueId& id) {
    useEthernet();
    auto boot = loopbackBootstrap(rank, nranks, id);
    {
      Communicator first(boot);
      if (rank == 1) first.reportFailure("the first communicator's failure");
      boot->barrier();
    }
    Communicator second(boot);
    std::this_thread::sleep_for(2 * FailureNotices::kPollInterval);
    if (auto stale = second.peerFailure()) throw std::runtime_error("a stale notice: " + std::string(stale->what()));
    second.checkErrors();
    boot->barrier();
  }));
}

// The NoticeWatcher (what ends GPU kernels' waits between calls): rank 1
// sends on the GPU channel; on rank 0 a watch of that channel runs within
// a second and once, a watch of the communicator's channel (no notice)
// never, a watch removed before never, and a watch added after the notice
// was read runs too.
TEST(CommunicatorNotices, TheWatcherRunsEachWatchOnceOnItsChannelsNotice) {
  inRanks(2, [](int rank, Communicator& comm, Bootstrap& boot) {
    FailureNotices gpuChannel(comm, NoticeScope::GpuCollectives);
    FailureNotices commChannel(comm, NoticeScope::Communicator);
    NoticeWatcher watcher("rank " + std::to_string(rank));
    std::atomic<int> onGpu{0}, onComm{0}, onRemoved{0}, onLate{0};
    if (rank == 0) {
      watcher.watch(gpuChannel, [&] { ++onGpu; });
      watcher.watch(commChannel, [&] { ++onComm; });
      watcher.unwatch(watcher.watch(gpuChannel, [&] { ++onRemoved; }));
    }
    boot.barrier();
    if (rank == 1) {
      gpuChannel.sendOnce("rank 1 lost its input");
      return;
    }
    const auto start = Clock::now();
    while (!onGpu.load() && Clock::now() - start < std::chrono::seconds(5))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const double took = std::chrono::duration<double>(Clock::now() - start).count();
    if (!onGpu.load()) throw std::runtime_error("the watch of the GPU channel did not run within 5 s");
    if (took > 1.0) throw std::runtime_error("the watch ran only after " + std::to_string(took) + " s");
    if (!gpuChannel.poll(true)) throw std::runtime_error("no notice to read after the watch ran");
    const uint64_t late = watcher.watch(gpuChannel, [&] { ++onLate; });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // 10 looks
    watcher.unwatch(late);
    if (onGpu.load() != 1 || onLate.load() != 1 || onComm.load() != 0 || onRemoved.load() != 0)
      throw std::runtime_error("watches ran: GPU channel " + std::to_string(onGpu.load()) + ", late " +
                               std::to_string(onLate.load()) + ", communicator channel " + std::to_string(onComm.load()) +
                               ", removed " + std::to_string(onRemoved.load()) + " (want 1, 1, 0, 0)");
  });
}


// A second thread's polls never wait for a call another thread is in (the
// relay's failure checks beside a user's blocking bootstrap call), and the
// messages each thread reads stay whole.
TEST(GpuFailureNotices, BootstrapPollsFromAnotherThreadNeverWaitForACall) {
  expectAllPassed(runRanks(2, kRunLimit, [](int rank, int n, const UniqueId& id) {
    auto boot = loopbackBootstrap(rank, n, id);
    constexpr int kTag = 77;
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      const std::string late = "sent 500 ms late";
      boot->send(late.data(), late.size(), 0, kTag);
      boot->send(late.data(), late.size(), 0, kTag + 1);
    } else {
      std::atomic<bool> done{false};
      std::atomic<int64_t> slowestPollUs{0};
      std::thread poller([&] {
        while (!done.load()) {
          const auto t0 = Clock::now();
          boot->poll(1, kTag + 1);
          boot->peerClosed(1);
          const int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
          if (us > slowestPollUs.load()) slowestPollUs.store(us);
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      });
      std::vector<char> got;
      try {
        got = boot->recv(1, kTag);  // blocks about 500 ms while the poller runs
      } catch (...) {
        done = true;
        poller.join();
        throw;
      }
      done = true;
      poller.join();
      if (std::string(got.begin(), got.end()) != "sent 500 ms late") throw std::runtime_error("the message changed");
      if (slowestPollUs.load() > 100000)
        throw std::runtime_error("a poll waited " + std::to_string(slowestPollUs.load()) + " us for the other call");
      const std::vector<char> second = boot->recv(1, kTag + 1);
      if (std::string(second.begin(), second.end()) != "sent 500 ms late") throw std::runtime_error("second message changed");
    }
    boot->barrier();
  }));
}

}  // namespace
}  // namespace plugboard
