#include "collectives/periodic_thread.hpp"

#include <exception>

#include "plugboard/logger.hpp"

namespace plugboard {

PeriodicThread::PeriodicThread(std::string what, std::chrono::milliseconds interval, std::function<void()> tick)
    : what_(std::move(what)), interval_(interval), tick_(std::move(tick)), thread_(&PeriodicThread::run, this) {}

PeriodicThread::~PeriodicThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::string PeriodicThread::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

uint64_t PeriodicThread::ticks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ticks_;
}

void PeriodicThread::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, interval_, [this] { return stop_; })) {
    lock.unlock();
    std::string failure;
    try {
      tick_();
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "an unknown exception";
    }
    lock.lock();
    ++ticks_;
    if (!failure.empty()) {
      error_ = failure;
      PB_LOG(Warn, "COLL", what_ << " stopped: " << failure);
      return;
    }
  }
}

}  // namespace plugboard
