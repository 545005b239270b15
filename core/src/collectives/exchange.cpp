#include "collectives/exchange.hpp"

#include <cstring>
#include <map>
#include <set>

#include "collectives/collective_kind.hpp"
#include "collectives/direct_transfer.hpp"
#include "collectives/failure_notice.hpp"
#include "communicator/wait.hpp"
#include "plugboard/datatype.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {
namespace {

size_t chunkCount(size_t bytes, size_t chunk) { return (bytes + chunk - 1) / chunk; }

bool stepSend(SendJob& s) {
  const CallSignature& call = s.call;
  bool moved = false;
  const size_t c = s.link->chunkBytes();
  while (s.nextChunk < chunkCount(s.bytes, c) && s.link->canSend()) {
    ChunkHeader h = stampHeader(call, s.bytes);
    h.chunk = s.nextChunk;
    size_t offset = s.nextChunk * c;
    s.link->send(h, s.data + offset, std::min(c, s.bytes - offset));
    ++s.nextChunk;
    moved = true;
  }
  return moved;
}

/// True when a chunk header is the one r expects, field by field (the
/// common case: no strings are built).
bool headerMatches(const ChunkHeader& h, const RecvJob& r) {
  const CallSignature& call = r.call;
  return h.magic == kChunkMagic && h.opSeq == call.opSeq && h.kind == call.kind && h.dtype == call.dtype &&
         h.op == call.op && h.root == call.root && h.count == call.count && h.bytes == r.bytes && h.chunk == r.nextChunk;
}

void checkHeader(Communicator& comm, const ChunkHeader& h, const RecvJob& r) {
  if (headerMatches(h, r)) return;
  // Something differs (or only a field the call's description ignores, such
  // as the op of a collective that does not reduce): compare as described.
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

/// sendsDirectToo: a Ready chunk at the head is for this rank's direct
/// send on the same link, to be left there.
bool stepRecv(Communicator& comm, RecvJob& r, bool sendsDirectToo) {
  bool moved = false;
  const size_t c = r.link->chunkBytes();
  while (r.nextChunk < chunkCount(r.bytes, c) && r.link->hasChunk()) {
    if (isFailureNotice(r.link->header())) throwPeerFailure(comm, *r.link);
    const uint32_t phase = r.link->header().phase;
    if (phase == kPhaseReady && sendsDirectToo) break;
    if (phase != kPhaseData)
      throw Error(ErrorCode::Remote, "rank " + std::to_string(comm.rank()) + " and " + r.link->describePeer() +
                                         " disagree on how a message travels: this rank waits for chunks of data but "
                                         "the peer sent a direct-transfer chunk (is host_direct_bytes the same on "
                                         "every rank?)");
    checkHeader(comm, r.link->header(), r);
    size_t offset = r.nextChunk * c;
    r.consume(offset, r.link->payload(), std::min(c, r.bytes - offset));
    ++r.nextChunk;  // before release(), which may throw returning credits: the chunk is consumed either way
    moved = true;
    r.link->release();
  }
  return moved;
}

bool sendDone(const SendJob& s) {
  return s.direct ? directSendFinished(s) : s.nextChunk >= chunkCount(s.bytes, s.link->chunkBytes());
}
bool recvDone(const RecvJob& r) {
  return r.direct ? directRecvFinished(r) : r.nextChunk >= chunkCount(r.bytes, r.link->chunkBytes());
}

bool allDone(const std::vector<SendJob>& sends, const std::vector<RecvJob>& recvs) {
  for (const auto& s : sends)
    if (!sendDone(s)) return false;
  for (const auto& r : recvs)
    if (!recvDone(r)) return false;
  return true;
}

/// How long a call waits, without progress, on a peer that has said it
/// closed its host collectives before failing: its last writes may still
/// be on their way behind the word, which travels on another socket.
constexpr std::chrono::seconds kClosedPeerGrace{1};

/// The link of an unfinished job whose peer has closed its host
/// collectives (PeerLink::peerClosing, read by landedPeerFailure), or null.
const PeerLink* closedPeerWaitedOn(const std::vector<SendJob>& sends, const std::vector<RecvJob>& recvs) {
  for (const auto& r : recvs)
    if (!recvDone(r) && r.link->peerClosing()) return r.link;
  for (const auto& s : sends)
    if (!sendDone(s) && s.link->peerClosing()) return s.link;
  return nullptr;
}

/// What is still outstanding, for the timeout message only.
std::string outstanding(const std::vector<SendJob>& sends, const std::vector<RecvJob>& recvs) {
  std::string out;
  for (const auto& s : sends)
    if (s.direct && !directSendFinished(s)) out += describeDirect(s);
  for (const auto& r : recvs)
    if (r.direct && !directRecvFinished(r)) out += describeDirect(r);
  for (const auto& s : sends)
    if (!s.direct && s.nextChunk < chunkCount(s.bytes, s.link->chunkBytes()))
      out += " send to " + s.link->describePeer() + " (" + std::to_string(s.nextChunk) + "/" +
             std::to_string(chunkCount(s.bytes, s.link->chunkBytes())) + " chunks);";
  for (const auto& r : recvs)
    if (!r.direct && r.nextChunk < chunkCount(r.bytes, r.link->chunkBytes()))
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

ChunkHeader stampHeader(const CallSignature& call, size_t bytes) {
  ChunkHeader h{};
  h.magic = kChunkMagic;
  h.kind = call.kind;
  h.dtype = call.dtype;
  h.op = call.op;
  h.root = call.root;
  h.opSeq = call.opSeq;
  h.count = call.count;
  h.bytes = bytes;
  return h;
}

ChunkConsumer copyInto(char* dst) {
  return [dst](size_t off, const char* d, size_t n) {
    if (n) std::memcpy(dst + off, d, n);
  };
}

RecvJob copyJob(PeerLink* link, size_t bytes, char* dst, const CallSignature& call) {
  RecvJob r{link, bytes, copyInto(dst), call};
  r.copyTo = dst;
  return r;
}

namespace {

/// With failover, in a wait: Error(Aborted) after an abort, and
/// Error(Remote) when a peer of the jobs asks to fail their link over (its
/// side failed while this side still looks fine); runExchange then moves
/// the link. The bootstrap is polled at most once a millisecond.
void checkFailoverRequests(Communicator& comm, std::vector<SendJob>& sends, std::vector<RecvJob>& recvs) {
  if (comm.aborted())
    throw Error(ErrorCode::Aborted, "rank " + std::to_string(comm.rank()) + ": the communicator was aborted (Communicator::abort)");
  thread_local std::chrono::steady_clock::time_point last;
  const auto now = std::chrono::steady_clock::now();
  if (now - last < std::chrono::milliseconds(1)) return;
  last = now;
  auto ask = [&](PeerLink* l) {
    if (l->failoverAsked(comm))
      throw Error(ErrorCode::Remote, "rank " + std::to_string(comm.rank()) + ": " + l->describePeer() +
                                         " asks to move their link to another transport (failover)");
  };
  for (auto& s : sends) ask(s.link);
  for (auto& r : recvs) ask(r.link);
}

/// The loop of runExchange: steps every job until all are done.
void exchangeLoop(Communicator& comm, std::vector<SendJob>& sends, std::vector<RecvJob>& recvs,
                  const std::map<int, std::unique_ptr<PeerLink>>& links, std::chrono::milliseconds timeout,
                  size_t pieceBytes, bool failover) {
  const CallSignature call = !recvs.empty() ? recvs[0].call : !sends.empty() ? sends[0].call : CallSignature{};
  bool notifying = true;
  for (const auto& s : sends) notifying = notifying && s.link->notifiesWaiters();
  for (const auto& r : recvs) notifying = notifying && r.link->notifiesWaiters();
  // Which links carry a direct send, and which a receive: needed only when
  // some send is direct (small calls allocate nothing here).
  std::set<const PeerLink*> directSendLinks, recvLinks;
  for (const auto& s : sends)
    if (s.direct) directSendLinks.insert(s.link);
  if (!directSendLinks.empty())
    for (const auto& r : recvs) recvLinks.insert(r.link);
  Backoff backoff(timeout, notifying);
  for (;;) {
    backoff.arm();
    bool moved = false;
    for (auto& r : recvs)  // offers first, so they precede this rank's own chunks on each link
      if (r.direct) moved = offerDirect(comm, r) || moved;
    for (auto& s : sends)
      moved = (s.direct ? stepDirectSend(comm, s, recvLinks.count(s.link) > 0, pieceBytes) : stepSend(s)) || moved;
    for (auto& r : recvs) {
      const bool sendsDirectToo = directSendLinks.count(r.link) > 0;
      moved = (r.direct ? stepDirectRecv(comm, r, sendsDirectToo) : stepRecv(comm, r, sendsDirectToo)) || moved;
    }
    if (allDone(sends, recvs)) return;
    if (moved) { backoff = Backoff(timeout, notifying); continue; }
    // About to wait: hand back every credit, or a peer blocked on them
    // could be waiting for this rank while this rank waits for it.
    for (auto& r : recvs) r.link->returnCredits();
    for (auto& s : sends) s.link->returnCredits();
    if (!backoff.checkDue()) {
      backoff.pause();
      continue;
    }
    // Any peer may have failed, not only those this call receives from:
    // its notice has landed on its link, maybe behind chunks it sent for
    // its next call (those are left where they are).
    if (auto failure = landedPeerFailure(comm, links, std::chrono::milliseconds(0))) throw *failure;
    if (const PeerLink* gone = closedPeerWaitedOn(sends, recvs); gone && backoff.elapsed() >= kClosedPeerGrace)
      throw Error(ErrorCode::Remote, "rank " + std::to_string(comm.rank()) + ": " +
                                         describeCall(call.kind, call.dtype, call.op, call.root, call.count) + " #" +
                                         std::to_string(call.opSeq) + ": " + gone->describePeer() +
                                         " has closed its host collectives (it left its last call) while this "
                                         "rank still waits on it; do all ranks make the same calls?");
    // With failover a failed link is this call's business only if the call
    // uses it (its progress() throws then): another pair's failure waits
    // for the call that uses it.
    if (!failover) comm.checkErrors();
    else checkFailoverRequests(comm, sends, recvs);
    if (backoff.expired())
      throw Error(ErrorCode::Timeout, "rank " + std::to_string(comm.rank()) + ": " +
                                          describeCall(call.kind, call.dtype, call.op, call.root, call.count) + " #" +
                                          std::to_string(call.opSeq) + " made no progress for " + backoff.elapsedText() +
                                          "; still waiting on:" + outstanding(sends, recvs));
    backoff.pause();
  }
}

/// Moves every link of the jobs whose connection failed, or whose peer
/// asks, onto the pair's next transport (PeerLink::beginFailover), driving
/// all of them at once until none is under way: no rank waits on one peer
/// while that peer waits on another (with two hosts of two ranks each, a
/// rank handling its pairs one at a time could wait in a cycle). False
/// when no link failed (the error is another one) or on abort.
bool failOverLinks(Communicator& comm, std::vector<SendJob>& sends, std::vector<RecvJob>& recvs, const Error& e) {
  if (e.code() == ErrorCode::Aborted || comm.aborted()) return false;
  std::map<int, PeerLink*> used;
  for (auto& s : sends) used[s.link->peer()] = s.link;
  for (auto& r : recvs) used[r.link->peer()] = r.link;
  bool any = false;
  Backoff backoff(comm.defaultTimeout());
  for (;;) {
    bool underWay = false;
    for (auto& [peer, l] : used) {
      if (!l->failingOver() && (l->connectionFailed() || l->failoverAsked(comm))) {
        PB_LOG(Warn, "COLL", "rank " << comm.rank() << ": " << e.what() << "; moving the link to "
                                     << l->describePeer() << " to another transport (failover)");
        l->beginFailover(comm);
        any = true;
      }
      if (l->failingOver() && !l->stepFailover(comm)) underWay = true;
    }
    if (!underWay) return any;
    if (comm.aborted())
      throw Error(ErrorCode::Aborted, "rank " + std::to_string(comm.rank()) +
                                          ": the communicator was aborted (Communicator::abort) during a failover");
    if (backoff.expired()) {
      std::string waiting;
      for (auto& [peer, l] : used)
        if (l->failingOver()) waiting += "\n  " + l->describePeer() + ": " + l->failoverState();
      throw Error(ErrorCode::Timeout, "rank " + std::to_string(comm.rank()) + ": failover made no progress for " +
                                          backoff.elapsedText() + "; still moving the links to:" + waiting);
    }
    backoff.pause();
  }
}

}  // namespace

void runExchange(Communicator& comm, std::vector<SendJob>& sends, std::vector<RecvJob>& recvs,
                 const std::map<int, std::unique_ptr<PeerLink>>& links, std::chrono::milliseconds timeout,
                 const DirectPolicy& direct, bool failover) {
  chooseDirect(sends, recvs, direct);
  try {
    for (;;) {
      try {
        exchangeLoop(comm, sends, recvs, links, timeout, direct.pieceBytes, failover);
        break;
      } catch (const Error& e) {
        // The jobs keep their progress: after moving the failed links the
        // loop resumes where it stopped.
        if (!failover || !failOverLinks(comm, sends, recvs, e)) throw;
      }
    }
  } catch (...) {
    finishDirect(sends, recvs, timeout, true);
    throw;
  }
  finishDirect(sends, recvs, timeout, false);
}

}  // namespace plugboard
