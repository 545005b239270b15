// The proxy thread: drives every connection's proxy_progress so operations
// complete while the application computes. Errors are recorded on the
// connection and rethrown on the caller's thread by its next call.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "communicator/communicator_impl.hpp"

namespace plugboard {

/// Owns one background thread; stops and joins it on destruction.
class ProxyService {
 public:
  ProxyService();
  ~ProxyService();
  ProxyService(const ProxyService&) = delete;
  ProxyService& operator=(const ProxyService&) = delete;

  /// Starts driving conn.
  void add(std::shared_ptr<ConnectionImpl> conn);
  /// Stops driving conn (a failed connection replaced by failover).
  void remove(const std::shared_ptr<ConnectionImpl>& conn);
  /// Stops the thread (idempotent); connections are left to their owner.
  void stop();

 private:
  void run();
  bool pollOnce();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::shared_ptr<ConnectionImpl>> connections_;  // guarded by mutex_
  bool stopping_ = false;                                     // guarded by mutex_
  std::thread thread_;
};

}  // namespace plugboard
