// Failure notices between the GPU collectives of a communicator's ranks.
// A rank whose GPU collectives fail (a proxy or transport error, a device
// wait that timed out) tells every peer through the bootstrap. A peer looks
// for notices while it waits on the host (GpuCollectives::synchronize), in
// checkErrors() and at each call, at most once a millisecond; on one it
// ends its own device waits at once and fails naming that rank and its
// reason, instead of waiting out gpu_wait_timeout. Host code only: built
// and tested without a GPU.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "plugboard/communicator.hpp"
#include "plugboard/error.hpp"

namespace plugboard {

/// One GpuCollectives' notices. Used from the threads that call the GPU
/// collectives (the bootstrap's calls; its polls never wait on another
/// thread's call), except pending(), which only polls.
class GpuFailureNotices {
 public:
  /// Minimum time between two looks at the bootstrap.
  static constexpr std::chrono::milliseconds kPollInterval{1};

  explicit GpuFailureNotices(Communicator& comm) : comm_(comm) {}
  /// Drops notices that an earlier GPU collectives of this communicator
  /// sent and nobody read: call once every rank's set-up is past its
  /// barrier (everything sent before it has arrived).
  void dropStale();
  /// Tells every peer that this rank's GPU collectives failed with reason;
  /// only the first call sends. Never throws (a peer that is gone is logged).
  void sendOnce(const std::string& reason) noexcept;
  /// Looks for a peer's notice, unless it looked less than kPollInterval
  /// ago (and now is false) or one was found already. The error the first
  /// notice stands for (Error(Remote) naming this rank, the sender and its
  /// reason), kept for every later call; empty while none came.
  const std::optional<Error>& poll(bool now = false);
  /// True when a peer's notice waits in the bootstrap, not yet read by
  /// poll(). Only the bootstrap's poll(), so any thread may ask while
  /// another is in a bootstrap call (Bootstrap's contract); no state kept.
  bool pending() const;

 private:
  /// The error a notice from peer stands for (or a malformed-notice error).
  Error errorFor(int peer, const std::vector<char>& message) const;
  /// The lowest peer whose notice waits in the bootstrap (polls only), or -1.
  int peerWithNotice() const;

  Communicator& comm_;
  bool sent_ = false;
  std::optional<Error> received_;
  std::chrono::steady_clock::time_point lastPoll_{};
};

}  // namespace plugboard
