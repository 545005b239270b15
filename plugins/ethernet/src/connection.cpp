// Set-up, posting and close of a connection. The two data-path threads are
// in datapath.cpp.
#include "connection.hpp"

#include <thread>

#include "error.hpp"

namespace plugboard::ethernet {

Connection::Connection(Context& ctx, const PeerInfo& peer, void* addr, size_t* addrLen) : ctx_(ctx), peer_(peer) {
  Settings settings = ctx.settings();
  callerSendBytes_ = settings.callerSendBytes;
  stripeSockets_ = stripesFor(settings.stripeSocketsAuto, settings.stripeSockets, std::thread::hardware_concurrency(),
                              peer.localRanks);
  stripeBytes_ = settings.stripeBytes;
  ackTimeout_ = settings.ackTimeout;
  std::string why;
  auto route = ctx.route(peer, settings, &why);
  ETH_CHECK(route, PB_ERR_INVALID, "ethernet cannot reach " + peer.describe() + ": " + why);
  net::Socket listener;
  try {
    listener = net::Socket::listenOn(route->address);
    listener.setBufferSizes(settings.socketBufferBytes);  // Inherited by the accepted socket.
    listener.setNonBlocking(true);                         // tryAccept() must never block.
  } catch (const net::NetError& e) {
    throw Error(PB_ERR_SYSTEM, "ethernet set-up with " + peer.describe() + " on interface " + route->ifname +
                                   ": " + e.what());
  }
  net::SockAddr local = listener.localAddress();
  encodeAddress(ctx.rank(), local, addr, addrLen);
  route_ = route->ifname + " " + local.str();
  handshake_ = std::make_unique<Handshake>(std::move(listener), ctx.rank(), peer, settings.socketBufferBytes,
                                           stripeSockets_, [&ctx](const std::string& text) { ctx.log(PB_LOG_WARN, text); });
  ctx_.connectionOpened();
}

Connection::~Connection() {
  close();
  ctx_.connectionClosed();
}

bool Connection::connect(const void* peerAddr, size_t peerAddrLen) {
  if (connected_) return true;
  if (!peerListen_) peerListen_ = decodeAddress(peerAddr, peerAddrLen, peer_);
  if (!handshake_->step(*peerListen_)) return false;
  startThreads(handshake_->takeOutbound(), handshake_->takeInbound());
  handshake_.reset();
  connected_ = true;
  ctx_.log(PB_LOG_INFO, "rank " + std::to_string(ctx_.rank()) + " connected to " + peer_.describe() +
                            " over " + route_ + " -> " + peerListen_->str() + " (stripe sockets: " +
                            std::to_string(sendLanes_.size()) + " out, " + std::to_string(receiveLanes_.size()) +
                            " in)");
  return true;
}

void Connection::startThreads(std::vector<net::Socket> outbound, std::vector<net::Socket> inbound) {
  for (auto* sockets : {&outbound, &inbound})
    for (auto& s : *sockets) {
      s.setNoDelay();
      s.setUserTimeout(ackTimeout_);
    }
  outbound_ = std::move(outbound[0]);
  inbound_ = std::move(inbound[0]);
  for (size_t i = 1; i < outbound.size(); ++i)
    sendLanes_.push_back(std::make_unique<SendLane>(std::move(outbound[i]), [this] { pieceSent(); }));
  // A stripe receiver that landed a piece runs the frame parser itself: the
  // write may be complete now, and nobody else would look until more bytes
  // arrive on the frame stream.
  ReceiveLane::Hooks hooks{[this] { receiveAvailable(false); },
                           [this](pb_status st, const std::string& why) { fail(st, why); }};
  for (size_t i = 1; i < inbound.size(); ++i)
    receiveLanes_.push_back(std::make_unique<ReceiveLane>(std::move(inbound[i]), uint32_t(i - 1),
                                                          uint32_t(inbound.size() - 1), ctx_.regions(),
                                                          peer_.describe(), hooks));
  lanesMade_.store(true, std::memory_order_release);
  watched_.push_back(&outbound_);
  for (const auto& lane : sendLanes_) watched_.push_back(&lane->socket());
  sender_ = std::thread(&Connection::sendLoop, this);
  receiver_ = std::thread(&Connection::receiveLoop, this);
}

void Connection::pieceSent() {
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();
}

uint64_t Connection::postWrite(const LocalRegion& src, size_t srcOffset, const RemoteRegion& dst,
                               size_t dstOffset, size_t size) {
  checkWrite(src, srcOffset, dst, dstOffset, size);
  return post(writeOp(wire::FrameType::Write, wire::FrameType::Striped, src, srcOffset, dst, dstOffset, size));
}

Connection::Op Connection::writeOp(wire::FrameType plain, wire::FrameType striped, const LocalRegion& src,
                                   size_t srcOffset, const RemoteRegion& dst, size_t dstOffset, size_t size) const {
  Op op;
  op.striped = !sendLanes_.empty() && size >= stripeBytes_;
  const auto type = uint16_t(op.striped ? striped : plain);
  op.header = {wire::kFrameMagic, type, 0, 0, dst.id, dst.key, dstOffset, size};
  op.payload = src.base + srcOffset;
  return op;
}

void Connection::checkWrite(const LocalRegion& src, size_t srcOffset, const RemoteRegion& dst, size_t dstOffset,
                            size_t size) const {
  ETH_CHECK(src.owner == &ctx_, PB_ERR_INVALID, "write: the source region belongs to another context");
  ETH_CHECK(rangeFits(srcOffset, size, src.size), PB_ERR_INVALID,
            "write: source range of " + std::to_string(size) + " bytes at offset " + std::to_string(srcOffset) +
                " lies outside the registered region of " + std::to_string(src.size) + " bytes");
  ETH_CHECK(rangeFits(dstOffset, size, dst.size), PB_ERR_INVALID,
            "write: destination range of " + std::to_string(size) + " bytes at offset " +
                std::to_string(dstOffset) + " lies outside " + peer_.describe() + "'s region of " +
                std::to_string(dst.size) + " bytes");
}

void Connection::checkSignalTarget(const RemoteRegion& dst, size_t dstOffset) const {
  ETH_CHECK(rangeFits(dstOffset, sizeof(uint64_t), dst.size), PB_ERR_INVALID,
            "signal: offset " + std::to_string(dstOffset) + " + 8 bytes lies outside " + peer_.describe() +
                "'s region of " + std::to_string(dst.size) + " bytes");
  ETH_CHECK((dst.base + dstOffset) % alignof(uint64_t) == 0, PB_ERR_INVALID,
            "signal: the target (region offset " + std::to_string(dstOffset) + ") is not 8-byte aligned");
}

uint64_t Connection::postWriteSignal(const LocalRegion& src, size_t srcOffset, const RemoteRegion& dst,
                                     size_t dstOffset, size_t size, const RemoteRegion& signalDst,
                                     size_t signalOffset, uint64_t value) {
  checkWrite(src, srcOffset, dst, dstOffset, size);
  checkSignalTarget(signalDst, signalOffset);
  Op op = writeOp(wire::FrameType::WriteSignal, wire::FrameType::StripedSignal, src, srcOffset, dst, dstOffset,
                  size);
  op.ext = {signalDst.id, signalDst.key, signalOffset, value};
  return post(op);
}

uint64_t Connection::postSignal(const RemoteRegion& dst, size_t dstOffset, uint64_t value) {
  checkSignalTarget(dst, dstOffset);
  Op op;
  op.header = {wire::kFrameMagic, uint16_t(wire::FrameType::Signal), 0, 0, dst.id, dst.key, dstOffset, value};
  return post(op);
}

uint64_t Connection::post(Op op) {
  requireConnected();
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_) throw Error(failure_->status, failure_->reason);
  ETH_CHECK(!peerClosed_, PB_ERR_REMOTE,
            peer_.describe() + " closed the ethernet connection; nothing more can be posted to it");
  op.header.seq = ++posted_;
  if (op.striped) postPieces(op);
  queue_.push_back(op);
  pushQueued();  // in order behind anything queued; partly, if the socket is full
  if (!queue_.empty() && (senderParked_ || !callerSends(queue_.front()))) cv_.notify_all();
  return op.header.seq;
}

void Connection::postPieces(const Op& op) {
  const auto count = uint32_t(sendLanes_.size());
  for (uint32_t i = 0; i < count; ++i) {
    const wire::PieceRange range = wire::stripePiece(op.header.length, i, count);
    SendLane::Piece piece{op.header, op.payload + range.offset, size_t(range.length)};
    piece.header.type = uint16_t(wire::FrameType::Piece);
    sendLanes_[i]->post(piece);
  }
}

void Connection::progress(uint64_t* completed) {
  requireConnected();
  noteWaiter();
  receiveAvailable(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
    pushQueued();
  }
  *completed = completed_.load(std::memory_order_acquire);
  if (!failed_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_) throw Error(failure_->status, failure_->reason);
}

void Connection::flush() { requireConnected(); }

void Connection::requireConnected() const {
  ETH_CHECK(connected_, PB_ERR_INVALID,
            "the ethernet connection to " + peer_.describe() + " is not connected yet (proxy_connect has not "
            "returned PB_OK)");
}

void Connection::close() noexcept {
  try {
    if (sender_.joinable()) {
      std::unique_lock<std::mutex> lock(mu_);
      closing_ = true;
      cv_.notify_all();
      cv_.wait_for(lock, kCloseGrace, [&] { return senderDone_; });
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    // Wakes a receiver blocked in recv and a sender stuck behind a peer
    // that stopped reading; both then see closing_ and exit quietly.
    outbound_.shutdownBoth();
    inbound_.shutdownBoth();
    for (auto& lane : sendLanes_) lane->stop();
    for (auto& lane : receiveLanes_) lane->stop();
    if (sender_.joinable()) sender_.join();
    if (receiver_.joinable()) receiver_.join();
  } catch (...) {
    // Nothing sensible to report from a destructor path.
  }
}

void Connection::fail(pb_status status, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_ || failure_) return;
    failure_ = Failure{status, reason};
    failed_.store(true, std::memory_order_release);
    cv_.notify_all();
  }
  ctx_.log(PB_LOG_WARN, reason);
}

}  // namespace plugboard::ethernet
