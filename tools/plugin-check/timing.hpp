// Deadlines and a polite pause for the polling loops of the checks.
#pragma once

#include <chrono>
#include <thread>

namespace plugboard::check {

/// Clock of every measurement here.
using Clock = std::chrono::steady_clock;

/// A point in time seconds from construction.
class Deadline {
 public:
  /// Expires seconds from now.
  explicit Deadline(double seconds)
      : start_(Clock::now()),
        end_(start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds))) {}
  /// True once the time is up.
  bool expired() const { return Clock::now() >= end_; }
  /// Seconds since construction.
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  Clock::time_point start_;
  Clock::time_point end_;
};

/// Seconds since t.
inline double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

/// Yields for the first spins of a wait, then sleeps 50 us per call, so a
/// waiting checker leaves CPU to the plugin's own threads.
class Pause {
 public:
  /// One step of waiting.
  void operator()() {
    if (++count_ < 200) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }

 private:
  int count_ = 0;
};

}  // namespace plugboard::check
