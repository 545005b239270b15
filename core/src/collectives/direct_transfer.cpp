#include "collectives/direct_transfer.hpp"

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

void chooseDirect(std::vector<SendJob>& sends, std::vector<RecvJob>& recvs, size_t directBytes) {
  if (directBytes == 0) return;
  for (auto& s : sends) s.direct = s.bytes >= directBytes && s.link->connection().registersCheaply();
  for (auto& r : recvs) r.direct = r.bytes >= directBytes && r.link->connection().registersCheaply();
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

bool stepDirectSend(Communicator& comm, SendJob& s, bool receivesToo) {
  DirectSendState& d = s.directState;
  PeerLink& link = *s.link;
  bool moved = false;
  if (!d.written) {
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
    Connection& conn = link.connection();
    d.source = comm.registerMemory(const_cast<char*>(s.data), s.bytes, MemoryKind::Host, conn.transport());
    conn.write(d.target, 0, d.source, 0, s.bytes);
    d.written = moved = true;
  }
  if (!d.doneSent && link.canSend()) {
    link.send(controlHeader(s.call, s.bytes, kPhaseDone), nullptr, 0);  // lands after the write
    d.doneSent = moved = true;
  }
  return moved;
}

bool stepDirectRecv(Communicator& comm, RecvJob& r, bool sendsDirectToo) {
  DirectRecvState& d = r.directState;
  if (!d.readySent || d.done || !r.link->hasChunk()) return false;
  const ChunkHeader& h = r.link->header();
  if (isFailureNotice(h)) throwPeerFailure(comm, *r.link);
  if (h.phase == kPhaseReady && sendsDirectToo) return false;  // for this rank's own direct send
  if (h.phase != kPhaseDone) unexpectedChunk(comm, *r.link, h.phase, "a direct-transfer completion");
  checkControl(comm, *r.link, h, r.call, r.bytes, "direct-transfer completion");
  r.link->release();
  d.target = RegisteredMemory();  // the write has landed: nothing more arrives here
  if (d.staging) r.consume(0, d.staging, r.bytes);
  d.done = true;
  return true;
}

bool directSendFinished(const SendJob& s) { return s.directState.doneSent; }
bool directRecvFinished(const RecvJob& r) { return r.directState.done; }

void finishDirect(std::vector<SendJob>& sends, std::vector<RecvJob>& recvs, std::chrono::milliseconds timeout,
                  bool afterError) {
  for (auto& s : sends) {
    if (!s.direct) continue;
    if (s.directState.written) {
      try {
        s.link->connection().flush(afterError ? std::chrono::milliseconds(1000) : timeout);
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
         (!d.written ? "waiting for its offer" : !d.doneSent ? "written, completion not posted" : "done") + ");";
}

std::string describeDirect(const RecvJob& r) {
  const DirectRecvState& d = r.directState;
  return " direct receive from " + r.link->describePeer() + " (" +
         (!d.readySent ? "offer not posted (no free slot)" : !d.done ? "offered, waiting for the write" : "done") + ");";
}

}  // namespace plugboard
