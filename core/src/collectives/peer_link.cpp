#include "collectives/peer_link.hpp"

#include <algorithm>
#include <cstring>

#include "plugboard/logger.hpp"

namespace plugboard {

PeerLink::PeerLink(Communicator& comm, std::shared_ptr<Connection> conn, size_t chunkBytes, int slots, int tag)
    : peer_(conn->remoteRank()), chunkBytes_(chunkBytes), slots_(static_cast<uint64_t>(slots)), conn_(std::move(conn)),
      outbox_(slots_ * stride()), inbox_(slots_ * stride()), slotPostedSeq_(slots_, 0),
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

uint64_t PeerLink::credits() const { return std::max(free_->inbound(), peerCredits_); }

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
  ++sent_;
}

bool PeerLink::hasChunk() const {
  if (data_->inbound() > received_) return true;
  conn_->progress();  // transports that can receive in the calling thread do it now: no hand-off
  return data_->inbound() > received_;
}

bool PeerLink::hasLandedChunk() const { return data_->inbound() > received_; }

uint64_t PeerLink::landedCount() const { return std::min<uint64_t>(data_->inbound() - received_, slots_); }

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

void PeerLink::returnCredits() {
  if (received_ == returned_) return;
  // The peer's "free" counter must equal our consumed count: add what it lacks.
  free_->signalAdd(received_ - signalled_);
  signalled_ = received_;
  returned_ = received_;
}

}  // namespace plugboard
