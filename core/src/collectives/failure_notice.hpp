// Failure notices: a rank whose host collective failed (a peer's error, a
// timeout, a mismatch) tells every peer at once, in the slot its next chunk
// would take, so that peers blocked on it fail within milliseconds naming
// the rank at fault and its reason, instead of each waiting out its own
// timeout. A peer that fails on a notice sends its own, so the failure
// reaches ranks that were waiting on it, not on the first rank. Best
// effort: a peer with no free slot, or a connection that is gone, is
// skipped and learns by its timeout as before.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "collectives/exchange.hpp"
#include "collectives/peer_link.hpp"

namespace plugboard {

/// Sends a notice with reason (cut to a chunk) to every link with a free
/// slot; never throws. call is the call that failed (for the peers' message).
void sendFailureNotices(const std::map<int, std::unique_ptr<PeerLink>>& links, const CallSignature& call,
                        const std::string& reason) noexcept;

/// True when h is a failure notice.
bool isFailureNotice(const ChunkHeader& h);

/// Throws Error(Remote) for the notice at the head of link: this rank,
/// the peer, the peer's failed call and the reason it sent.
[[noreturn]] void throwPeerFailure(Communicator& comm, const PeerLink& link);

}  // namespace plugboard
