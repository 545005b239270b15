#include "collectives/peer_link.hpp"

#include <algorithm>
#include <cstring>

#include "collectives/bootstrap_tags.hpp"
#include "communicator/wire.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {
namespace {

/// The bootstrap tag of the one message each side sends in failover number
/// f of a link: Plugboard's own range (>= 2^29), above the links' tag.
int failoverTag(int failover) { return kFailoverTag + failover; }

}  // namespace

PeerLink::PeerLink(Communicator& comm, std::shared_ptr<Connection> conn, size_t chunkBytes, int slots, int tag)
    : peer_(conn->remoteRank()), chunkBytes_(chunkBytes), slots_(static_cast<uint64_t>(slots)), conn_(std::move(conn)),
      outbox_(slots_ * stride()), inbox_(slots_ * stride()), slotPostedSeq_(slots_, 0), slotBytes_(slots_, 0),
      description_("rank " + std::to_string(peer_) + " (host " + comm.hostOf(peer_) + ", " + conn_->transport() + ")") {
  outboxMem_ = comm.registerMemory(outbox_.data(), outbox_.size());
  inboxMem_ = comm.registerMemory(inbox_.data(), inbox_.size());
  comm.sendMemory(inboxMem_, peer_, tag);
  peerInbox_ = comm.recvMemory(peer_, tag);
  data_ = std::make_unique<Host2HostSemaphore>(comm, conn_);
  free_ = std::make_unique<Host2HostSemaphore>(comm, conn_);
}

PeerLink::~PeerLink() {
  // The outbox and the semaphores' counters may still be the source of
  // posted operations (a last chunk, a credit), and the transport ABI
  // forbids deregistering memory under an operation in flight: wait for
  // them (bounded by the connection's timeout). A failed, aborted or closed
  // connection touches no buffer any more.
  try {
    if (conn_->posted() > conn_->completed()) conn_->flush();
  } catch (const std::exception& e) {
    PB_LOG(Info, "COLL", "link to " << description_ << " closed with operations in flight: " << e.what());
  }
}

uint64_t PeerLink::credits() const { return std::max(freeBase_ + free_->inbound(), peerCredits_); }

bool PeerLink::canSend() const {
  if (sent_ - credits() >= slots_) {
    conn_->progress();  // a credit may be waiting in the transport, which can land it in this thread
    if (sent_ - credits() >= slots_) return false;
  }
  const uint64_t needed = slotPostedSeq_[sent_ % slots_];
  if (conn_->completed() >= needed) return true;
  conn_->progress();  // don't wait for the proxy thread to notice
  return conn_->completed() >= needed;
}

void PeerLink::send(const ChunkHeader& header, const void* payload, size_t len) {
  const size_t offset = (sent_ % slots_) * stride();
  ChunkHeader h = header;
  h.credits = received_;
  returned_ = received_;
  std::memcpy(outbox_.data() + offset, &h, sizeof(h));
  if (len) std::memcpy(outbox_.data() + offset + sizeof(header), payload, len);
  data_->writeAndSignal(peerInbox_, offset, outboxMem_, offset, sizeof(header) + len);
  slotPostedSeq_[sent_ % slots_] = conn_->posted();
  slotBytes_[sent_ % slots_] = sizeof(header) + len;
  ++sent_;
}

bool PeerLink::hasChunk() const {
  if (arrived() > received_) return true;
  conn_->progress();  // transports that can receive in the calling thread do it now: no hand-off
  return arrived() > received_;
}

bool PeerLink::hasLandedChunk() const { return arrived() > received_; }

uint64_t PeerLink::landedCount() const { return std::min<uint64_t>(arrived() - received_, slots_); }

const ChunkHeader& PeerLink::headerAt(uint64_t behind) const {
  return *reinterpret_cast<const ChunkHeader*>(inbox_.data() + ((received_ + behind) % slots_) * stride());
}

const char* PeerLink::payloadAt(uint64_t behind) const {
  return inbox_.data() + ((received_ + behind) % slots_) * stride() + sizeof(ChunkHeader);
}

void PeerLink::release() {
  peerCredits_ = std::max(peerCredits_, header().credits);
  ++received_;
  // A sender streaming one way gets credits back in halves, so it keeps going.
  if (received_ - returned_ >= (slots_ + 1) / 2) returnCredits();
}

char* PeerLink::staging(size_t bytes) {
  if (staging_.size() < bytes) staging_.resize(bytes);
  return staging_.data();
}

bool PeerLink::connectionFailed() const {
  try {
    conn_->progress();
    return false;
  } catch (const Error& e) {
    return e.code() != ErrorCode::Aborted;
  }
}

bool PeerLink::failoverAsked(Communicator& comm) const {
  return comm.bootstrap().poll(peer_, failoverTag(failovers_ + 1));
}

/// A failover under way: what this side sent, and the peer's message once there.
struct PeerLink::Failover {
  int number = 0;  // both ends count their failovers alike
  uint64_t landed = 0, knownConsumed = 0;
  std::unique_ptr<PendingFailover> pending;
  Host2HostSemaphore::Half data, free;
  bool heard = false;  // the peer's message arrived; what follows is from it
  std::vector<char> peerAddress, peerInbox, peerData, peerFree;
  uint64_t peerLanded = 0, peerConsumed = 0;
};

void PeerLink::beginFailover(Communicator& comm) {
  auto f = std::make_unique<Failover>();
  f->number = ++failovers_;
  f->landed = arrived();  // whole: a chunk's signal lands after its data
  f->knownConsumed = credits();
  try {
    f->pending = comm.beginFailover(*conn_, MemoryKind::Host);
  } catch (const Error&) {
    // No transport left (or failover off): the message's arrival still
    // tells the peer, whose own attempt then fails alike at once instead
    // of at its timeout.
    BlobWriter w;
    w.str(conn_->transport());
    w.str("");
    comm.bootstrap().send(w.data().data(), w.data().size(), peer_, failoverTag(f->number));
    throw;
  }
  freshInbox(comm, f->landed);
  f->data = Host2HostSemaphore::prepare(comm);
  f->free = Host2HostSemaphore::prepare(comm);
  BlobWriter w;
  auto blob = [&w](const std::vector<char>& b) { w.bytes(b.data(), b.size()); };
  w.str(f->pending->failedTransport());
  w.str(f->pending->nextTransport());
  blob(f->pending->address());
  blob(comm.serializeMemory(inboxMem_));
  blob(comm.serializeMemory(f->data.memory));
  blob(comm.serializeMemory(f->free.memory));
  w.u64(f->landed);
  w.u64(received_);
  comm.bootstrap().send(w.data().data(), w.data().size(), peer_, failoverTag(f->number));
  failover_ = std::move(f);
}

uint64_t PeerLink::arrived() const {
  const uint64_t counted = dataBase_ + data_->inbound();
  // The failed connection may still signal chunks it lands late, into the
  // retired inbox: only those landed when the failover began are here.
  return failover_ ? std::min(counted, failover_->landed) : counted;
}

void PeerLink::freshInbox(Communicator& comm, uint64_t landed) {
  // A failed connection can stay open (a GPU stager of another memory kind
  // runs on it: Communicator::startFailover) and go on landing the peer's
  // frames sent before it heard. Into the inbox the new connection refills,
  // a late chunk would be read as the newer one in its slot; into a
  // retired inbox it is never read. The slots copied here are not written
  // by late frames: the peer reuses a slot only once its chunk was consumed.
  std::vector<char> fresh(inbox_.size());
  for (uint64_t k = received_; k < landed; ++k) {
    const size_t offset = (k % slots_) * stride();
    std::memcpy(fresh.data() + offset, inbox_.data() + offset, stride());
  }
  RegisteredMemory mem = comm.registerMemory(fresh.data(), fresh.size());
  retiredInboxes_.push_back(std::move(inbox_));
  retiredInboxMems_.push_back(std::move(inboxMem_));
  inbox_ = std::move(fresh);
  inboxMem_ = std::move(mem);
}

bool PeerLink::stepFailover(Communicator& comm) {
  Failover& f = *failover_;
  if (!f.heard) {
    if (!comm.bootstrap().poll(peer_, failoverTag(f.number))) return false;
    readPeerFailover(comm.bootstrap().recv(peer_, failoverTag(f.number)));
    f.heard = true;
  }
  std::shared_ptr<Connection> conn = f.pending->step(f.peerAddress);
  if (!conn) return false;
  finishFailover(comm, std::move(conn));
  failover_.reset();
  return true;
}

void PeerLink::pollBootstrap(Communicator& comm) {
  const auto now = std::chrono::steady_clock::now();
  if (now < nextBootstrapPoll_ || !comm.bootstrap().canPoll()) return;
  nextBootstrapPoll_ = now + std::chrono::milliseconds(1);
  try {
    if (!outOfBandNotice_ && comm.bootstrap().poll(peer_, kNoticeTag))
      outOfBandNotice_ = comm.bootstrap().recv(peer_, kNoticeTag);
    if (!peerClosing_) peerClosing_ = comm.bootstrap().poll(peer_, kCloseTag);
  } catch (const std::exception& e) {
    PB_LOG(Info, "COLL", "reading the bootstrap for " << description_ << ": " << e.what());
  }
}

std::string PeerLink::failoverState() const {
  if (!failover_) return "not failing over";
  if (!failover_->heard) return "its failover message has not arrived";
  return "connecting over " + failover_->pending->nextTransport();
}

void PeerLink::readPeerFailover(const std::vector<char>& message) {
  Failover& f = *failover_;
  BlobReader r(message, description_);
  const std::string failed = r.str(), next = r.str();
  if (next.empty())  // all it sends when it found no transport left
    throw Error(ErrorCode::Remote, "failover with " + description_ + ": it has no transport left for the pair");
  f.peerAddress = r.bytes();
  f.peerInbox = r.bytes();
  f.peerData = r.bytes();
  f.peerFree = r.bytes();
  f.peerLanded = r.u64();
  f.peerConsumed = r.u64();
  if (!r.done()) throw Error(ErrorCode::Remote, "failover with " + description_ + ": its message has trailing bytes");
  if (failed != f.pending->failedTransport() || next != f.pending->nextTransport())
    throw Error(ErrorCode::Remote, "failover with " + description_ + ": it moves the link from " + failed + " to " +
                                       next + ", this rank from " + f.pending->failedTransport() + " to " +
                                       f.pending->nextTransport());
  if (f.peerConsumed > f.peerLanded || f.peerLanded > sent_ || sent_ - f.peerLanded > slots_ ||
      f.peerConsumed < f.knownConsumed)
    throw Error(ErrorCode::Remote, "failover with " + description_ + ": it reports " + std::to_string(f.peerLanded) +
                                       " of this rank's chunks landed and " + std::to_string(f.peerConsumed) +
                                       " consumed, but " + std::to_string(sent_) + " were sent and " +
                                       std::to_string(f.knownConsumed) + " known consumed");
}

void PeerLink::finishFailover(Communicator& comm, std::shared_ptr<Connection> conn) {
  Failover& f = *failover_;
  conn_ = std::move(conn);
  description_ = "rank " + std::to_string(peer_) + " (host " + comm.hostOf(peer_) + ", " + conn_->transport() + ")";
  peerInbox_ = comm.deserializeMemory(f.peerInbox, peer_);
  data_ = std::make_unique<Host2HostSemaphore>(comm, conn_, std::move(f.data), f.peerData);
  free_ = std::make_unique<Host2HostSemaphore>(comm, conn_, std::move(f.free), f.peerFree);
  dataBase_ = f.landed;  // the peer resends from there: the new counter counts on from it
  freeBase_ = f.peerConsumed;
  peerCredits_ = std::max(peerCredits_, f.peerConsumed);
  signalled_ = returned_ = received_;  // the peer's new credit count starts at our consumed count
  std::fill(slotPostedSeq_.begin(), slotPostedSeq_.end(), 0);
  for (uint64_t k = f.peerLanded; k < sent_; ++k) {
    const size_t offset = (k % slots_) * stride();
    data_->writeAndSignal(peerInbox_, offset, outboxMem_, offset, slotBytes_[k % slots_]);
    slotPostedSeq_[k % slots_] = conn_->posted();
  }
  PB_LOG(Info, "COLL", "link to " << description_ << " resumed after failover: resent " << (sent_ - f.peerLanded)
                                  << " chunk(s), " << (f.landed - received_) << " landed here unconsumed");
}

void PeerLink::returnCredits() {
  if (received_ == returned_) return;
  // The peer's "free" counter must equal our consumed count: add what it lacks.
  free_->signalAdd(received_ - signalled_);
  signalled_ = received_;
  returned_ = received_;
}

}  // namespace plugboard
