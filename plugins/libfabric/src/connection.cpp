// Set-up, posting, completion bookkeeping and close of a connection.
//
// Ordering (see README.md): writes are posted with FI_DELIVERY_COMPLETE, so
// a write's completion means its data is in the target's memory. A signal
// is handed to the provider only once every earlier write on the
// connection has completed, so it cannot become visible before them,
// whatever order the provider delivers operations in.
#include "connection.hpp"

#include <algorithm>

#include <rdma/fi_atomic.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "error.hpp"

namespace plugboard::libfabric {

namespace {

/// How long free() keeps progressing operations already handed to the
/// provider before it abandons them.
constexpr std::chrono::milliseconds kCloseGrace{2000};

}  // namespace

Connection::Connection(Context& ctx, const PeerInfo& peer, void* addr, size_t* addrLen) : ctx_(ctx), peer_(peer) {
  OFI_CHECK(addrLen, PB_ERR_INVALID, "libfabric setup: addr_len must not be NULL");
  std::string why = ctx.whyUnreachable(peer);
  OFI_CHECK(why.empty(), PB_ERR_UNSUPPORTED, why);
  std::lock_guard<std::mutex> lock(ctx_.mutex());
  wire::AddressBlob blob = ctx_.addressBlob(0);
  size_t room = *addrLen;
  *addrLen = blob.size();
  OFI_CHECK(addr && room >= blob.size(), PB_ERR_INVALID,
            "libfabric setup: address buffer of " + std::to_string(room) + " bytes is smaller than the " +
                std::to_string(blob.size()) + " a libfabric address needs");
  id_ = ctx_.addConnection(this);
  blob.conn = id_;
  blob.encode(static_cast<uint8_t*>(addr));
}

Connection::~Connection() {
  std::unique_lock<std::mutex> lock(ctx_.mutex());
  // Queued operations are abandoned (transport.h); those the provider has
  // may still read our memory, so give them a bounded time to finish.
  backlog_.clear();
  signals_.clear();
  for (size_t i = 0; i < laneAddrs_.size(); ++i)
    for (OpRecord* op : ctx_.lane(i).forgetConnection(id_)) {
      ctx_.dropOp(op);
      --inFabric_;
    }
  try {
    auto deadline = std::chrono::steady_clock::now() + kCloseGrace;
    while (inFabric_ > 0 && !failure_ && std::chrono::steady_clock::now() < deadline) {
      ctx_.progressLocked();
      if (inFabric_ == 0 || failure_) break;
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      lock.lock();
    }
  } catch (const std::exception& e) {
    ctx_.log(PB_LOG_WARN, "libfabric: closing the connection to " + peer_.describe() + ": " + e.what());
  }
  if (inFabric_ > 0 && !failure_)
    ctx_.log(PB_LOG_WARN, "libfabric: closing the connection to " + peer_.describe() + " with " +
                              std::to_string(inFabric_) + " operation(s) still in flight after " +
                              std::to_string(kCloseGrace.count()) + " ms");
  ctx_.removeConnection(id_);
  if (addr_ != FI_ADDR_NOTAVAIL) ctx_.removeAddress(addr_);
  for (size_t i = 0; i < laneAddrs_.size(); ++i) ctx_.lane(i).removeAddress(laneAddrs_[i]);
}

std::string Connection::link() const {
  return "rank " + std::to_string(ctx_.rank()) + " -> " + peer_.describe();
}

void Connection::requireConnected() const {
  OFI_CHECK(connected_, PB_ERR_INVALID,
            "libfabric connection " + link() + " is not connected (proxy_connect has not returned PB_OK)");
}

void Connection::throwIfFailed() const {
  if (failure_) throw Error(failure_->status, failure_->reason);
}

void Connection::fail(pb_status status, const std::string& reason) {
  if (failure_) return;
  failure_ = Failure{status, reason};
  ctx_.log(PB_LOG_WARN, reason);
}

// ---- set-up ------------------------------------------------------------------

bool Connection::connect(const void* peerAddr, size_t peerAddrLen) {
  std::lock_guard<std::mutex> lock(ctx_.mutex());
  if (connected_) return true;
  throwIfFailed();
  if (!peerBlob_) {
    auto blob = wire::AddressBlob::decode(static_cast<const uint8_t*>(peerAddr), peerAddrLen, peer_.describe());
    std::string from = "libfabric address blob from " + peer_.describe();
    OFI_CHECK(blob.rank == peer_.rank, PB_ERR_INVALID, from + " was made by rank " + std::to_string(blob.rank));
    OFI_CHECK(blob.provider == ctx_.provider().name, PB_ERR_INVALID,
              from + ": it uses provider '" + blob.provider + "', " + ctx_.describeSelf() + " uses '" +
                  ctx_.provider().name + "' (set libfabric.provider alike on every rank)");
    OFI_CHECK(blob.addrFormat == ctx_.addrFormat(), PB_ERR_INVALID,
              from + ": its endpoint address has format " + std::to_string(blob.addrFormat) + ", ours " +
                  std::to_string(ctx_.addrFormat()) + " (different address families? see libfabric.iface)");
    addr_ = ctx_.insertAddress(blob.name, peer_.describe());
    const size_t lanes = std::min(ctx_.laneCount(), blob.laneNames.size());
    for (size_t i = 0; i < lanes; ++i)
      laneAddrs_.push_back(ctx_.lane(i).insertAddress(blob.laneNames[i], peer_.describe()));
    peerBlob_ = blob;
    if (helloReceived_ && helloFromConn_ != blob.conn)
      fail(PB_ERR_REMOTE, "bad message from " + peer_.describe() + ": its hello came from connection " +
                              std::to_string(helloFromConn_) + ", its address blob names connection " +
                              std::to_string(blob.conn));
  }
  if (!helloPosted_ && !failure_) helloPosted_ = postHello();
  ctx_.progressLocked();
  throwIfFailed();
  if (!(helloSent_ && helloReceived_)) return false;
  connected_ = true;
  ctx_.log(PB_LOG_INFO, link() + " connected over libfabric " + ctx_.provider().name + " (domain " +
                            ctx_.provider().domain + "), " + std::to_string(laneAddrs_.size()) + " lane(s)");
  return true;
}

bool Connection::postHello() {
  int slot = ctx_.takeSlot();
  if (slot < 0) return false;
  wire::Message m;
  m.type = static_cast<uint16_t>(wire::MessageType::Hello);
  m.fromRank = ctx_.rank();
  m.toRank = peer_.rank;
  m.toConn = peerBlob_->conn;
  m.fromConn = id_;
  m.encode(ctx_.slot(slot));
  OpRecord* op = ctx_.newOp(OpRecord::Kind::Hello, id_, 0, slot);
  ssize_t rc = fi_send(ctx_.ep(), ctx_.slot(slot), wire::Message::kSize, ctx_.slotDesc(), addr_, &op->fiCtx);
  if (rc != 0) ctx_.dropOp(op);
  if (rc == -FI_EAGAIN) return false;
  fiCheck(rc, "libfabric hello from " + link() + ": fi_send");
  ++inFabric_;
  return true;
}

void Connection::postLaneWake(uint64_t bytes) {
  int slot = ctx_.takeSlot();
  if (slot < 0) return;
  wire::Message m = signalMessage(Pending{}, wire::MessageType::LaneWake);
  m.value = bytes;
  m.encode(ctx_.slot(slot));
  OpRecord* op = ctx_.newOp(OpRecord::Kind::Wake, id_, 0, slot);
  ssize_t rc = fi_send(ctx_.ep(), ctx_.slot(slot), wire::Message::kSize, ctx_.slotDesc(), addr_, &op->fiCtx);
  if (rc != 0) {
    ctx_.dropOp(op);  // out of room: the peer's lanes still progress every few ms
    if (rc != -FI_EAGAIN)
      fail(statusForFiError(static_cast<int>(-rc)),
           "libfabric lane wake-up " + link() + ": fi_send: " + fiErrorText(rc));
    return;
  }
  ++inFabric_;
}

void Connection::onHello(const wire::Message& m) {
  std::string bad = "bad message from " + peer_.describe() + ": ";
  if (helloReceived_) return fail(PB_ERR_REMOTE, bad + "a second hello");
  helloReceived_ = true;
  helloFromConn_ = m.fromConn;
  if (peerBlob_ && m.fromConn != peerBlob_->conn)
    fail(PB_ERR_REMOTE, bad + "its hello came from connection " + std::to_string(m.fromConn) +
                            ", its address blob names connection " + std::to_string(peerBlob_->conn));
}

// ---- posting -------------------------------------------------------------------

void Connection::checkWriteRange(const LocalRegion& src, size_t srcOffset, const RemoteRegion& dst, size_t dstOffset,
                                 size_t size) const {
  OFI_CHECK(rangeFits(srcOffset, size, src.size), PB_ERR_INVALID,
            "libfabric write: source range of " + std::to_string(size) + " bytes at offset " +
                std::to_string(srcOffset) + " lies outside the registered region of " + std::to_string(src.size) +
                " bytes");
  OFI_CHECK(rangeFits(dstOffset, size, dst.size), PB_ERR_INVALID,
            "libfabric write: destination range of " + std::to_string(size) + " bytes at offset " +
                std::to_string(dstOffset) + " lies outside " + peer_.describe() + "'s region of " +
                std::to_string(dst.size) + " bytes");
}

void Connection::checkSignalTarget(const RemoteRegion& dst, size_t dstOffset) const {
  OFI_CHECK((dst.base + dstOffset) % alignof(uint64_t) == 0, PB_ERR_INVALID,
            "libfabric signal: the target at offset " + std::to_string(dstOffset) + " is not 8-byte aligned");
  OFI_CHECK(rangeFits(dstOffset, sizeof(uint64_t), dst.size), PB_ERR_INVALID,
            "libfabric signal: the 8-byte target at offset " + std::to_string(dstOffset) + " lies outside " +
                peer_.describe() + "'s region of " + std::to_string(dst.size) + " bytes");
}

std::vector<Connection::Pending> Connection::planWrite(uint64_t seq, const LocalRegion& src, size_t srcOffset,
                                                       const RemoteRegion& dst, size_t dstOffset, size_t size) const {
  std::vector<Pending> pieces;
  if (size == 0) return pieces;  // nothing to hand the provider
  Pending w;
  w.seq = seq;
  w.source = &src;
  w.src = src.base + srcOffset;
  w.desc = src.reg.desc;
  w.remote = dst.rmaBase + dstOffset;
  w.key = dst.mrKey;
  w.left = size;
  const size_t lanes = laneAddrs_.size();
  if (lanes == 0 || size < ctx_.laneBytes() || dst.laneKeys.size() < lanes || src.lanes.size() < lanes) {
    pieces.push_back(w);
    return pieces;
  }
  // Equal pieces in whole pages; the last lanes may get less, or nothing.
  constexpr uint64_t kPage = 4096;
  const uint64_t piece = ((size + lanes - 1) / lanes + kPage - 1) / kPage * kPage;
  for (size_t i = 0; i < lanes && i * piece < size; ++i) {
    Pending p = w;
    p.lane = static_cast<int>(i);
    p.src += i * piece;
    p.remote += i * piece;
    p.left = std::min<uint64_t>(piece, size - i * piece);
    p.key = dst.laneKeys[i];
    p.desc = src.lanes[i].desc;
    pieces.push_back(p);
  }
  return pieces;
}

uint64_t Connection::fragmentsOf(const std::vector<Pending>& pieces) const {
  const uint64_t fragment = ctx_.maxFragment();
  uint64_t n = 0;
  for (const Pending& p : pieces) n += (p.left + fragment - 1) / fragment;
  return n;
}

void Connection::enqueueWrite(const std::vector<Pending>& pieces) {
  if (pieces.empty()) return;
  writeFragments_[pieces.front().seq] = fragmentsOf(pieces);
  if (pieces.front().lane >= 0) {
    uint64_t bytes = 0;
    for (const Pending& p : pieces) bytes += p.left;
    postLaneWake(bytes);
  }
  for (Pending w : pieces)
    if (!backlog_.empty() || !postFragments(w)) backlog_.push_back(w);
}

Connection::Pending Connection::signalOf(uint64_t seq, const RemoteRegion& dst, size_t dstOffset, uint64_t value) {
  Pending s;
  s.seq = seq;
  s.remote = dst.rmaBase + dstOffset;
  s.key = dst.mrKey;
  s.region = dst.region;
  s.check = dst.check;
  s.offset = dstOffset;
  s.value = value;
  return s;
}

uint64_t Connection::postWrite(const LocalRegion& src, size_t srcOffset, const RemoteRegion& dst, size_t dstOffset,
                               size_t size) {
  std::lock_guard<std::mutex> lock(ctx_.mutex());
  requireConnected();
  throwIfFailed();
  checkWriteRange(src, srcOffset, dst, dstOffset, size);
  const uint64_t seq = ++posted_;
  const auto pieces = planWrite(seq, src, srcOffset, dst, dstOffset, size);
  parts_.push_back(fragmentsOf(pieces));  // before posting: a completion may be read while posting
  if (size == 0) opPartDone(0);           // done at once
  enqueueWrite(pieces);
  throwIfFailed();
  return seq;
}

uint64_t Connection::postSignal(const RemoteRegion& dst, size_t dstOffset, uint64_t value) {
  std::lock_guard<std::mutex> lock(ctx_.mutex());
  requireConnected();
  throwIfFailed();
  checkSignalTarget(dst, dstOffset);
  const uint64_t seq = ++posted_;
  parts_.push_back(1);
  signals_.push_back(signalOf(seq, dst, dstOffset, value));
  drain();
  throwIfFailed();
  return seq;
}

uint64_t Connection::postWriteSignal(const LocalRegion& src, size_t srcOffset, const RemoteRegion& dst,
                                     size_t dstOffset, size_t size, const RemoteRegion& signalDst,
                                     size_t signalOffset, uint64_t value) {
  std::lock_guard<std::mutex> lock(ctx_.mutex());
  requireConnected();
  throwIfFailed();
  checkWriteRange(src, srcOffset, dst, dstOffset, size);
  checkSignalTarget(signalDst, signalOffset);
  const uint64_t seq = ++posted_;
  Pending s = signalOf(seq, signalDst, signalOffset, value);
  // Up to messageWriteMax into host memory on both targets: WRITE_SIGNAL
  // messages whose target stores each piece and adds (0 for all but the
  // last piece). Messages arrive in order (FI_ORDER_SAS), so the real add
  // comes after every piece: no delivery round trip.
  const bool fused = size <= ctx_.messageWriteMax() && dst.hostMemory && signalDst.hostMemory;
  if (fused) {
    const uint64_t piece = ctx_.inlineWriteMax();
    const uint64_t pieces = std::max<uint64_t>(1, (size + piece - 1) / piece);
    parts_.push_back(pieces);
    for (uint64_t i = 0; i < pieces; ++i) {
      Pending p = s;
      p.source = &src;
      p.fused = true;
      p.inlineSrc = src.base + srcOffset + i * piece;
      p.inlineLen = std::min<uint64_t>(piece, size - i * piece);
      p.writeRegion = dst.region;
      p.writeCheck = dst.check;
      p.writeOffset = dstOffset + i * piece;
      if (i + 1 < pieces) p.value = 0;
      signals_.push_back(p);
    }
  } else {  // the write by RMA, the signal once it is delivered: one sequence number for both
    const auto pieces = planWrite(seq, src, srcOffset, dst, dstOffset, size);
    parts_.push_back(fragmentsOf(pieces) + 1);
    enqueueWrite(pieces);
    signals_.push_back(s);
  }
  drain();
  throwIfFailed();
  return seq;
}

bool Connection::postFragments(Pending& w) {
  bool progressed = false;
  while (w.left > 0) {
    uint64_t len = std::min<uint64_t>(w.left, ctx_.maxFragment());
    OpRecord* op = ctx_.newOp(OpRecord::Kind::Write, id_, w.seq, -1);
    if (w.lane >= 0) {  // the lane's thread posts it
      ctx_.lane(w.lane).enqueue(LaneWrite{op, w.source, w.src, len, w.desc, laneAddrs_[w.lane], w.remote, w.key});
      ++inFabric_;
      w.src += len;
      w.remote += len;
      w.left -= len;
      continue;
    }
    iovec iov{const_cast<char*>(w.src), len};
    void* desc = w.desc;
    fi_rma_iov rma{w.remote, len, w.key};
    fi_msg_rma msg{};
    msg.msg_iov = &iov;
    msg.desc = &desc;
    msg.iov_count = 1;
    msg.addr = addr_;
    msg.rma_iov = &rma;
    msg.rma_iov_count = 1;
    msg.context = &op->fiCtx;
    // Delivery complete: the completion means the data is at the target.
    ssize_t rc = fi_writemsg(ctx_.ep(), &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
    if (rc != 0) ctx_.dropOp(op);
    if (rc == -FI_EAGAIN) {
      // The provider is out of room: completions free some; once per call.
      if (progressed) return false;
      progressed = true;
      ctx_.progressLocked();
      if (failure_) return false;
      continue;
    }
    if (rc < 0) {
      fail(statusForFiError(static_cast<int>(-rc)), "libfabric write of " + std::to_string(len) + " bytes " +
                                                        link() + " could not be posted: fi_writemsg: " +
                                                        fiErrorText(rc));
      return false;
    }
    ++inFabric_;
    w.src += len;
    w.remote += len;
    w.left -= len;
  }
  return true;
}

bool Connection::postSignalNow(const Pending& s) {
  int slot = ctx_.takeSlot();
  if (slot < 0) {
    ctx_.progressLocked();
    if (failure_ || (slot = ctx_.takeSlot()) < 0) return false;
  }
  OpRecord* op = ctx_.newOp(OpRecord::Kind::Signal, id_, s.seq, slot);
  uint8_t* buf = ctx_.slot(slot);
  ssize_t rc;
  const char* call;
  if (s.fused) {  // WRITE_SIGNAL: the payload travels with the signal
    size_t len = encodeWriteSignal(s, buf);
    rc = fi_send(ctx_.ep(), buf, len, ctx_.slotDesc(), addr_, &op->fiCtx);
    call = "fi_send";
  } else if (ctx_.signalMode() == SignalMode::Atomic) {
    std::memcpy(buf, &s.value, sizeof(s.value));  // the operand, in registered memory
    fi_ioc ioc{buf, 1};
    void* desc = ctx_.slotDesc();
    fi_rma_ioc target{s.remote, 1, s.key};
    fi_msg_atomic msg{};
    msg.msg_iov = &ioc;
    msg.desc = &desc;
    msg.iov_count = 1;
    msg.addr = addr_;
    msg.rma_iov = &target;
    msg.rma_iov_count = 1;
    msg.datatype = FI_UINT64;
    msg.op = FI_SUM;
    msg.context = &op->fiCtx;
    rc = fi_atomicmsg(ctx_.ep(), &msg, FI_COMPLETION);
    call = "fi_atomicmsg";
  } else {
    signalMessage(s, wire::MessageType::Signal).encode(buf);
    rc = fi_send(ctx_.ep(), buf, wire::Message::kSize, ctx_.slotDesc(), addr_, &op->fiCtx);
    call = "fi_send";
  }
  if (rc != 0) ctx_.dropOp(op);  // releases the slot too
  if (rc == -FI_EAGAIN) return false;
  if (rc < 0) {
    fail(statusForFiError(static_cast<int>(-rc)),
         "libfabric signal " + link() + " could not be posted: " + call + ": " + fiErrorText(rc));
    return false;
  }
  ++inFabric_;
  return true;
}

wire::Message Connection::signalMessage(const Pending& s, wire::MessageType type) const {
  wire::Message m;
  m.type = static_cast<uint16_t>(type);
  m.fromRank = ctx_.rank();
  m.toRank = peer_.rank;
  m.toConn = peerBlob_->conn;
  m.fromConn = id_;
  m.region = s.region;
  m.check = s.check;
  m.offset = s.offset;
  m.value = s.value;
  return m;
}

size_t Connection::encodeWriteSignal(const Pending& s, uint8_t* buf) const {
  signalMessage(s, wire::MessageType::WriteSignal).encode(buf);
  wire::WriteExt ext{s.writeRegion, s.writeCheck, s.writeOffset, s.inlineLen};
  ext.encode(buf + wire::Message::kSize);
  // Read at send time: the source stays the caller's until the operation completes.
  if (s.inlineLen) std::memcpy(buf + wire::Message::kSize + wire::WriteExt::kSize, s.inlineSrc, s.inlineLen);
  return wire::Message::kSize + wire::WriteExt::kSize + s.inlineLen;
}

void Connection::forgetSource(const LocalRegion* region) {
  const auto reads = [&](const Pending& p) { return p.source == region; };
  const size_t before = backlog_.size() + signals_.size();
  backlog_.erase(std::remove_if(backlog_.begin(), backlog_.end(), reads), backlog_.end());
  signals_.erase(std::remove_if(signals_.begin(), signals_.end(), reads), signals_.end());
  if (backlog_.size() + signals_.size() != before && !failure_)
    fail(PB_ERR_INVALID, "libfabric " + link() + ": a region was deregistered while " +
                             std::to_string(before - backlog_.size() - signals_.size()) +
                             " queued operation(s) still had to read it (dropped)");
}

bool Connection::writesDoneBefore(uint64_t seq) const {
  return writeFragments_.empty() || writeFragments_.begin()->first > seq;
}

void Connection::drain() {
  while (!backlog_.empty() && !failure_) {
    if (!postFragments(backlog_.front())) return;
    backlog_.pop_front();
  }
  while (!signals_.empty() && !failure_) {
    const Pending& s = signals_.front();
    if (!writesDoneBefore(s.seq) || !postSignalNow(s)) return;
    signals_.pop_front();
  }
}

// ---- completion ----------------------------------------------------------------

void Connection::opPartDone(uint64_t seq) {
  if (seq != 0) {  // 0: nothing finished, just advance past empty writes
    if (seq <= completed_ || seq - completed_ > parts_.size() || parts_[seq - completed_ - 1] == 0)
      return fail(PB_ERR_INTERNAL, "libfabric " + link() + ": completion for operation " + std::to_string(seq) +
                                       " that is not in flight (completed " + std::to_string(completed_) +
                                       ", posted " + std::to_string(posted_) + ")");
    --parts_[seq - completed_ - 1];
  }
  while (!parts_.empty() && parts_.front() == 0) {
    parts_.pop_front();
    ++completed_;
  }
}

void Connection::onComplete(const OpRecord& op) {
  --inFabric_;
  if (op.kind == OpRecord::Kind::Hello) {
    helloSent_ = true;
    return;
  }
  if (op.kind == OpRecord::Kind::Wake) return;  // a hint, no sequence number
  if (op.kind == OpRecord::Kind::Write) {  // delivered: signals after it may go
    auto it = writeFragments_.find(op.seq);
    if (it != writeFragments_.end() && --it->second == 0) writeFragments_.erase(it);
  }
  opPartDone(op.seq);
}

void Connection::onError(const OpRecord& op, pb_status status, const std::string& what) {
  --inFabric_;
  const char* kind = op.kind == OpRecord::Kind::Write    ? "write"
                     : op.kind == OpRecord::Kind::Signal ? "signal"
                     : op.kind == OpRecord::Kind::Wake   ? "lane wake-up"
                                                         : "hello";
  fail(status, std::string("libfabric ") + kind + " " + link() + " failed: " + what);
}

void Connection::progress(uint64_t* completed) {
  std::lock_guard<std::mutex> lock(ctx_.mutex());
  if (!failure_) {
    ctx_.progressLocked();
    if (connected_ && !failure_) drain();
  }
  *completed = completed_;
  throwIfFailed();
}

void Connection::postWaiting() {
  if (!connected_ || failure_) return;
  try {
    drain();
  } catch (const Error& e) {  // a queue read failing: the caller's next call reports it
    fail(e.status(), e.what());
  }
}

void Connection::flush() {
  std::lock_guard<std::mutex> lock(ctx_.mutex());
  requireConnected();
  drain();
  throwIfFailed();
}

}  // namespace plugboard::libfabric
