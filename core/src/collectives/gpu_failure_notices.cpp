#include "collectives/gpu_failure_notices.hpp"

#include "collectives/bootstrap_tags.hpp"
#include "communicator/wire.hpp"
#include "plugboard/bootstrap.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {

void GpuFailureNotices::dropStale() {
  Bootstrap& b = comm_.bootstrap();
  if (!b.canPoll()) return;
  for (int peer = 0; peer < comm_.size(); ++peer)
    if (peer != comm_.rank())
      while (b.poll(peer, kGpuNoticeTag)) b.recv(peer, kGpuNoticeTag);
}

void GpuFailureNotices::sendOnce(const std::string& reason) noexcept {
  if (sent_ || received_) return;  // a rank that was told does not tell the others again
  sent_ = true;
  try {
    // The receiver adds its own ending: drop the sender's.
    const std::string ending = " The GPU collectives of this communicator cannot be used any more.";
    std::string text = reason;
    if (text.size() >= ending.size() && text.compare(text.size() - ending.size(), ending.size(), ending) == 0)
      text.resize(text.size() - ending.size());
    BlobWriter w;
    w.str(text);
    for (int peer = 0; peer < comm_.size(); ++peer) {
      if (peer == comm_.rank()) continue;
      try {
        comm_.bootstrap().send(w.data().data(), w.data().size(), peer, kGpuNoticeTag);
      } catch (const std::exception& e) {
        PB_LOG(Info, "COLL", "rank " << comm_.rank() << ": no GPU failure notice to rank " << peer << ": " << e.what());
      }
    }
    PB_LOG(Info, "COLL", "rank " << comm_.rank() << ": told the peers that its GPU collectives failed");
  } catch (const std::exception& e) {
    PB_LOG(Warn, "COLL", "rank " << comm_.rank() << ": no GPU failure notices sent: " << e.what());
  }
}

const std::optional<Error>& GpuFailureNotices::poll(bool now) {
  if (received_) return received_;
  const auto at = std::chrono::steady_clock::now();
  if (!now && at - lastPoll_ < kPollInterval) return received_;
  lastPoll_ = at;
  if (const int peer = peerWithNotice(); peer >= 0) received_ = errorFor(peer, comm_.bootstrap().recv(peer, kGpuNoticeTag));
  return received_;
}

bool GpuFailureNotices::pending() const { return peerWithNotice() >= 0; }

int GpuFailureNotices::peerWithNotice() const {
  Bootstrap& b = comm_.bootstrap();
  if (!b.canPoll()) return -1;
  for (int peer = 0; peer < comm_.size(); ++peer)
    if (peer != comm_.rank() && b.poll(peer, kGpuNoticeTag)) return peer;
  return -1;
}

Error GpuFailureNotices::errorFor(int peer, const std::vector<char>& message) const {
  const int me = comm_.rank();
  const std::string who = "rank " + std::to_string(me) + " (host " + comm_.hostOf(me) + "): rank " +
                          std::to_string(peer) + " (host " + comm_.hostOf(peer) + ")";
  const char* after = ". The GPU collectives of this communicator cannot be used any more.";
  try {
    BlobReader r(message, "rank " + std::to_string(peer));
    const std::string reason = r.str();
    if (!r.done()) throw Error(ErrorCode::Remote, "bytes after the reason");
    return Error(ErrorCode::Remote, who + " failed in its GPU collectives and told its peers: " + reason + after);
  } catch (const Error& e) {
    return Error(ErrorCode::Remote, who + " sent a malformed GPU failure notice (" + e.what() + ")" + after);
  }
}

}  // namespace plugboard
