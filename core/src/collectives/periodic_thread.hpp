// A background thread that runs one task at a fixed interval.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace plugboard {

/// Calls tick() every interval on its own thread until destroyed. The
/// first exception tick() throws stops the ticking; it is logged (subsystem
/// COLL, naming what) and kept for error(): the callers' own paths meet the
/// same failure, so nothing is lost.
class PeriodicThread {
 public:
  /// Starts the thread; the first tick comes one interval from now.
  PeriodicThread(std::string what, std::chrono::milliseconds interval, std::function<void()> tick);
  /// Stops the thread: waits for a tick in progress, never for an interval.
  ~PeriodicThread();
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;

  /// What stopped the ticking (an exception's message), or empty.
  std::string error() const;
  /// Ticks completed so far.
  uint64_t ticks() const;

 private:
  void run();

  const std::string what_;
  const std::chrono::milliseconds interval_;
  const std::function<void()> tick_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string error_;
  uint64_t ticks_ = 0;
  std::thread thread_;  // last: starts once every other member is ready
};

}  // namespace plugboard
