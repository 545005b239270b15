// The sending side of a connection, and the application of signals.
//
// Ordering: one sender thread (or the posting thread, inline) sends posted
// operations in posting order on one TCP stream; the peer applies frames in
// stream order (receive.cpp), receiving each write's payload straight into
// the destination before it reads the next header. So when a signal's
// atomic add (release) lands, every earlier write on the connection is
// already in memory, and a waiter that reads the counter with acquire sees
// their data.
#include <sys/uio.h>

#include "connection.hpp"
#include "error.hpp"

namespace plugboard::ethernet {

namespace {

/// How long the sender, having lost its socket, waits for the receiver to
/// learn why (a CLOSE frame or a bare end of stream) before reporting.
constexpr std::chrono::milliseconds kVerdictWait{1000};

}  // namespace

// ---- sender ----------------------------------------------------------------
//
// Whoever holds mu_ with the sender thread idle sends: post() and progress()
// push queued frames with non-blocking sends, so a polling caller moves its
// own bytes with no thread hand-off; the sender thread takes over (blocking
// sends) only when no caller polls, or a push met a socket error.

void Connection::sendLoop() {
  try {
    while (senderStep()) {
    }
    sendCloseFrame();
  } catch (const net::NetError& e) {
    bool gone = e.kind() == net::NetErrorKind::Closed;
    senderFailed(statusOf(e), e.what() + explainUnacknowledged(e, peer_.describe(), ackTimeout_), gone);
  } catch (const std::exception& e) {
    senderFailed(PB_ERR_INTERNAL, e.what(), false);
  }
  markDone(senderDone_);
}

bool Connection::senderStep() {
  std::unique_lock<std::mutex> lock(mu_);
  senderBusy_ = false;
  while (!closing_ && (queue_.empty() || (!pushError_ && callerSends(queue_.front()) && waiterActive()))) {
    if (queue_.empty()) {
      senderParked_ = true;  // post() wakes it
      cv_.wait(lock);
      senderParked_ = false;
    } else {
      cv_.wait_for(lock, kWaiterGrace);
    }
  }
  if (closing_) return false;
  if (pushError_) throw *pushError_;
  Op& op = queue_.front();  // stays valid: the queue only grows at the back meanwhile
  senderBusy_ = true;
  lock.unlock();
  outbound_.waitWritable(net::Deadline::after(std::chrono::milliseconds(1)));
  if (!sendPiece(op)) return true;
  lock.lock();
  if (op.striped && !waitForPieces(lock, op.header.seq)) return false;
  completeFront();
  return true;
}

bool Connection::waitForPieces(std::unique_lock<std::mutex>& lock, uint64_t seq) {
  // Completion is in posting order, and a striped write is complete once
  // its frame and every piece are out, so the frames behind it wait here.
  // Their receiver could not apply them earlier anyway.
  auto allSent = [&] {
    for (const auto& lane : sendLanes_)
      if (lane->sentSeq() < seq) return false;
    return true;
  };
  for (;;) {
    if (closing_) {
      queue_.pop_front();  // its frame is out: CLOSE may follow it directly
      return false;
    }
    if (allSent()) return true;
    for (const auto& lane : sendLanes_)
      if (auto failure = lane->failure()) throw net::NetError(failure->kind(), std::string("stripe socket: ") + failure->what());
    cv_.wait(lock);
  }
}

void Connection::sendCloseFrame() {
  Op* cut = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    senderBusy_ = true;  // closing_: nobody else sends from here on
    if (!queue_.empty() && queue_.front().sent > 0) cut = &queue_.front();
  }
  const net::Deadline deadline = net::Deadline::after(kCloseGrace);
  // A frame cut short would turn CLOSE into payload bytes: finish it first.
  if (cut) sendFrame(*cut, deadline);
  Op close;
  close.header = {wire::kFrameMagic, uint16_t(wire::FrameType::Close), 0, 0, 0, 0, 0, 0};
  sendFrame(close, deadline);
}

size_t Connection::frameIov(const Op& op, uint8_t* headerBuf, iovec iov[2]) const {
  // headerBuf holds the header, and for WriteSignal the SignalExt after it:
  // one contiguous prefix, then the payload straight from the registered
  // source (no staging copy, whatever the size), all in one sendmsg.
  op.header.encode(headerBuf);
  size_t prefix = wire::FrameHeader::kSize;
  const auto type = wire::FrameType(op.header.type);
  bool fused = type == wire::FrameType::WriteSignal || type == wire::FrameType::StripedSignal;
  if (fused) {
    op.ext.encode(headerBuf + prefix);
    prefix += wire::SignalExt::kSize;
  }
  bool hasPayload = (type == wire::FrameType::Write || type == wire::FrameType::WriteSignal) && op.header.length > 0;
  iov[0] = {headerBuf, prefix};
  iov[1] = {const_cast<char*>(op.payload), hasPayload ? op.header.length : 0};
  size_t skip = op.sent, first = 0;
  if (skip >= iov[0].iov_len) {
    skip -= iov[0].iov_len;
    first = 1;
  }
  iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + skip;
  iov[first].iov_len -= skip;
  if (first == 1) iov[0] = iov[1];
  return (hasPayload ? 2 : 1) - first;
}

void Connection::sendFrame(Op& op, net::Deadline deadline) {
  uint8_t header[wire::FrameHeader::kSize + wire::SignalExt::kSize];
  iovec iov[2];
  size_t n = frameIov(op, header, iov);
  outbound_.sendAllV(iov, n, deadline);
}

bool Connection::sendPiece(Op& op) {
  uint8_t header[wire::FrameHeader::kSize + wire::SignalExt::kSize];
  iovec iov[2];
  size_t n = frameIov(op, header, iov);
  size_t left = iov[0].iov_len + (n > 1 ? iov[1].iov_len : 0);
  size_t sent = outbound_.sendSomeV(iov, n);
  op.sent += sent;
  return sent == left;
}

void Connection::completeFront() {
  completed_.store(queue_.front().header.seq, std::memory_order_release);
  queue_.pop_front();
  ctx_.notifyWaiters();  // PB_CAP_SIGNAL_NOTIFY promises it for every completion
}

void Connection::pushQueued() {
  if (senderBusy_ || closing_ || pushError_) return;
  try {
    while (!queue_.empty() && callerSends(queue_.front()) && sendPiece(queue_.front())) completeFront();
  } catch (const net::NetError& e) {
    // The socket reports some errors once (ETIMEDOUT, then EPIPE): keep
    // this one for the sender thread, which reports it properly.
    pushError_ = e;
    cv_.notify_all();
  }
}

void Connection::senderFailed(pb_status status, const std::string& what, bool peerGone) {
  std::string reason;
  {
    std::unique_lock<std::mutex> lock(mu_);
    // Our send fails once the peer's socket is gone; whether it said CLOSE
    // first arrives on the other socket, so let the receiver report it.
    if (peerGone) cv_.wait_for(lock, kVerdictWait, [&] { return receiverDone_ || closing_; });
    if (closing_ || failure_) return;
    if (peerClosed_)
      reason = peer_.describe() + " closed the ethernet connection while operations were pending (" + what + ")";
    else if (peerGone)
      reason = peer_.describe() + " closed the ethernet connection unexpectedly (send: " + what + ")";
    else
      reason = "ethernet connection to " + peer_.describe() + ": send failed: " + what;
  }
  fail(status, reason);
}

void Connection::markDone(bool& flag) {
  std::lock_guard<std::mutex> lock(mu_);
  flag = true;
  cv_.notify_all();
}

}  // namespace plugboard::ethernet
