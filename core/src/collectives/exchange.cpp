#include "collectives/exchange.hpp"

#include "collectives/collective_kind.hpp"
#include "collectives/failure_notice.hpp"
#include "communicator/wait.hpp"
#include "plugboard/datatype.hpp"
#include "plugboard/error.hpp"

namespace plugboard {
namespace {

size_t chunkCount(size_t bytes, size_t chunk) { return (bytes + chunk - 1) / chunk; }

bool stepSend(SendJob& s) {
  const CallSignature& call = s.call;
  bool moved = false;
  const size_t c = s.link->chunkBytes();
  while (s.nextChunk < chunkCount(s.bytes, c) && s.link->canSend()) {
    ChunkHeader h{};
    h.magic = kChunkMagic;
    h.kind = call.kind;
    h.dtype = call.dtype;
    h.op = call.op;
    h.root = call.root;
    h.opSeq = call.opSeq;
    h.count = call.count;
    h.bytes = s.bytes;
    h.chunk = s.nextChunk;
    size_t offset = s.nextChunk * c;
    s.link->send(h, s.data + offset, std::min(c, s.bytes - offset));
    ++s.nextChunk;
    moved = true;
  }
  return moved;
}

void checkHeader(Communicator& comm, const ChunkHeader& h, const RecvJob& r) {
  const CallSignature& call = r.call;
  const int peer = r.link->peer();
  std::string who = "rank " + std::to_string(comm.rank()) + " (host " + comm.hostOf(comm.rank()) + ") and rank " +
                    std::to_string(peer) + " (host " + comm.hostOf(peer) + ")";
  if (h.magic != kChunkMagic)
    throw Error(ErrorCode::Remote, who + ": corrupt collective chunk (bad magic)");
  std::string mine = describeCall(call.kind, call.dtype, call.op, call.root, call.count);
  std::string theirs = describeCall(h.kind, h.dtype, h.op, h.root, h.count);
  if (h.opSeq != call.opSeq || mine != theirs || h.bytes != r.bytes)
    throw Error(ErrorCode::Remote, who + " disagree: this rank's collective #" + std::to_string(call.opSeq) + " is " +
                                       mine + " expecting " + std::to_string(r.bytes) + " bytes from the peer; the peer's #" +
                                       std::to_string(h.opSeq) + " is " + theirs + " sending " + std::to_string(h.bytes) +
                                       " bytes (collectives must be called in the same order with matching arguments)");
  if (h.chunk != r.nextChunk)
    throw Error(ErrorCode::Internal, who + ": chunk " + std::to_string(h.chunk) + " arrived when " +
                                         std::to_string(r.nextChunk) + " was expected");
}

bool stepRecv(Communicator& comm, RecvJob& r) {
  bool moved = false;
  const size_t c = r.link->chunkBytes();
  while (r.nextChunk < chunkCount(r.bytes, c) && r.link->hasChunk()) {
    if (isFailureNotice(r.link->header())) throwPeerFailure(comm, *r.link);
    checkHeader(comm, r.link->header(), r);
    size_t offset = r.nextChunk * c;
    r.consume(offset, r.link->payload(), std::min(c, r.bytes - offset));
    r.link->release();
    ++r.nextChunk;
    moved = true;
  }
  return moved;
}

bool allDone(const std::vector<SendJob>& sends, const std::vector<RecvJob>& recvs) {
  for (const auto& s : sends)
    if (s.nextChunk < chunkCount(s.bytes, s.link->chunkBytes())) return false;
  for (const auto& r : recvs)
    if (r.nextChunk < chunkCount(r.bytes, r.link->chunkBytes())) return false;
  return true;
}

/// What is still outstanding, for the timeout message only.
std::string outstanding(const std::vector<SendJob>& sends, const std::vector<RecvJob>& recvs) {
  std::string out;
  for (const auto& s : sends)
    if (s.nextChunk < chunkCount(s.bytes, s.link->chunkBytes()))
      out += " send to " + s.link->describePeer() + " (" + std::to_string(s.nextChunk) + "/" +
             std::to_string(chunkCount(s.bytes, s.link->chunkBytes())) + " chunks);";
  for (const auto& r : recvs)
    if (r.nextChunk < chunkCount(r.bytes, r.link->chunkBytes()))
      out += " receive from " + r.link->describePeer() + " (" + std::to_string(r.nextChunk) + "/" +
             std::to_string(chunkCount(r.bytes, r.link->chunkBytes())) + " chunks);";
  return out;
}

}  // namespace

std::string describeCall(uint8_t kind, uint8_t dtype, uint8_t op, int32_t root, uint64_t count) {
  std::string s = std::string(collectiveKindName(static_cast<CollectiveKind>(kind))) + "(count " + std::to_string(count) +
                  ", " + dataTypeName(static_cast<DataType>(dtype));
  if (collectiveReduces(static_cast<CollectiveKind>(kind))) s += std::string(", ") + reduceOpName(static_cast<ReduceOp>(op));
  if (root >= 0) s += ", root " + std::to_string(root);
  return s + ")";
}

void runExchange(Communicator& comm, std::vector<SendJob>& sends, std::vector<RecvJob>& recvs,
                 const std::map<int, std::unique_ptr<PeerLink>>& links, std::chrono::milliseconds timeout) {
  const CallSignature call = !recvs.empty() ? recvs[0].call : !sends.empty() ? sends[0].call : CallSignature{};
  bool notifying = true;
  for (const auto& s : sends) notifying = notifying && s.link->notifiesWaiters();
  for (const auto& r : recvs) notifying = notifying && r.link->notifiesWaiters();
  Backoff backoff(timeout, notifying);
  for (;;) {
    backoff.arm();
    bool moved = false;
    for (auto& s : sends) moved = stepSend(s) || moved;
    for (auto& r : recvs) moved = stepRecv(comm, r) || moved;
    if (allDone(sends, recvs)) return;
    if (moved) { backoff = Backoff(timeout, notifying); continue; }
    // About to wait: hand back every credit, or a peer blocked on them
    // could be waiting for this rank while this rank waits for it.
    for (auto& r : recvs) r.link->returnCredits();
    for (auto& s : sends) s.link->returnCredits();
    // Any peer may have failed, not only those this call receives from: a
    // notice sits at the head of its link (a chunk of the peer's for a
    // later call is left there).
    for (const auto& [peer, link] : links)
      if (link->hasLandedChunk() && isFailureNotice(link->header())) throwPeerFailure(comm, *link);
    comm.checkErrors();
    if (backoff.expired())
      throw Error(ErrorCode::Timeout, "rank " + std::to_string(comm.rank()) + ": " +
                                          describeCall(call.kind, call.dtype, call.op, call.root, call.count) + " #" +
                                          std::to_string(call.opSeq) + " made no progress for " + backoff.elapsedText() +
                                          "; still waiting on:" + outstanding(sends, recvs));
    backoff.pause();
  }
}

}  // namespace plugboard
