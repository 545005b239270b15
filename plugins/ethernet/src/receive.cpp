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
// nothing more is read (rx_.ended).
#include "connection.hpp"
#include "error.hpp"

namespace plugboard::ethernet {

namespace {

/// How long after a caller's last proxy_progress the receiver thread keeps
/// out of the way (sleeps instead of polling the socket): while a waiter
/// polls, it receives its own data; once it stops (it went to sleep on the
/// core's event count), the receiver thread takes over within this time.
constexpr std::chrono::microseconds kWaiterGrace{200};

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void Connection::noteWaiter() { lastWaiterNs_.store(nowNs(), std::memory_order_relaxed); }

void Connection::receiveLoop() {
  while (!rxEnded()) {
    const auto since = std::chrono::nanoseconds(nowNs() - lastWaiterNs_.load(std::memory_order_relaxed));
    if (since < kWaiterGrace) {
      std::this_thread::sleep_for(kWaiterGrace - since);
      continue;
    }
    try {
      inbound_.waitReadable(net::Deadline::never());
    } catch (const std::exception&) {
      // poll() itself failed: let the receive below report the socket's state.
    }
    receiveAvailable(false);
  }
  markDone(receiverDone_);
}

bool Connection::rxEnded() {
  std::lock_guard<std::mutex> lock(rxMu_);
  return rx_.ended;
}

bool Connection::receiveAvailable(bool tryOnly) {
  std::unique_lock<std::mutex> lock(rxMu_, std::defer_lock);
  if (tryOnly) {
    if (!lock.try_lock()) return false;
  } else {
    lock.lock();
  }
  if (rx_.ended) return false;
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
      fail(PB_ERR_SYSTEM, "ethernet connection to " + peer_.describe() + ": receive failed: " + e.what());
  } catch (const std::exception& e) {
    fail(PB_ERR_INTERNAL, "ethernet receiver for " + peer_.describe() + ": " + e.what());
  }
  rx_.ended = true;
  return true;
}

Connection::RxStep Connection::receiveStep() {
  RxState& r = rx_;
  if (r.phase == RxPhase::Payload) {
    // Pinned for this read only: deregister_memory() never waits on a stalled peer.
    auto pin = ctx_.regions().pin(r.header.region, r.header.key);
    if (!pin.get())
      badMessage("write of " + std::to_string(r.header.length) + " bytes to region " + std::to_string(r.header.region) +
                 " was cut short: the region was deregistered while its payload arrived");
    const size_t n = inbound_.recvSome(pin.get()->base + r.header.offset + r.done, r.header.length - r.done);
    if (n == 0) return RxStep::Waiting;
    r.done += n;
    if (r.done == r.header.length) finishWrite();
    return RxStep::Moved;
  }
  const size_t want = r.phase == RxPhase::Header ? wire::FrameHeader::kSize : wire::SignalExt::kSize;
  const size_t n = inbound_.recvSome(r.bytes + r.got, want - r.got);
  if (n == 0) return RxStep::Waiting;
  r.got += n;
  if (r.got < want) return RxStep::Moved;
  r.got = 0;
  if (r.phase == RxPhase::Ext) {
    r.ext = wire::SignalExt::decode(r.bytes);
    startWrite();
    return RxStep::Moved;
  }
  return headerReceived() ? RxStep::Moved : RxStep::Ended;
}

bool Connection::headerReceived() {
  RxState& r = rx_;
  r.header = wire::FrameHeader::decode(r.bytes);
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
  } else if (h.type == uint16_t(wire::FrameType::WriteSignal)) {
    r.phase = RxPhase::Ext;  // the signal's target, then the payload
  } else {
    badMessage("unknown frame type " + std::to_string(h.type));
  }
  return true;
}

void Connection::startWrite() {
  RxState& r = rx_;
  const wire::FrameHeader& h = r.header;
  auto pin = ctx_.regions().pin(h.region, h.key);
  LocalRegion* region = pin.get();
  if (!region)
    badMessage("write of " + std::to_string(h.length) + " bytes to region " + std::to_string(h.region) +
               ", which is not registered here (deregistered, or a stale key)");
  if (!rangeFits(h.offset, h.length, region->size))
    badMessage("write of " + std::to_string(h.length) + " bytes at offset " + std::to_string(h.offset) +
               " overruns region " + std::to_string(h.region) + " of " + std::to_string(region->size) + " bytes");
  r.done = 0;
  r.phase = RxPhase::Payload;
  if (h.length == 0) finishWrite();
}

void Connection::finishWrite() {
  RxState& r = rx_;
  r.phase = RxPhase::Header;
  if (r.header.type == uint16_t(wire::FrameType::WriteSignal))
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
