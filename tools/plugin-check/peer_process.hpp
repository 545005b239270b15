// The second process of the connection checks: a fresh copy of this
// program (fork + exec, so no plugin state or thread is inherited) that
// plays rank 1 and answers requests over a socketpair.
#pragma once

#include <sys/types.h>

#include <memory>

#include "channel.hpp"
#include "options.hpp"

namespace plugboard::check {

/// Parent-side handle of the peer process. The destructor closes the
/// channel, waits a few seconds for the peer to exit, then kills it.
class PeerProcess {
 public:
  /// Starts the peer for o. Throws CheckFailed if it cannot be started.
  explicit PeerProcess(const Options& o);
  ~PeerProcess();
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;

  /// The channel to the peer.
  Channel& channel() { return *channel_; }
  /// Waits up to seconds for the peer to exit; returns a description of
  /// how it ended ("" for exit status 0).
  std::string waitExit(double seconds);

 private:
  pid_t pid_ = -1;
  std::unique_ptr<Channel> channel_;
};

/// Entry of the peer process (--internal-peer FD): serves requests until
/// Quit or until the checker goes away. Returns the exit status.
int runPeer(const Options& o);

}  // namespace plugboard::check
