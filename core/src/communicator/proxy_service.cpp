#include "communicator/proxy_service.hpp"

#include <algorithm>
#include <chrono>

#include "plugboard/logger.hpp"

namespace plugboard {

ProxyService::ProxyService() : thread_([this] { run(); }) {}

ProxyService::~ProxyService() { stop(); }

void ProxyService::add(std::shared_ptr<ConnectionImpl> conn) {
  std::lock_guard<std::mutex> lock(mutex_);
  connections_.push_back(std::move(conn));
}

void ProxyService::remove(const std::shared_ptr<ConnectionImpl>& conn) {
  std::lock_guard<std::mutex> lock(mutex_);
  connections_.erase(std::remove(connections_.begin(), connections_.end(), conn), connections_.end());
}

void ProxyService::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

// Returns true while some connection still has operations outstanding.
bool ProxyService::pollOnce() {
  std::vector<std::shared_ptr<ConnectionImpl>> conns;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    conns = connections_;
  }
  bool busy = false;
  for (auto& c : conns) {
    if (c->failed.load(std::memory_order_relaxed)) continue;
    // A connection another thread holds is being progressed (or posted to)
    // by it: no help needed, and its counters are in flux.
    if (!c->progress(/*ifIdle=*/true)) continue;
    busy = busy || c->completed.load() < c->posted.load();
  }
  return busy;
}

void ProxyService::run() {
  // Idle: sleep, waking now and then so transports that need polling to
  // receive (and dead peers) are still noticed.
  constexpr auto kIdleWait = std::chrono::microseconds(500);
  constexpr auto kBusyWait = std::chrono::microseconds(20);
  int spins = 0;
  for (;;) {
    bool busy = pollOnce();
    std::unique_lock<std::mutex> lock(mutex_);
    if (stopping_) return;
    if (busy && ++spins < 64) {
      lock.unlock();
      std::this_thread::yield();
      continue;
    }
    spins = 0;
    wake_.wait_for(lock, busy ? kBusyWait : kIdleWait, [this] { return stopping_; });
    if (stopping_) return;
  }
}

}  // namespace plugboard
