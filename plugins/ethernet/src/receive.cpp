// The receiving side of a connection: a resumable frame parser that
// whichever thread holds rxMu_ runs on what has arrived.
//
// Two threads take turns: the receiver thread, which sleeps in poll() until
// bytes arrive, and any caller of proxy_progress (a core thread waiting for
// a signal of this connection), which only tries the lock and never blocks.
// A waiter that progresses the connection itself sees its data without a
// thread hand-off; the receiver thread keeps the connection moving when
// nobody waits (and lands writes a deregistration waits for).
//
// Invariants: frames are applied in stream order, under rxMu_, by one thread
// at a time; a write's destination is looked up and pinned for each
// non-blocking read into it, so deregister_memory() waits at most for one
// read, and a region deregistered in the middle of a payload is never
// written again (the connection fails, naming it); after CLOSE or an error
// nothing more is read (rxEnded_).
#include <algorithm>
#include <cstring>

#include "connection.hpp"
#include "error.hpp"

namespace plugboard::ethernet {

namespace {

/// A caller of proxy_progress whose previous call (on any connection) was at
/// most kHotGap ago is polling: it receives its own data. The proxy thread
/// and waiters asleep on the core's event count call far less often.
constexpr int64_t kHotGapNs = 50 * 1000;
/// Read-ahead size: many small frames (or one frame's header and a small
/// payload) per recv.
constexpr size_t kReadAheadBytes = 16 * 1024;
/// Payload left at least this large is read straight into its destination.
constexpr size_t kDirectReadBytes = 4 * 1024;
/// A read-ahead that got less than this carried small frames: delay the
/// acknowledgements (fillReadAhead).
constexpr size_t kDelayAcksBelowBytes = 4 * 1024;
/// How often a stream of small reads says again that acknowledgements may wait.
constexpr std::chrono::milliseconds kReassertDelayedAcks{10};

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void Connection::noteWaiter() {
  thread_local int64_t lastCallNs = 0;  // this thread's previous proxy_progress
  const int64_t now = nowNs();
  if (now - lastCallNs <= kHotGapNs) lastWaiterNs_.store(now, std::memory_order_relaxed);
  lastCallNs = now;
}

bool Connection::waiterActive() const {
  return nowNs() - lastWaiterNs_.load(std::memory_order_relaxed) < int64_t(kWaiterGrace.count()) * 1000;
}

void Connection::receiveLoop() {
  // Never contends for rxMu_ with an active waiter: each contended hand-over
  // costs a futex wake-up and, with ranks on every core, a context switch.
  std::chrono::microseconds nap = kWaiterGrace;
  while (!rxEnded_.load(std::memory_order_acquire)) {
    if (waiterActive()) {
      std::this_thread::sleep_for(nap);
      pollSockets(net::Deadline::after(std::chrono::milliseconds(0)));  // the waiter receives; watch for failures
      nap = std::min(nap * 2, kLongestWaiterNap);
      continue;
    }
    nap = kWaiterGrace;
    if (pollSockets(net::Deadline::never()) && !waiterActive()) receiveAvailable(false);
  }
  markDone(receiverDone_);
}

bool Connection::pollSockets(net::Deadline deadline) {
  net::Readiness ready;
  try {
    ready = net::waitReadableOrFailed(inbound_, watched_, deadline);
  } catch (const std::exception&) {
    ready.readable = true;  // poll() itself failed: let the receive report the socket's state
  }
  if (ready.failed >= 0) reportOutboundError(size_t(ready.failed));
  return ready.readable;
}

void Connection::reportOutboundError(size_t i) {
  const net::Socket* socket = watched_[i];
  watched_.erase(watched_.begin() + static_cast<std::ptrdiff_t>(i));  // poll() would report it again at once
  std::optional<net::NetError> error;
  try {
    error = socket->takeError();
  } catch (const net::NetError& e) {
    error = e;
  }
  if (!error || error->kind() == net::NetErrorKind::Closed) return;
  const std::string where = socket == &outbound_ ? "" : "stripe socket: ";
  senderFailed(statusOf(*error),
               where + error->what() + explainUnacknowledged(*error, peer_.describe(), ackTimeout_), false);
}

bool Connection::receiveAvailable(bool tryOnly) {
  // A lane that lands a piece before the last lane exists: the receiver
  // thread, started after them all, finds the frame stream readable.
  if (!lanesMade_.load(std::memory_order_acquire)) return false;
  std::unique_lock<std::mutex> lock(rxMu_, std::defer_lock);
  if (tryOnly) {
    if (!lock.try_lock()) return false;
  } else {
    lock.lock();
  }
  if (rxEnded_.load(std::memory_order_relaxed)) return false;
  rx_.drained = false;
  bool progressed = false;
  try {
    for (;;) {
      const RxStep step = receiveStep();
      if (step == RxStep::Waiting) return progressed;
      progressed = true;
      if (step == RxStep::Ended) break;
    }
  } catch (const Error& e) {
    fail(e.status(), e.what());
  } catch (const net::NetError& e) {
    if (e.kind() == net::NetErrorKind::Closed)
      fail(PB_ERR_REMOTE, peer_.describe() + " closed the ethernet connection unexpectedly (" + e.what() + ")");
    else
      fail(statusOf(e), "ethernet connection to " + peer_.describe() + ": receive failed: " + e.what() +
                            explainUnacknowledged(e, peer_.describe(), ackTimeout_));
  } catch (const std::exception& e) {
    fail(PB_ERR_INTERNAL, "ethernet receiver for " + peer_.describe() + ": " + e.what());
  }
  rxEnded_.store(true, std::memory_order_release);
  return true;
}

Connection::RxStep Connection::receiveStep() {
  RxState& r = rx_;
  if (r.phase == RxPhase::Payload) return receivePayload();
  if (r.phase == RxPhase::Pieces) {
    if (!piecesLanded()) return RxStep::Waiting;
    finishWrite();
    return RxStep::Moved;
  }
  const size_t want = r.phase == RxPhase::Header ? wire::FrameHeader::kSize : wire::SignalExt::kSize;
  if (r.end - r.begin < want) return fillReadAhead() ? RxStep::Moved : RxStep::Waiting;
  const uint8_t* bytes = r.buf.data() + r.begin;
  r.begin += want;
  if (r.phase == RxPhase::Ext) {
    r.ext = wire::SignalExt::decode(bytes);
    if (r.header.type == uint16_t(wire::FrameType::StripedSignal))
      startStriped();
    else
      startWrite();
    return RxStep::Moved;
  }
  return headerReceived(bytes) ? RxStep::Moved : RxStep::Ended;
}

Connection::RxStep Connection::receivePayload() {
  RxState& r = rx_;
  // Pinned for this step only: deregister_memory() never waits on a stalled peer.
  auto pin = ctx_.regions().pin(r.header.region, r.header.key);
  if (!pin.get())
    throw Error(PB_ERR_INVALID, "write of " + std::to_string(r.header.length) + " bytes from " + peer_.describe() +
                                    " to region " + std::to_string(r.header.region) + " was cut short: " +
                                    kDeregisteredMidWrite);
  char* dst = pin.get()->base + r.header.offset + r.done;
  const size_t left = r.header.length - r.done;
  size_t n = std::min(left, r.end - r.begin);
  if (n > 0) {
    std::memcpy(dst, r.buf.data() + r.begin, n);
    r.begin += n;
  } else if (left >= kDirectReadBytes) {
    if (r.acksDelayed) inbound_.quickAcks();  // bulk: the sender's window needs them
    r.acksDelayed = false;
    n = inbound_.recvSome(dst, left);
  } else {
    return fillReadAhead() ? RxStep::Moved : RxStep::Waiting;
  }
  if (n == 0) return RxStep::Waiting;
  r.done += n;
  if (r.done == r.header.length) finishWrite();
  return RxStep::Moved;
}

// The kernel leaves delayed-acknowledgement mode by itself only when its
// delayed-ACK timer fires (40 ms at the least), so saying it once every
// kReassertDelayedAcks is enough: one system call per small read was a
// third of a small call's system calls.
void Connection::delayAcksNow(RxState& r) {
  const auto now = std::chrono::steady_clock::now();
  if (r.acksDelayed && now - r.acksDelayedAt < kReassertDelayedAcks) return;
  inbound_.delayAcks();
  r.acksDelayed = true;
  r.acksDelayedAt = now;
}

bool Connection::fillReadAhead() {
  RxState& r = rx_;
  // A short read emptied the socket a moment ago: another read in the same
  // pass would almost always find nothing, and each costs a system call
  // that takes the socket's lock against the sending side.
  if (r.drained) return false;
  if (r.buf.empty()) r.buf.resize(kReadAheadBytes);
  if (r.begin > 0) {  // keep the unparsed tail at the front
    std::memmove(r.buf.data(), r.buf.data() + r.begin, r.end - r.begin);
    r.end -= r.begin;
    r.begin = 0;
  }
  const size_t room = r.buf.size() - r.end;
  const size_t n = inbound_.recvSome(r.buf.data() + r.end, room);
  r.end += n;
  // This stream carries no data back to piggyback acknowledgements on: one
  // acknowledgement per small frame was half the segments of a small call
  // (2 ranks, 8 B: 6.7 -> 5.4-6.4 us). Not for bulk reads, which turn them
  // back on (receivePayload): a bulk sender needs them to keep its window open.
  if (n > 0 && n < kDelayAcksBelowBytes) delayAcksNow(r);
  r.drained = n < room;
  return n > 0;
}

bool Connection::headerReceived(const uint8_t* bytes) {
  RxState& r = rx_;
  r.header = wire::FrameHeader::decode(bytes);
  const wire::FrameHeader& h = r.header;
  if (h.magic != wire::kFrameMagic || h.reserved != 0) badMessage("frame header has a bad magic");
  if (h.type == uint16_t(wire::FrameType::Close)) {
    markDone(peerClosed_);
    ctx_.log(PB_LOG_INFO, peer_.describe() + " closed its ethernet connection to rank " + std::to_string(ctx_.rank()));
    return false;
  }
  if (h.seq != r.expectedSeq)
    badMessage("frame seq " + std::to_string(h.seq) + ", expected " + std::to_string(r.expectedSeq));
  ++r.expectedSeq;
  if (h.type == uint16_t(wire::FrameType::Write)) {
    startWrite();
  } else if (h.type == uint16_t(wire::FrameType::Signal)) {
    applySignalTo(h.region, h.key, h.offset, h.length);
  } else if (h.type == uint16_t(wire::FrameType::WriteSignal) ||
             h.type == uint16_t(wire::FrameType::StripedSignal)) {
    r.phase = RxPhase::Ext;  // the signal's target, then the payload or the pieces
  } else if (h.type == uint16_t(wire::FrameType::Striped)) {
    startStriped();
  } else {
    badMessage("unknown frame type " + std::to_string(h.type));
  }
  return true;
}

void Connection::checkDestination() {
  const wire::FrameHeader& h = rx_.header;
  auto pin = ctx_.regions().pin(h.region, h.key);
  LocalRegion* region = pin.get();
  if (!region)
    badMessage("write of " + std::to_string(h.length) + " bytes to region " + std::to_string(h.region) +
               ", which is not registered here (deregistered, or a stale key)");
  if (!rangeFits(h.offset, h.length, region->size))
    badMessage("write of " + std::to_string(h.length) + " bytes at offset " + std::to_string(h.offset) +
               " overruns region " + std::to_string(h.region) + " of " + std::to_string(region->size) + " bytes");
}

void Connection::startWrite() {
  RxState& r = rx_;
  const wire::FrameHeader& h = r.header;
  checkDestination();
  r.done = 0;
  r.phase = RxPhase::Payload;
  if (h.length == 0) finishWrite();
}

void Connection::startStriped() {
  if (receiveLanes_.empty())
    badMessage("striped write of seq " + std::to_string(rx_.header.seq) + ", but the peer opened no stripe sockets");
  checkDestination();
  rx_.phase = RxPhase::Pieces;
}

bool Connection::piecesLanded() {
  const wire::FrameHeader& h = rx_.header;
  for (size_t i = 0; i < receiveLanes_.size(); ++i) {
    ReceiveLane& lane = *receiveLanes_[i];
    // ended() before front(): a piece that landed just before the end counts.
    const bool ended = lane.ended();
    auto piece = lane.front();
    if (!piece) {
      if (ended)
        badMessage("stripe socket " + std::to_string(i + 1) + " ended before its piece of write seq " +
                   std::to_string(h.seq) + " arrived");
      return false;
    }
    if (piece->seq != h.seq || piece->region != h.region || piece->key != h.key || piece->offset != h.offset ||
        piece->length != h.length)
      badMessage("stripe socket " + std::to_string(i + 1) + " delivered a piece of write seq " +
                 std::to_string(piece->seq) + " (region " + std::to_string(piece->region) + ", offset " +
                 std::to_string(piece->offset) + ", " + std::to_string(piece->length) +
                 " bytes) where the frame stream expects write seq " + std::to_string(h.seq) + " (region " +
                 std::to_string(h.region) + ", offset " + std::to_string(h.offset) + ", " +
                 std::to_string(h.length) + " bytes)");
  }
  for (auto& lane : receiveLanes_) lane->pop();
  return true;
}

void Connection::finishWrite() {
  RxState& r = rx_;
  r.phase = RxPhase::Header;
  if (r.header.type == uint16_t(wire::FrameType::WriteSignal) ||
      r.header.type == uint16_t(wire::FrameType::StripedSignal))
    applySignalTo(r.ext.region, r.ext.key, r.ext.offset, r.ext.value);
}

void Connection::applySignalTo(uint64_t regionId, uint64_t key, uint64_t offset, uint64_t value) {
  auto pin = ctx_.regions().pin(regionId, key);
  LocalRegion* region = pin.get();
  if (!region)
    badMessage("signal to region " + std::to_string(regionId) +
               ", which is not registered here (deregistered, or a stale key)");
  if (!rangeFits(offset, sizeof(uint64_t), region->size))
    badMessage("signal at offset " + std::to_string(offset) + " overruns region " + std::to_string(regionId) +
               " of " + std::to_string(region->size) + " bytes");
  char* target = region->base + offset;
  if (reinterpret_cast<uintptr_t>(target) % alignof(uint64_t) != 0)
    badMessage("signal target at offset " + std::to_string(offset) + " is not 8-byte aligned");
  // Release: the payloads this thread received before are visible to
  // whoever acquires the new counter value.
  __atomic_fetch_add(reinterpret_cast<uint64_t*>(target), value, __ATOMIC_RELEASE);
  ctx_.notifyWaiters();
}

void Connection::badMessage(const std::string& what) const {
  throw Error(PB_ERR_REMOTE, "bad message from " + peer_.describe() + ": " + what);
}

}  // namespace plugboard::ethernet
