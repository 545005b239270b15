// The failure notices GPU collectives send each other (host code, so they
// run here without a GPU), and the bootstrap's polls from a second thread,
// which the GPU collectives' host relay makes while a user's call runs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "collectives/bootstrap_tags.hpp"
#include "collectives/gpu_failure_notices.hpp"
#include "comm_fixture.hpp"
#include "multiproc.hpp"
#include "plugboard/communicator.hpp"

namespace plugboard {
namespace {

using test::expectAllPassed;
using test::loopbackBootstrap;
using test::runRanks;
using Clock = std::chrono::steady_clock;
constexpr auto kRunLimit = std::chrono::milliseconds(60000);

void useEthernet() { setenv("PLUGBOARD_TRANSPORTS", "ethernet", 1); }

/// Polls until a notice comes (at most 5 s).
Error awaitNotice(GpuFailureNotices& notices) {
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
    GpuFailureNotices notices(comm);
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
    GpuFailureNotices later(comm);
    later.dropStale();
    std::this_thread::sleep_for(2 * GpuFailureNotices::kPollInterval);
    if (later.poll()) throw std::runtime_error("a stale or second notice: " + std::string(later.poll()->what()));
  });
}

// Bytes that are not a notice are named as such, not taken for a reason.
TEST(GpuFailureNotices, AMalformedNoticeIsNamedAsOne) {
  inRanks(2, [](int rank, Communicator& comm, Bootstrap& boot) {
    GpuFailureNotices notices(comm);
    if (rank == 1) {
      const char junk[5] = {9, 9, 9, 9, 9};
      boot.send(junk, sizeof(junk), 0, kGpuNoticeTag);
    } else {
      const Error e = awaitNotice(notices);
      test::requireError([&] { throw e; }, ErrorCode::Remote, {"rank 1 (host ", "malformed GPU failure notice"});
    }
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
