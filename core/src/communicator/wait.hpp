// Polling with a deadline: spin briefly, then yield, then sleep, so waits
// are quick when the answer is near and cheap when it is not.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

namespace plugboard {

/// A polling loop's pacing and deadline.
class Backoff {
 public:
  /// Deadline timeout from now.
  explicit Backoff(std::chrono::milliseconds timeout)
      : start_(std::chrono::steady_clock::now()), deadline_(start_ + timeout) {}
  /// True once the deadline passed.
  bool expired() const { return std::chrono::steady_clock::now() >= deadline_; }
  /// Waits a little longer each call, up to 100 us.
  void pause() {
    ++rounds_;
    if (rounds_ < 20) return;
    if (rounds_ < 40) { std::this_thread::yield(); return; }
    std::this_thread::sleep_for(std::chrono::microseconds(rounds_ < 2000 ? 5 : 100));
  }
  /// Time since construction as "2.0 s".
  std::string elapsedText() const {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f s", s);
    return buf;
  }

 private:
  std::chrono::steady_clock::time_point start_, deadline_;
  unsigned rounds_ = 0;
};

}  // namespace plugboard
