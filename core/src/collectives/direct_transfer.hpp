// Direct transfers: a large message whose receiver only copies it into one
// buffer skips both user-space copies of the chunked path (into the
// sender's outbox, out of the receiver's inbox). The receiver registers its
// destination and sends a Ready chunk carrying the descriptor; the sender
// registers its source, writes straight from it into the destination in
// pieces of at most host_direct_piece_bytes, and after each piece sends a
// Done chunk saying how many bytes have landed once it arrives (the
// connection delivers it after the write): a receiver that reduces
// consumes each piece from its staging buffer while it is still in cache
// and the next one is on the wire. Only
// on links whose transport registers host memory for the cost of a table
// entry (PB_CAP_CHEAP_REGISTRATION), for messages of at least
// host_direct_bytes; both ends choose alike because they run the same
// algorithm with the same setting.
#pragma once

#include <chrono>
#include <set>
#include <vector>

#include "collectives/exchange.hpp"

namespace plugboard {

/// Marks direct the jobs of at least policy.threshold(peer) bytes on
/// cheap-registration links (minBytes 0: none).
void chooseDirect(std::vector<SendJob>& sends, std::vector<RecvJob>& recvs, const DirectPolicy& policy);

/// Direct receive, first step: registers the destination and posts the
/// Ready chunk once the link has a free slot. True when it posted.
bool offerDirect(Communicator& comm, RecvJob& r);

/// Direct send: takes the receiver's Ready chunk from the head of the link,
/// then posts each piece's write (at most pieceBytes, a multiple of every
/// element size) and its Done chunk while the link has slots. receivesToo:
/// this exchange also receives chunks on the link (so another chunk at the
/// head is not a mismatch). True when it moved.
bool stepDirectSend(Communicator& comm, SendJob& s, bool receivesToo, size_t pieceBytes);

/// Direct receive: takes the Done chunks at the head of the link, in order,
/// consuming each announced piece from the staging buffer; done with the
/// one that says every byte landed. A Done chunk out of order, announcing
/// no new bytes or more than the message, is Error(Remote).
/// sendsDirectToo: a Ready chunk at the head is for this rank's own direct
/// send on the link. True when it moved.
bool stepDirectRecv(Communicator& comm, RecvJob& r, bool sendsDirectToo);

/// True once the job's part is done.
bool directSendFinished(const SendJob& s);
bool directRecvFinished(const RecvJob& r);

/// Waits until every direct write has left the source buffer (the caller
/// may reuse it), then releases the registrations. Best effort after an
/// error (quiet: the connection's own error is the one reported).
void finishDirect(std::vector<SendJob>& sends, std::vector<RecvJob>& recvs, std::chrono::milliseconds timeout,
                  bool afterError);

/// One line on a direct job, for the timeout message.
std::string describeDirect(const SendJob& s);
std::string describeDirect(const RecvJob& r);

}  // namespace plugboard
