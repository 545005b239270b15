#include "collectives/peer_link.hpp"

#include <cstring>

namespace plugboard {

PeerLink::PeerLink(Communicator& comm, std::shared_ptr<Connection> conn, size_t chunkBytes, int slots, int tag)
    : peer_(conn->remoteRank()), chunkBytes_(chunkBytes), slots_(static_cast<uint64_t>(slots)), conn_(std::move(conn)),
      outbox_(slots_ * stride()), inbox_(slots_ * stride()), slotPostedSeq_(slots_, 0) {
  outboxMem_ = comm.registerMemory(outbox_.data(), outbox_.size());
  inboxMem_ = comm.registerMemory(inbox_.data(), inbox_.size());
  comm.sendMemory(inboxMem_, peer_, tag);
  peerInbox_ = comm.recvMemory(peer_, tag);
  data_ = std::make_unique<Host2HostSemaphore>(comm, conn_);
  free_ = std::make_unique<Host2HostSemaphore>(comm, conn_);
}

PeerLink::~PeerLink() = default;

bool PeerLink::canSend() const {
  if (sent_ - free_->inbound() >= slots_) return false;
  return conn_->completed() >= slotPostedSeq_[sent_ % slots_];
}

void PeerLink::send(const ChunkHeader& header, const void* payload, size_t len) {
  const size_t offset = (sent_ % slots_) * stride();
  std::memcpy(outbox_.data() + offset, &header, sizeof(header));
  if (len) std::memcpy(outbox_.data() + offset + sizeof(header), payload, len);
  conn_->write(peerInbox_, offset, outboxMem_, offset, sizeof(header) + len);
  data_->signal();
  slotPostedSeq_[sent_ % slots_] = conn_->posted();
  ++sent_;
}

bool PeerLink::hasChunk() const { return data_->inbound() > received_; }

const ChunkHeader& PeerLink::header() const {
  return *reinterpret_cast<const ChunkHeader*>(inbox_.data() + (received_ % slots_) * stride());
}

const char* PeerLink::payload() const {
  return inbox_.data() + (received_ % slots_) * stride() + sizeof(ChunkHeader);
}

void PeerLink::release() {
  ++received_;
  free_->signal();
}

}  // namespace plugboard
