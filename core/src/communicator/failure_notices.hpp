// Failure notices through the bootstrap. A rank that fails tells every
// peer once, with its reason; a peer looks for notices while it waits (at
// most once a millisecond) and fails naming that rank and its reason,
// instead of waiting out its own timeout. Two channels, one class:
//  - the communicator's (NoticeScope::Communicator): Communicator::
//    reportFailure sends (also a failed user-run plan executor), and
//    checkErrors(), semaphore waits, host plan executors, the host
//    collectives' waits, GPU plan executors and GPU collectives hear it; a
//    notice heard is kept, so every later wait of that communicator ends
//    with it;
//  - the GPU collectives' (NoticeScope::GpuCollectives): a GpuCollectives
//    whose call (built-in or plan) failed sends; its synchronize(),
//    checkErrors() and calls hear it (gpu/collectives/errors.cpp).
// GPU kernels wait where no host loop polls: the communicator's
// NoticeWatcher ends their waits between calls (notice_watcher.hpp).
// Host code only: built and tested without a GPU.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "plugboard/error.hpp"

namespace plugboard {

class Communicator;

/// Whose failure a channel carries.
enum class NoticeScope {
  Communicator,   ///< A rank gave up on the communicator (Communicator::reportFailure).
  GpuCollectives  ///< A rank's GPU collectives failed.
};

/// One channel's notices on one rank. sendOnce() and poll() make bootstrap
/// calls: call them from threads that may (Bootstrap's contract); pending()
/// only polls, so any thread may ask. Thread-safe.
class FailureNotices {
 public:
  /// Minimum time between two looks at the bootstrap.
  static constexpr std::chrono::milliseconds kPollInterval{1};

  FailureNotices(Communicator& comm, NoticeScope scope);
  FailureNotices(const FailureNotices&) = delete;
  FailureNotices& operator=(const FailureNotices&) = delete;

  /// Drops notices that nobody read and that an earlier user of this
  /// channel sent (an earlier GPU collectives or communicator on the same
  /// bootstrap): call once every rank's set-up is past a collective step
  /// (everything sent before it has arrived).
  void dropStale();
  /// Tells every peer that this rank failed with reason; only the first
  /// call sends, and none once a peer's notice came (that peer told
  /// everyone). Never throws (a peer that is gone is logged).
  void sendOnce(const std::string& reason) noexcept;
  /// Looks for a peer's notice, unless it looked less than kPollInterval
  /// ago (and now is false) or one was found already. The error the first
  /// notice stands for (Error(Remote) naming this rank, the sender, its
  /// host and its reason), kept for every later call; empty while none came.
  std::optional<Error> poll(bool now = false);
  /// True when a peer's notice waits in the bootstrap, not yet read by
  /// poll(). Only the bootstrap's poll(), so any thread may ask while
  /// another is in a bootstrap call; no state kept.
  bool pending() const { return peerWithNotice() >= 0; }
  /// The lowest peer whose notice waits in the bootstrap, or -1; polls
  /// only, as pending().
  int peerWithNotice() const;
  /// The error of the notice poll() read, without looking for one.
  std::optional<Error> heard();
  /// True once this rank sent its notice (sendOnce()).
  bool sent();
  /// A collective step (Communicator::recover): every rank passes which
  /// ranks sent a notice before it (sentBy, by rank). Reads every notice
  /// they sent that poll() has not (each sends at most one, so none is
  /// left in the bootstrap), then forgets sending and hearing: the channel
  /// is as new, and a later failure is told and heard again.
  void forget(const std::vector<bool>& sentBy);

 private:
  /// The error a notice from peer stands for (or a malformed-notice error).
  Error errorFor(int peer, const std::vector<char>& message) const;

  Communicator& comm_;
  const int tag_;
  const std::string failedIn_;  // " failed in its GPU collectives", as the receiver words it
  const std::string ending_;    // what the receiver adds after the reason
  const std::string kind_;      // "GPU failure notice", for malformed ones and logs

  std::mutex mu_;
  bool sent_ = false;
  std::optional<Error> received_;
  int receivedFrom_ = -1;  // the rank whose notice received_ stands for
  std::atomic<bool> heard_{false};       // received_ is set (read without mu_)
  std::atomic<int64_t> lastPollNs_{0};   // steady_clock ns of the last look
};

}  // namespace plugboard
