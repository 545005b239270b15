#include "communicator/notice_watcher.hpp"

#include <vector>

namespace plugboard {

NoticeWatcher::~NoticeWatcher() {
  std::unique_ptr<PeriodicThread> thread;
  {
    std::lock_guard<std::mutex> lock(mu_);
    thread = std::move(thread_);
  }
  thread.reset();  // outside mu_: a look in progress takes it
}

uint64_t NoticeWatcher::watch(FailureNotices& channel, std::function<void()> onNotice) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = nextId_++;
  watches_.emplace(id, Watch{&channel, std::move(onNotice)});
  if (!thread_) thread_ = std::make_unique<PeriodicThread>(what_ + ": the failure-notice watcher", kInterval, [this] { look(); });
  return id;
}

void NoticeWatcher::unwatch(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  watches_.erase(id);
}

void NoticeWatcher::look() {
  std::lock_guard<std::mutex> lock(mu_);
  // Several watches share a channel (every plan executor of a rule set
  // watches the communicator's): each channel is asked once per look.
  std::map<FailureNotices*, bool> hasNotice;
  std::vector<uint64_t> fired;
  for (auto& [id, w] : watches_) {
    auto [it, fresh] = hasNotice.try_emplace(w.channel, false);
    if (fresh) it->second = w.channel->heard() || w.channel->pending();
    if (!it->second) continue;
    w.onNotice();
    fired.push_back(id);
  }
  for (uint64_t id : fired) watches_.erase(id);  // once each
}

}  // namespace plugboard
