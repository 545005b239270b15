// One thread per communicator that looks for failure notices between
// calls, for objects whose waits run where no host loop polls (GPU
// kernels): a notice waiting in the bootstrap ends their waits while the
// user's thread sits in cudaStreamSynchronize, not at gpu_wait_timeout.
// The thread starts with the first watch() and looks every kInterval; it
// only polls the bootstrap (FailureNotices::pending), so it may run beside
// any bootstrap call. Host code only: built and tested without a GPU.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "collectives/periodic_thread.hpp"
#include "communicator/failure_notices.hpp"

namespace plugboard {

/// Calls each watcher's function once when its channel's notice waits in
/// the bootstrap (or was read already). Thread-safe.
class NoticeWatcher {
 public:
  /// Time between two looks.
  static constexpr std::chrono::milliseconds kInterval{10};

  /// what names the thread in logs ("rank 3").
  explicit NoticeWatcher(std::string what) : what_(std::move(what)) {}
  /// Stops the thread (waits for a look in progress).
  ~NoticeWatcher();
  NoticeWatcher(const NoticeWatcher&) = delete;
  NoticeWatcher& operator=(const NoticeWatcher&) = delete;

  /// Calls onNotice once, on the watcher's thread, when channel has a
  /// notice; onNotice must not throw or call watch()/unwatch(). channel
  /// outlives the watch. Returns its id for unwatch().
  uint64_t watch(FailureNotices& channel, std::function<void()> onNotice);
  /// Removes a watch; once it returns, its function no longer runs.
  void unwatch(uint64_t id);

 private:
  struct Watch {
    FailureNotices* channel;
    std::function<void()> onNotice;
  };
  /// The thread's tick: runs the functions whose channel has a notice.
  void look();

  const std::string what_;
  std::mutex mu_;  // watches_; held while functions run, so unwatch() waits for them
  std::map<uint64_t, Watch> watches_;
  uint64_t nextId_ = 1;
  std::unique_ptr<PeriodicThread> thread_;  // made by the first watch()
};

}  // namespace plugboard
