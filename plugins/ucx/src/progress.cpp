// Posting and completion on a connection: active messages (am.cpp) or
// puts, atomics and the flushes that order them, and retiring operations
// in posting order; the progress thread. Every function here except the
// public entry points runs with the worker lock held.
//
// RMA ordering (README "Ordering"): a signal's atomic must not overtake any
// earlier put on this connection at the peer. UCP does not order a put and
// an atomic by itself (they may use different lanes), so either
//  - Ordering::Flush: the atomic is held back until an ep flush posted
//    after those puts completed. UCP defines flush completion as every
//    earlier operation on the endpoint being complete at the target, so
//    the atomic is posted only after the data is in the peer's memory; or
//  - Ordering::Fence: ucp_worker_fence() between the puts and the atomic,
//    UCP's documented ordering call.
#include <sys/epoll.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "connection.hpp"
#include "error.hpp"
#include "wire.hpp"

namespace plugboard::ucx {

namespace {

/// A thread that calls proxy_progress again within this time is polling
/// (a waiting caller); the core's proxy thread looking in every 500 us is not.
constexpr std::chrono::microseconds kPollGap{50};
/// For this long after a polling call the progress thread leaves the
/// worker to the poller (README "Progress"), sleeping this long at a time:
/// a caller between two steps of a collective (reducing a chunk) is not
/// robbed of its core, and an idle rank is served again within it.
constexpr std::chrono::microseconds kPollerGrace{500};

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// ---- checks ----------------------------------------------------------------

bool Connection::peerClosed() const {
  return __atomic_load_n(control_.word, __ATOMIC_ACQUIRE) == wire::kCloseMarker;
}

void Connection::throwIfFailed() const {
  if (failure_) throw Error(failure_->status, failure_->reason);
}

void Connection::requirePostable() const {
  PB_UCX_CHECK(connected_, PB_ERR_INVALID,
               "the ucx connection to " + peer_.describe() +
                   " is not connected yet (proxy_connect has not returned PB_OK)");
  throwIfFailed();
  PB_UCX_CHECK(!peerClosed(), PB_ERR_REMOTE,
               peer_.describe() + " closed the ucx connection; nothing more can be posted to it");
}

void Connection::checkWriteRanges(const LocalRegion& src, size_t srcOffset, const RemoteKey& dst, size_t dstOffset,
                                  size_t size) const {
  PB_UCX_CHECK(src.owner == &ctx_, PB_ERR_INVALID, "write: the source region belongs to another context");
  PB_UCX_CHECK(dst.conn == this, PB_ERR_INVALID, "write: the destination key was imported on another connection");
  PB_UCX_CHECK(rangeFits(srcOffset, size, src.size), PB_ERR_INVALID,
               "write: source range of " + std::to_string(size) + " bytes at offset " + std::to_string(srcOffset) +
                   " lies outside the registered region of " + std::to_string(src.size) + " bytes");
  PB_UCX_CHECK(rangeFits(dstOffset, size, dst.size), PB_ERR_INVALID,
               "write: destination range of " + std::to_string(size) + " bytes at offset " +
                   std::to_string(dstOffset) + " lies outside " + peer_.describe() + "'s region of " +
                   std::to_string(dst.size) + " bytes");
}

void Connection::checkSignalTarget(const RemoteKey& dst, size_t dstOffset) const {
  PB_UCX_CHECK(dst.conn == this, PB_ERR_INVALID, "signal: the target key was imported on another connection");
  PB_UCX_CHECK(rangeFits(dstOffset, sizeof(uint64_t), dst.size), PB_ERR_INVALID,
               "signal: offset " + std::to_string(dstOffset) + " + 8 bytes lies outside " + peer_.describe() +
                   "'s region of " + std::to_string(dst.size) + " bytes");
  PB_UCX_CHECK((dst.base + dstOffset) % alignof(uint64_t) == 0, PB_ERR_INVALID,
               "signal: the target (region offset " + std::to_string(dstOffset) + ") is not 8-byte aligned");
}

void Connection::fail(pb_status status, const std::string& reason) {
  if (failure_) return;
  failure_ = Failure{status, reason};
  ctx_.log(PB_LOG_WARN, reason);
}

// ---- posting -----------------------------------------------------------------

Connection::Op& Connection::newOp() {
  ops_.emplace_back();
  Op& op = ops_.back();
  op.seq = ++posted_;
  return op;
}

void Connection::issuePut(Op& op, const LocalRegion& src, size_t srcOffset, const RemoteKey& dst, size_t dstOffset,
                          size_t size) {
  if (size == 0) return;  // nothing to move or to order
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
  params.memh = src.memh;  // registered already: spares UCX a registration-cache lookup
  ucs_status_ptr_t req = ucp_put_nbx(ep_, src.base + srcOffset, size, dst.base + dstOffset, dst.rkey->get(), &params);
  if (UCS_PTR_IS_ERR(req)) {
    fail(PB_ERR_REMOTE, ucsText("ucx write of " + std::to_string(size) + " bytes to " + peer_.describe() + " failed",
                                UCS_PTR_STATUS(req)));
    throwIfFailed();
  }
  op.putReq = req;  // null: already complete
  op.putRkey = dst.rkey;
  lastWrite_ = op.seq;
}

void Connection::issueAtomic(Op& op) {
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  params.datatype = ucp_dt_make_contig(sizeof(uint64_t));
  ucs_status_ptr_t req =
      ucp_atomic_op_nbx(ep_, UCP_ATOMIC_OP_ADD, &op.value, 1, op.signalAddr, op.signalRkey->get(), &params);
  if (UCS_PTR_IS_ERR(req)) {
    fail(PB_ERR_REMOTE, ucsText("ucx signal to " + peer_.describe() + " failed", UCS_PTR_STATUS(req)));
    throwIfFailed();
  }
  op.amoReq = req;
}

void Connection::scheduleSignal(Op& op, const RemoteKey& dst, size_t dstOffset, uint64_t value) {
  op.value = value;
  op.signalAddr = dst.base + dstOffset;
  op.signalRkey = dst.rkey;
  if (ctx_.settings().ordering == Ordering::Fence) {
    if (lastWrite_ > fencedThrough_) {
      ucs_status_t st = ucp_worker_fence(ctx_.worker());
      if (st != UCS_OK) {
        fail(PB_ERR_SYSTEM, ucsText("ucx signal to " + peer_.describe() + ": ucp_worker_fence failed", st));
        throwIfFailed();
      }
      fencedThrough_ = lastWrite_;
    }
    issueAtomic(op);
    return;
  }
  op.signalPending = true;
  op.needFlushed = lastWrite_;
  pendingSignals_.push_back(&op);
  advanceSignals();  // posts it at once when nothing needs flushing, else starts the flush now
}

void Connection::postWrite(const LocalRegion& src, size_t srcOffset, const RemoteKey& dst, size_t dstOffset,
                           size_t size) {
  checkWriteRanges(src, srcOffset, dst, dstOffset, size);
  std::lock_guard<std::mutex> lock(ctx_.workerMutex());
  requirePostable();
  if (ctx_.activeMessages()) {
    wire::AmHeader h;
    if (size) describeWrite(h, dst, dstOffset, size);
    Op& op = newOp();
    if (usableLanes_ > 0 && size >= ctx_.laneBytes())
      sendLaneWrite(op, h, src, srcOffset, size);
    else if (size)
      sendAm(op, h, &src, srcOffset, size);  // an empty write moves and orders nothing
  } else {
    issuePut(newOp(), src, srcOffset, dst, dstOffset, size);
  }
  retire();
}

void Connection::postSignal(const RemoteKey& dst, size_t dstOffset, uint64_t value) {
  checkSignalTarget(dst, dstOffset);
  std::lock_guard<std::mutex> lock(ctx_.workerMutex());
  requirePostable();
  if (ctx_.activeMessages()) {
    wire::AmHeader h;
    describeSignal(h, dst, dstOffset, value);
    sendAm(newOp(), h, nullptr, 0, 0);
  } else {
    scheduleSignal(newOp(), dst, dstOffset, value);
  }
  retire();
}

void Connection::postWriteSignal(const LocalRegion& src, size_t srcOffset, const RemoteKey& dst, size_t dstOffset,
                                 size_t size, const RemoteKey& signalDst, size_t signalOffset, uint64_t value) {
  checkWriteRanges(src, srcOffset, dst, dstOffset, size);
  checkSignalTarget(signalDst, signalOffset);
  std::lock_guard<std::mutex> lock(ctx_.workerMutex());
  requirePostable();
  if (ctx_.activeMessages()) {
    wire::AmHeader h;
    if (size) describeWrite(h, dst, dstOffset, size);
    describeSignal(h, signalDst, signalOffset, value);
    if (usableLanes_ > 0 && size >= ctx_.laneBytes())
      sendLaneWrite(newOp(), h, src, srcOffset, size);
    else
      sendAm(newOp(), h, &src, srcOffset, size);
  } else {
    Op& op = newOp();
    issuePut(op, src, srcOffset, dst, dstOffset, size);
    scheduleSignal(op, signalDst, signalOffset, value);
  }
  retire();
}

// ---- completion ----------------------------------------------------------------

void Connection::startFlush() {
  ucp_request_param_t none{};
  ucs_status_ptr_t req = ucp_ep_flush_nbx(ep_, &none);
  if (UCS_PTR_IS_ERR(req)) {
    fail(PB_ERR_REMOTE,
         ucsText("ucx flush before a signal to " + peer_.describe() + " failed", UCS_PTR_STATUS(req)));
    return;
  }
  if (req) {
    flushReq_ = req;
    flushCovers_ = lastWrite_;
  } else {
    flushedThrough_ = lastWrite_;
  }
}

void Connection::advanceSignals() {
  while (!failure_) {
    if (flushReq_) {
      ucs_status_t st = ucp_request_check_status(flushReq_);
      if (st == UCS_INPROGRESS) return;
      ucp_request_free(flushReq_);
      flushReq_ = nullptr;
      if (st != UCS_OK) {
        fail(PB_ERR_REMOTE, ucsText("ucx flush before a signal to " + peer_.describe() + " failed", st));
        return;
      }
      flushedThrough_ = flushCovers_;
    }
    if (pendingSignals_.empty()) return;
    Op& op = *pendingSignals_.front();
    if (op.needFlushed > flushedThrough_) {
      startFlush();
      if (flushReq_ || failure_) return;  // else it completed at once: go round again
      continue;
    }
    pendingSignals_.pop_front();
    op.signalPending = false;
    issueAtomic(op);
  }
}

bool Connection::requestDone(void*& req, const Op& op, const char* what) {
  if (!req) return true;
  ucs_status_t st = ucp_request_check_status(req);
  if (st == UCS_INPROGRESS) return false;
  ucp_request_free(req);
  req = nullptr;
  if (st == UCS_OK) return true;
  std::string closed = peerClosed() ? " (it had closed the connection)" : "";
  fail(PB_ERR_REMOTE, ucsText(std::string("ucx ") + what + " #" + std::to_string(op.seq) + " to " + peer_.describe() +
                                  closed + " failed",
                              st));
  return false;
}

void Connection::retire() {
  while (!ops_.empty() && !failure_) {
    Op& op = ops_.front();
    if (op.signalPending || op.lanePieces) return;
    if (!requestDone(op.putReq, op, "write") || !requestDone(op.amoReq, op, "signal") ||
        !requestDone(op.amReq, op, "message"))
      return;
    completed_ = op.seq;
    ops_.pop_front();
  }
}

void Connection::pump() {
  advanceSignals();
  retire();
  // A peer that closed cleanly resets the endpoint too; only a reset
  // without its close marker is a failure (anything it cut short fails
  // on its own above).
  if (epStatus_ != UCS_OK && !peerClosed())
    fail(PB_ERR_REMOTE, ucsText("the ucx connection to " + peer_.describe() + " failed (peer process gone?)",
                                epStatus_));
}

void Connection::pumpLocked() {
  if (!ep_ || !connected_) return;
  try {
    pump();
  } catch (...) {
    // Recorded in failure_ already (or out of memory while wording it):
    // progress() reports it on the core's thread.
  }
}

void Context::progressLoop() {
  // Wakes at least this often even without events, so a missed wake-up
  // costs latency, never a hang.
  constexpr int kMaxSleepMs = 100;
  // Where UCX cannot arm its interfaces: poll this often instead of spinning.
  constexpr int kPollSleepMs = 1;
  bool armFailedLogged = false;
  while (!stopping_) {
    if (callerPolling()) {  // it progresses the worker itself: stay off the lock
      std::this_thread::sleep_for(kPollerGrace);
      continue;
    }
    unsigned events = 0;
    ucs_status_t arm = UCS_ERR_BUSY;
    {
      // Whoever holds the lock is posting or progressing: let it.
      std::unique_lock<std::mutex> lock(workerMu_, std::try_to_lock);
      if (!lock) {
        std::this_thread::sleep_for(kPollerGrace);
        continue;
      }
      events = progressLocked();
      for (Connection* conn : attached_) conn->pumpLocked();
      // Arm only once nothing is pending: UCS_ERR_BUSY means progress again.
      if (events == 0) arm = ucp_worker_arm(worker_);
    }
    if (events) notifyLanded();  // the host promises not to throw across the C ABI
    if (arm == UCS_ERR_BUSY) continue;
    if (arm != UCS_OK && !armFailedLogged) {
      armFailedLogged = true;
      try {
        log(PB_LOG_WARN, ucsText("ucp_worker_arm failed; the progress thread polls every " +
                                     std::to_string(kPollSleepMs) + " ms instead",
                                 arm));
      } catch (...) {
      }
    }
    epoll_event ready[2];
    epoll_wait(epollFd_, ready, 2, arm == UCS_OK ? kMaxSleepMs : kPollSleepMs);
  }
}

void Context::notePolled() {
  // Only a thread calling again within kPollGap polls.
  thread_local int64_t lastCall = 0;
  const int64_t now = nowNs();
  if (now - lastCall < int64_t(kPollGap.count()) * 1000) lastPollNs_.store(now, std::memory_order_relaxed);
  lastCall = now;
}

bool Context::callerPolling() const {
  return nowNs() - lastPollNs_.load(std::memory_order_relaxed) < int64_t(kPollerGrace.count()) * 1000;
}

void Connection::progress(uint64_t* completed) {
  ctx_.notePolled();
  unsigned events = 0;
  {
    std::lock_guard<std::mutex> lock(ctx_.workerMutex());
    PB_UCX_CHECK(connected_, PB_ERR_INVALID,
                 "the ucx connection to " + peer_.describe() +
                     " is not connected yet (proxy_connect has not returned PB_OK)");
    events = ctx_.progressLocked();
    pump();
    *completed = completed_;
  }
  // Incoming puts and atomics land inside worker progress: a waiter on
  // another thread may now find what it waits for.
  if (events) ctx_.notifyLanded();
  std::lock_guard<std::mutex> lock(ctx_.workerMutex());
  throwIfFailed();
}

void Connection::flush() {
  std::lock_guard<std::mutex> lock(ctx_.workerMutex());
  PB_UCX_CHECK(connected_, PB_ERR_INVALID,
               "the ucx connection to " + peer_.describe() +
                   " is not connected yet (proxy_connect has not returned PB_OK)");
  ctx_.progressLocked();
  pump();
  throwIfFailed();
}

}  // namespace plugboard::ucx
