// The start of a job: every rank reports its listener to rank 0, which
// answers with the table of all listeners.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "bootstrap/context.hpp"
#include "bootstrap/unique_id.hpp"
#include "net/socket.hpp"

namespace plugboard::bootstrap {

/// What a rank holds once every rank has joined.
struct Rendezvous {
  net::Socket listener;               ///< This rank's listener for peers.
  std::vector<net::SockAddr> table;   ///< Every rank's listener, by rank.
};

/// Rank 0: takes over or opens the root listener, waits for nranks-1 joins,
/// sends each the table. Throws Error(Timeout) listing the ranks that never
/// joined, Error(Remote) when a rank disagrees on nranks or a rank joins twice.
Rendezvous runRoot(const RankContext& ctx, const IdContents& id, std::chrono::milliseconds timeout);

/// Ranks > 0: connects to the root, opens a listener (on the interface that
/// reaches the root, or the one interfaceSpec selects), joins, and waits for
/// the table. Throws Error(Timeout) when the root cannot be reached or does
/// not answer, or the root's own error when it aborted the job.
Rendezvous joinRoot(const RankContext& ctx, const IdContents& id, std::chrono::milliseconds timeout,
                    const std::string& interfaceSpec);

/// "3" or "1, 4-6": a compact list of ranks for messages.
std::string rankListText(const std::vector<int>& ranks);

}  // namespace plugboard::bootstrap
