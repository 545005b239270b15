#include "communicator/signal_event.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace plugboard {
namespace {

long futex(std::atomic<uint32_t>* addr, int op, uint32_t value, const timespec* timeout) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex needs a plain 32-bit word");
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, value, timeout, nullptr, 0);
}

}  // namespace

SignalEvent& SignalEvent::instance() {
  static SignalEvent* event = new SignalEvent();  // never destroyed: plugin threads may outlive statics
  return *event;
}

void SignalEvent::waitChanged(uint32_t seen, std::chrono::microseconds max) {
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  if (epoch_.load(std::memory_order_seq_cst) == seen) {
    timespec ts{static_cast<time_t>(max.count() / 1000000), static_cast<long>((max.count() % 1000000) * 1000)};
    futex(&epoch_, FUTEX_WAIT_PRIVATE, seen, &ts);  // EAGAIN if the epoch moved: fine
  }
  waiters_.fetch_sub(1, std::memory_order_seq_cst);
}

void SignalEvent::notify() {
  epoch_.fetch_add(1, std::memory_order_seq_cst);
  if (waiters_.load(std::memory_order_seq_cst) > 0) futex(&epoch_, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
}

}  // namespace plugboard
