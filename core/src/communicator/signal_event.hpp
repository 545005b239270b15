// A process-wide event count. Plugins bump it (host service signal_landed)
// when a signal lands or an operation completes; host-side waiters sleep on
// it with futex instead of polling, which matters when ranks outnumber cores.
//
// Waiter protocol (no lost wake-ups):
//   seen = epoch();  if (condition) done;  waitChanged(seen, max);
// A notify after `seen` was read changes the epoch, so waitChanged returns
// at once; the seq_cst order of (waiters++, epoch check) against
// (epoch++, waiters load) covers the window in between.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace plugboard {

/// The event count; one per process.
class SignalEvent {
 public:
  /// The process's instance.
  static SignalEvent& instance();
  /// Current epoch; read it before checking the condition you wait for.
  uint32_t epoch() const { return epoch_.load(std::memory_order_seq_cst); }
  /// Sleeps until the epoch differs from seen, or at most max.
  void waitChanged(uint32_t seen, std::chrono::microseconds max);
  /// Advances the epoch and wakes every sleeper (a syscall only if any sleep).
  void notify();

 private:
  std::atomic<uint32_t> epoch_{0};
  std::atomic<uint32_t> waiters_{0};
};

}  // namespace plugboard
