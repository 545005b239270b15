// Failure notices: a rank whose host collective failed (a peer's error, a
// timeout, a mismatch) tells every peer at once, in the slot its next chunk
// would take, so that peers blocked on it fail within milliseconds naming
// the rank at fault and its reason, instead of each waiting out its own
// timeout. A peer that fails on a notice sends its own, so the failure
// reaches ranks that were waiting on it, not on the first rank. A peer
// whose link stays full for 200 ms, or whose connection is gone, gets the
// notice through the bootstrap instead (out of band), which its waits poll
// at most once a millisecond; only a peer the bootstrap cannot reach either
// learns by its timeout.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "collectives/exchange.hpp"
#include "collectives/peer_link.hpp"
#include "plugboard/error.hpp"

namespace plugboard {

/// Sends a notice with reason (cut to a chunk) on every link, waiting up to
/// 200 ms for a full link to free a slot, and through comm's bootstrap to
/// each peer whose link could not take it; never throws. call is the call
/// that failed (for the peers' message).
void sendFailureNotices(Communicator& comm, const std::map<int, std::unique_ptr<PeerLink>>& links,
                        const CallSignature& call, const std::string& reason) noexcept;

/// True when h is a failure notice.
bool isFailureNotice(const ChunkHeader& h);

/// Error(Remote) for the notice `behind` places after the head of link:
/// this rank, the peer, the peer's failed call and the reason it sent.
Error peerFailure(Communicator& comm, const PeerLink& link, uint64_t behind = 0);
/// Throws peerFailure(comm, link).
[[noreturn]] void throwPeerFailure(Communicator& comm, const PeerLink& link);

/// The first peer failure whose notice has landed on any of links, behind
/// the head too (a peer that went on to its next call and failed there
/// sent its chunks for that call first), or came out of band, looking
/// for up to `wait`; empty if none. A rank's own error is often the
/// consequence of a peer's (its connection closed because that peer
/// failed), and the notice says why.
std::optional<Error> landedPeerFailure(Communicator& comm, const std::map<int, std::unique_ptr<PeerLink>>& links,
                                       std::chrono::milliseconds wait);

}  // namespace plugboard
