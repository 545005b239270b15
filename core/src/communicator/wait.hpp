// Polling with a deadline. Spin briefly, then yield the CPU for a while
// (wait_yield_polls: a transport's receiver thread on the same core then
// runs at once and the waiter sees its result without a futex wake-up,
// which costs a two-core machine 10-20 us per message); then, where every
// transport involved promises wake-ups (PB_CAP_SIGNAL_NOTIFY), sleep on
// the process's SignalEvent until something lands; otherwise sleep a
// little longer each round. Quick when the answer is near, cheap when
// ranks outnumber cores.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "communicator/signal_event.hpp"

namespace plugboard {

/// Yielding polls of every Backoff before it sleeps: the wait_yield_polls
/// setting, process-wide (set by each communicator's set-up).
inline std::atomic<unsigned> gWaitYieldPolls{300};
/// Polls of every Backoff before its first yield: 20, or 0 where this
/// host's ranks are at least its cores (set by each communicator's set-up:
/// a spinning rank then holds a core another rank needs to move the data it
/// waits for; 4 ranks on 2 cores, small host collectives ran 15-20% faster).
inline std::atomic<unsigned> gWaitSpinPolls{20};

/// A polling loop's pacing and deadline. Usage:
///   Backoff b(timeout, notifying);
///   for (;;) { b.arm(); if (condition) break; if (b.expired()) fail; b.pause(); }
class Backoff {
 public:
  /// Deadline timeout from the first look at the clock (expired() or
  /// elapsedText(), so a wait that ends in its first polls never reads the
  /// clock); eventDriven: wake-ups are promised.
  explicit Backoff(std::chrono::milliseconds timeout, bool eventDriven = false)
      : timeout_(timeout), eventDriven_(eventDriven) {}
  /// Call before each check of the condition.
  void arm() { seen_ = SignalEvent::instance().epoch(); }
  /// True once the deadline passed.
  bool expired() { return std::chrono::steady_clock::now() >= start() + timeout_; }
  /// True on the polls where a loop should also look for failures and the
  /// deadline: the 16th, then every one from the 20th (a call that ends in
  /// its first polls, as most small ones do, pays for no such look).
  bool checkDue() const { return rounds_ >= kCheckAlwaysAfter || rounds_ % 16 == 15; }
  /// Waits a little, as described above.
  void pause() {
    ++rounds_;
    const unsigned spins = gWaitSpinPolls.load(std::memory_order_relaxed);
    if (rounds_ < spins) return;
    if (rounds_ < spins + gWaitYieldPolls.load(std::memory_order_relaxed)) {
      std::this_thread::yield();
      return;
    }
    if (eventDriven_) {  // bounded, so a missed promise costs latency, not a hang
      SignalEvent::instance().waitChanged(seen_, std::chrono::microseconds(1000));
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rounds_ < 2000 ? 5 : 100));
  }
  /// Time since construction (since the first look at the clock).
  std::chrono::steady_clock::duration elapsed() { return std::chrono::steady_clock::now() - start(); }
  /// Time since construction as "2.0 s".
  std::string elapsedText() {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start()).count();
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f s", s);
    return buf;
  }

 private:
  static constexpr unsigned kCheckAlwaysAfter = 20;  ///< Polls after which every one checks.
  std::chrono::steady_clock::time_point start() {
    if (!started_) start_ = std::chrono::steady_clock::now(), started_ = true;
    return start_;
  }
  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point start_{};
  bool started_ = false;
  bool eventDriven_;
  uint32_t seen_ = 0;
  unsigned rounds_ = 0;
};

}  // namespace plugboard
