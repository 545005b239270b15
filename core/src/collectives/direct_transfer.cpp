#include "collectives/direct_transfer.hpp"

#include <algorithm>

#include "collectives/failure_notice.hpp"
#include "plugboard/error.hpp"

namespace plugboard {
namespace {

ChunkHeader controlHeader(const CallSignature& call, size_t bytes, uint32_t phase) {
  ChunkHeader h = stampHeader(call, bytes);
  h.phase = phase;
  return h;
}

std::string pair(Communicator& comm, const PeerLink& link) {
  return "rank " + std::to_string(comm.rank()) + " (host " + comm.hostOf(comm.rank()) + ") and " + link.describePeer();
}

/// Throws Error(Remote) unless h is a control chunk of this call and size.
void checkControl(Communicator& comm, const PeerLink& link, const ChunkHeader& h, const CallSignature& call,
                  size_t bytes, const char* expected) {
  if (h.opSeq == call.opSeq && h.kind == call.kind && h.dtype == call.dtype && h.op == call.op && h.root == call.root &&
      h.count == call.count && h.bytes == bytes)
    return;  // the usual case, without the descriptions below (which also ignore fields a call does not use)
  const std::string mine = describeCall(call.kind, call.dtype, call.op, call.root, call.count);
  const std::string theirs = describeCall(h.kind, h.dtype, h.op, h.root, h.count);
  if (h.opSeq == call.opSeq && mine == theirs && h.bytes == bytes) return;
  throw Error(ErrorCode::Remote, pair(comm, link) + " disagree: this rank's collective #" + std::to_string(call.opSeq) +
                                     " is " + mine + " of " + std::to_string(bytes) + " bytes, waiting for the peer's " +
                                     expected + "; the peer's #" + std::to_string(h.opSeq) + " is " + theirs + " of " +
                                     std::to_string(h.bytes) + " bytes (collectives must be called in the same "
                                     "order with matching arguments)");
}

[[noreturn]] void unexpectedChunk(Communicator& comm, const PeerLink& link, uint32_t phase, const char* waitingFor) {
  static const char* names[] = {"a chunk of data", "a direct-transfer offer", "a direct-transfer completion"};
  throw Error(ErrorCode::Remote, pair(comm, link) + " disagree on how a message travels: this rank waits for " +
                                     waitingFor + " but the peer sent " + (phase < 3 ? names[phase] : "an unknown chunk") +
                                     " (is host_direct_bytes the same on every rank?)");
}

}  // namespace

size_t DirectPolicy::threshold(int peer) const {
  const bool shares = peersAtOnce > 1 && coresScarce && peer >= 0 &&
                      static_cast<size_t>(peer) < coresScarce->size() && (*coresScarce)[peer];
  if (minBytes == 0 || !shares) return minBytes;
  const size_t peers = static_cast<size_t>(peersAtOnce);
  return std::max((minBytes + peers - 1) / peers, std::min(minBytes, kDirectFloorBytes));
}

void chooseDirect(std::vector<SendJob>& sends, std::vector<RecvJob>& recvs, const DirectPolicy& policy) {
  if (policy.minBytes == 0) return;
  for (auto& s : sends)
    s.direct = s.bytes >= policy.threshold(s.link->peer()) && s.link->connection().registersCheaply();
  for (auto& r : recvs)
    r.direct = r.bytes >= policy.threshold(r.link->peer()) && r.link->connection().registersCheaply();
}

bool offerDirect(Communicator& comm, RecvJob& r) {
  DirectRecvState& d = r.directState;
  if (d.readySent || !r.link->canSend()) return false;
  Connection& conn = r.link->connection();
  d.staging = r.copyTo ? nullptr : r.link->staging(r.bytes);
  d.target = comm.registerMemory(r.copyTo ? r.copyTo : d.staging, r.bytes, MemoryKind::Host, conn.transport());
  const std::vector<char> descriptor = comm.serializeMemory(d.target);
  if (descriptor.size() > r.link->chunkBytes())
    throw Error(ErrorCode::Internal, "a memory descriptor of " + std::to_string(descriptor.size()) +
                                         " bytes does not fit a chunk of " + std::to_string(r.link->chunkBytes()));
  ChunkHeader h = controlHeader(r.call, r.bytes, kPhaseReady);
  h.controlBytes = descriptor.size();
  r.link->send(h, descriptor.data(), descriptor.size());
  d.readySent = true;
  return true;
}

namespace {

/// Takes the receiver's Ready chunk from the head of the link and registers
/// the source. False when the offer is not there yet.
bool takeOffer(Communicator& comm, SendJob& s, bool receivesToo) {
  DirectSendState& d = s.directState;
  PeerLink& link = *s.link;
  if (!link.hasChunk()) return false;
  const ChunkHeader& h = link.header();
  if (isFailureNotice(h)) throwPeerFailure(comm, link);
  if (h.phase != kPhaseReady) {
    if (receivesToo) return false;  // the peer's own chunks to this rank come first
    unexpectedChunk(comm, link, h.phase, "a direct-transfer offer");
  }
  checkControl(comm, link, h, s.call, s.bytes, "direct-transfer offer");
  const std::vector<char> descriptor(link.payload(), link.payload() + std::min<size_t>(h.controlBytes, link.chunkBytes()));
  d.target = comm.deserializeMemory(descriptor, link.peer());
  link.release();
  d.source = comm.registerMemory(const_cast<char*>(s.data), s.bytes, MemoryKind::Host, link.connection().transport());
  d.offerTaken = true;
  return true;
}

}  // namespace

bool stepDirectSend(Communicator& comm, SendJob& s, bool receivesToo, size_t pieceBytes) {
  DirectSendState& d = s.directState;
  PeerLink& link = *s.link;
  bool moved = false;
  if (!d.offerTaken) {
    if (!takeOffer(comm, s, receivesToo)) return false;
    moved = true;
  }
  // Each piece: its write, then a Done chunk saying how much has landed
  // once it arrives (the connection delivers it after the write).
  while (d.posted < s.bytes && link.canSend()) {
    const size_t n = std::min(pieceBytes, s.bytes - d.posted);
    link.connection().write(d.target, d.posted, d.source, d.posted, n);
    d.lastWrite = link.connection().posted();
    d.posted += n;
    ChunkHeader h = controlHeader(s.call, s.bytes, kPhaseDone);
    h.chunk = d.pieces++;
    h.controlBytes = d.posted;
    link.send(h, nullptr, 0);
    moved = true;
  }
  return moved;
}

bool stepDirectRecv(Communicator& comm, RecvJob& r, bool sendsDirectToo) {
  DirectRecvState& d = r.directState;
  bool moved = false;
  while (d.readySent && !d.done && r.link->hasChunk()) {
    const ChunkHeader& h = r.link->header();
    if (isFailureNotice(h)) throwPeerFailure(comm, *r.link);
    if (h.phase == kPhaseReady && sendsDirectToo) break;  // for this rank's own direct send
    if (h.phase != kPhaseDone) unexpectedChunk(comm, *r.link, h.phase, "a direct-transfer completion");
    checkControl(comm, *r.link, h, r.call, r.bytes, "direct-transfer completion");
    const size_t landed = h.controlBytes;
    if (h.chunk != d.pieces || landed <= d.landed || landed > r.bytes)
      throw Error(ErrorCode::Remote, pair(comm, *r.link) + ": direct-transfer completion " + std::to_string(h.chunk) +
                                         " says " + std::to_string(landed) + " of " + std::to_string(r.bytes) +
                                         " bytes have landed, after completion " + std::to_string(d.pieces) +
                                         " was due with " + std::to_string(d.landed) + " landed (corrupt or reordered)");
    r.link->release();
    if (d.staging) r.consume(d.landed, d.staging + d.landed, landed - d.landed);
    d.landed = landed;
    ++d.pieces;
    moved = true;
    if (landed == r.bytes) {
      d.target = RegisteredMemory();  // every write has landed: nothing more arrives here
      d.done = true;
    }
  }
  return moved;
}

bool directSendFinished(const SendJob& s) { return s.directState.posted == s.bytes; }
bool directRecvFinished(const RecvJob& r) { return r.directState.done; }

void finishDirect(std::vector<SendJob>& sends, std::vector<RecvJob>& recvs, std::chrono::milliseconds timeout,
                  bool afterError) {
  for (auto& s : sends) {
    if (!s.direct) continue;
    if (s.directState.posted > 0) {
      try {
        // The writes only (the caller may reuse its buffer once they have
        // landed): the Done chunks after them complete in the background, and
        // closing the host collectives waits for them and for the peers.
        s.link->connection().waitCompleted(s.directState.lastWrite,
                                           afterError ? std::chrono::milliseconds(1000) : timeout);
      } catch (...) {
        if (!afterError) throw;
      }
    }
    s.directState = DirectSendState();
  }
  for (auto& r : recvs)
    if (r.direct) r.directState = DirectRecvState();
}

std::string describeDirect(const SendJob& s) {
  const DirectSendState& d = s.directState;
  return " direct send to " + s.link->describePeer() + " (" +
         (!d.offerTaken ? "waiting for its offer"
                        : d.posted < s.bytes ? std::to_string(d.posted) + " of " + std::to_string(s.bytes) + " bytes posted"
                                             : "done") +
         ");";
}

std::string describeDirect(const RecvJob& r) {
  const DirectRecvState& d = r.directState;
  return " direct receive from " + r.link->describePeer() + " (" +
         (!d.readySent ? "offer not posted (no free slot)"
                       : !d.done ? std::to_string(d.landed) + " of " + std::to_string(r.bytes) + " bytes landed"
                                 : "done") +
         ");";
}

}  // namespace plugboard
