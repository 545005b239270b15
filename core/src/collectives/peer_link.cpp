#include "collectives/peer_link.hpp"

#include <algorithm>
#include <cstring>

#include "plugboard/logger.hpp"

namespace plugboard {
namespace {

/// Bootstrap / sendMemory tags of failover number f of a link are
/// kFailoverTag + 4 f + {0: request, 1: inbox descriptor, 2: resume
/// record}: Plugboard's own range (>= 2^29), above the links' tag.
constexpr int kFailoverTag = (1 << 29) + 0x1000;
int failoverTag(int failover, int what) { return kFailoverTag + 4 * failover + what; }

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
  return comm.bootstrap().poll(peer_, failoverTag(failovers_ + 1, 0));
}

void PeerLink::failover(Communicator& comm) {
  const uint64_t landed = arrived();  // whole: a chunk's signal lands after its data
  const uint64_t knownConsumed = credits();
  const int f = ++failovers_;  // both ends count their failovers alike
  const std::string failed = conn_->transport();
  comm.bootstrap().send(failed.data(), failed.size(), peer_, failoverTag(f, 0));
  const std::vector<char> asked = comm.bootstrap().recv(peer_, failoverTag(f, 0));
  if (std::string(asked.begin(), asked.end()) != failed)
    throw Error(ErrorCode::Remote, "failover with " + description_ + ": it moves the link off " +
                                       std::string(asked.begin(), asked.end()) + ", this rank off " + failed);
  conn_ = comm.failover(peer_, MemoryKind::Host);
  description_ = "rank " + std::to_string(peer_) + " (host " + comm.hostOf(peer_) + ", " + conn_->transport() + ")";
  comm.sendMemory(inboxMem_, peer_, failoverTag(f, 1));
  peerInbox_ = comm.recvMemory(peer_, failoverTag(f, 1));
  data_ = std::make_unique<Host2HostSemaphore>(comm, conn_);
  free_ = std::make_unique<Host2HostSemaphore>(comm, conn_);
  const uint64_t mine[2] = {landed, received_};
  comm.bootstrap().send(mine, sizeof(mine), peer_, failoverTag(f, 2));
  const std::vector<char> got = comm.bootstrap().recv(peer_, failoverTag(f, 2));
  uint64_t theirs[2] = {0, 0};
  if (got.size() != sizeof(theirs))
    throw Error(ErrorCode::Remote, "failover with " + description_ + ": its resume record has " +
                                       std::to_string(got.size()) + " bytes, not " + std::to_string(sizeof(theirs)));
  std::memcpy(theirs, got.data(), sizeof(theirs));
  const uint64_t peerLanded = theirs[0], peerConsumed = theirs[1];
  if (peerConsumed > peerLanded || peerLanded > sent_ || sent_ - peerLanded > slots_ || peerConsumed < knownConsumed)
    throw Error(ErrorCode::Remote, "failover with " + description_ + ": it reports " + std::to_string(peerLanded) +
                                       " of this rank's chunks landed and " + std::to_string(peerConsumed) +
                                       " consumed, but " + std::to_string(sent_) + " were sent and " +
                                       std::to_string(knownConsumed) + " known consumed");
  dataBase_ = landed;  // the peer resends from there: the new counter counts on from it
  freeBase_ = peerConsumed;
  peerCredits_ = std::max(peerCredits_, peerConsumed);
  signalled_ = returned_ = received_;  // the peer's new credit count starts at our consumed count
  std::fill(slotPostedSeq_.begin(), slotPostedSeq_.end(), 0);
  for (uint64_t k = peerLanded; k < sent_; ++k) {
    const size_t offset = (k % slots_) * stride();
    data_->writeAndSignal(peerInbox_, offset, outboxMem_, offset, slotBytes_[k % slots_]);
    slotPostedSeq_[k % slots_] = conn_->posted();
  }
  PB_LOG(Info, "COLL", "link to " << description_ << " resumed after failover: resent " << (sent_ - peerLanded)
                                  << " chunk(s), " << (landed - received_) << " landed here unconsumed");
}

void PeerLink::returnCredits() {
  if (received_ == returned_) return;
  // The peer's "free" counter must equal our consumed count: add what it lacks.
  free_->signalAdd(received_ - signalled_);
  signalled_ = received_;
  returned_ = received_;
}

}  // namespace plugboard
