#include "communicator/failure_notices.hpp"

#include "collectives/bootstrap_tags.hpp"
#include "communicator/wire.hpp"
#include "plugboard/bootstrap.hpp"
#include "plugboard/communicator.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {

namespace {

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// reason ending in one full stop (a reason may end in one, or in ';' or ':').
std::string sentence(std::string reason) {
  while (!reason.empty() && (reason.back() == ' ' || reason.back() == ';' || reason.back() == ':')) reason.pop_back();
  if (reason.empty() || (reason.back() != '.' && reason.back() != '?' && reason.back() != '!')) reason += '.';
  return reason;
}

bool endsWith(const std::string& text, const std::string& ending) {
  return text.size() >= ending.size() && text.compare(text.size() - ending.size(), ending.size(), ending) == 0;
}

}  // namespace

FailureNotices::FailureNotices(Communicator& comm, NoticeScope scope)
    : comm_(comm),
      tag_(scope == NoticeScope::GpuCollectives ? kGpuNoticeTag : kRankNoticeTag),
      failedIn_(scope == NoticeScope::GpuCollectives ? " failed in its GPU collectives" : " gave up on the communicator"),
      ending_(scope == NoticeScope::GpuCollectives
                  ? " The GPU collectives of this communicator cannot be used any more."
                  : " Waits on this communicator end with this error from now on; create a new one to go on."),
      kind_(scope == NoticeScope::GpuCollectives ? "GPU failure notice" : "failure notice") {}

void FailureNotices::dropStale() {
  Bootstrap& b = comm_.bootstrap();
  if (!b.canPoll()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (int peer = 0; peer < comm_.size(); ++peer)
    if (peer != comm_.rank())
      while (b.poll(peer, tag_)) b.recv(peer, tag_);
}

void FailureNotices::sendOnce(const std::string& reason) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (sent_ || received_) return;  // a rank that was told does not tell the others again
  sent_ = true;
  try {
    // The receiver adds its own ending: drop the sender's.
    std::string text = reason;
    if (endsWith(text, ending_)) text.resize(text.size() - ending_.size());
    BlobWriter w;
    w.str(text);
    for (int peer = 0; peer < comm_.size(); ++peer) {
      if (peer == comm_.rank()) continue;
      try {
        comm_.bootstrap().send(w.data().data(), w.data().size(), peer, tag_);
      } catch (const std::exception& e) {
        PB_LOG(Info, "COLL", "rank " << comm_.rank() << ": no " << kind_ << " to rank " << peer << ": " << e.what());
      }
    }
    PB_LOG(Info, "COLL", "rank " << comm_.rank() << ": sent its peers a " << kind_ << ": " << text);
  } catch (const std::exception& e) {
    PB_LOG(Warn, "COLL", "rank " << comm_.rank() << ": no " << kind_ << "s sent: " << e.what());
  }
}

std::optional<Error> FailureNotices::poll(bool now) {
  // Lock-free until a look is due: waits and calls ask often.
  if (!heard_.load(std::memory_order_acquire)) {
    const int64_t at = nowNs();
    const int64_t last = lastPollNs_.load(std::memory_order_relaxed);
    if (!now && at - last < std::chrono::nanoseconds(kPollInterval).count()) return std::nullopt;
    lastPollNs_.store(at, std::memory_order_relaxed);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (received_) return received_;
  if (const int peer = peerWithNotice(); peer >= 0) {
    received_ = errorFor(peer, comm_.bootstrap().recv(peer, tag_));
    receivedFrom_ = peer;
    heard_.store(true, std::memory_order_release);
  }
  return received_;
}

std::optional<Error> FailureNotices::heard() {
  if (!heard_.load(std::memory_order_acquire)) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  return received_;
}

bool FailureNotices::sent() {
  std::lock_guard<std::mutex> lock(mu_);
  return sent_;
}

void FailureNotices::forget(const std::vector<bool>& sentBy) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int peer = 0; peer < comm_.size(); ++peer)
    if (peer != comm_.rank() && sentBy.at(peer) && peer != receivedFrom_) comm_.bootstrap().recv(peer, tag_);
  sent_ = false;
  received_.reset();
  receivedFrom_ = -1;
  heard_.store(false, std::memory_order_release);
}

int FailureNotices::peerWithNotice() const {
  Bootstrap& b = comm_.bootstrap();
  if (!b.canPoll()) return -1;
  for (int peer = 0; peer < comm_.size(); ++peer)
    if (peer != comm_.rank() && b.poll(peer, tag_)) return peer;
  return -1;
}

Error FailureNotices::errorFor(int peer, const std::vector<char>& message) const {
  const int me = comm_.rank();
  const std::string who = "rank " + std::to_string(me) + " (host " + comm_.hostOf(me) + "): rank " +
                          std::to_string(peer) + " (host " + comm_.hostOf(peer) + ")";
  try {
    BlobReader r(message, "rank " + std::to_string(peer));
    const std::string reason = r.str();
    if (!r.done()) throw Error(ErrorCode::Remote, "bytes after the reason");
    return Error(ErrorCode::Remote, who + failedIn_ + " and told its peers: " + sentence(reason) + ending_);
  } catch (const Error& e) {
    return Error(ErrorCode::Remote, who + " sent a malformed " + kind_ + " (" + e.what() + ")." + ending_);
  }
}

}  // namespace plugboard
