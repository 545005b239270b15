#include "connection.hpp"

#include <unistd.h>

#include "context.hpp"
#include "error.hpp"

namespace plugboard::faulty {

namespace {

/// A reordered operation with no successor is posted after this long, so a
/// lone operation still completes.
constexpr auto kReorderPatience = std::chrono::milliseconds(100);
constexpr size_t kScratchBytes = 4096;

const char* opName(OpKind kind) {
  switch (kind) {
    case OpKind::Write: return "write";
    case OpKind::Signal: return "signal";
    default: return "write_signal";
  }
}

}  // namespace

Connection::Connection(Context& ctx, const pb_peer_info_v1* peer, void* addr, size_t* addrLen) : ctx_(ctx) {
  const auto info = transport_cxx::PeerInfo::from(peer);
  peerRank_ = info.rank;
  peerHost_ = info.host;
  InnerTransport& in = ctx_.inner();
  in.check(in.api().setup(in.ctx(), peer, &inner_, addr, addrLen), "setup");
  ctx_.connectionOpened();
}

Connection::~Connection() {
  InnerTransport& in = ctx_.inner();
  if (inner_) in.api().free(inner_);
  if (scratch_) in.api().deregister_memory(in.ctx(), scratch_->inner);
  if (scratch_) delete[] static_cast<uint8_t*>(scratch_->ptr);
  ctx_.connectionClosed();
}

std::string Connection::describePeer() const {
  return "rank " + std::to_string(peerRank_) + " (host " + peerHost_ + ")";
}

void Connection::throwIfFailed() const { FAULTY_CHECK(failed_.empty(), PB_ERR_SYSTEM, failed_); }

bool Connection::connect(const void* peerAddr, size_t len) {
  if (!connectCounted_ && ctx_.plan().fault == Fault::FailConnect) {
    connectCounted_ = true;
    if (const uint64_t n = ctx_.strike())
      throw Error(PB_ERR_SYSTEM, ctx_.describe("the connection to " + describePeer(), n));
  }
  InnerTransport& in = ctx_.inner();
  return in.checkConnect(in.api().proxy_connect(inner_, peerAddr, len));
}

void Connection::postWrite(Region& src, size_t srcOffset, RemoteKey& dst, size_t dstOffset, size_t size) {
  Op op;
  op.kind = OpKind::Write;
  op.src = &src;
  op.srcOffset = srcOffset;
  op.dst = &dst;
  op.dstOffset = dstOffset;
  op.size = size;
  submit(op);
}

void Connection::postSignal(RemoteKey& dst, size_t dstOffset, uint64_t value) {
  Op op;
  op.kind = OpKind::Signal;
  op.signalDst = &dst;
  op.signalOffset = dstOffset;
  op.value = value;
  submit(op);
}

void Connection::postWriteSignal(Region& src, size_t srcOffset, RemoteKey& dst, size_t dstOffset, size_t size,
                                 RemoteKey& signalDst, size_t signalOffset, uint64_t value) {
  Op op;
  op.kind = OpKind::WriteSignal;
  op.src = &src;
  op.srcOffset = srcOffset;
  op.dst = &dst;
  op.dstOffset = dstOffset;
  op.size = size;
  op.signalDst = &signalDst;
  op.signalOffset = signalOffset;
  op.value = value;
  submit(op);
}

namespace {

/// Error unless [offset, offset + size) lies in a region of regionSize bytes.
void checkRange(const char* which, size_t offset, size_t size, uint64_t regionSize) {
  FAULTY_CHECK(offset <= regionSize && size <= regionSize - offset, PB_ERR_INVALID,
               std::string("faulty: ") + which + " range of " + std::to_string(size) + " bytes at offset " +
                   std::to_string(offset) + " lies outside the registered region of " + std::to_string(regionSize) +
                   " bytes");
}

}  // namespace

void Connection::checkRanges(const Op& op) {
  if (op.kind != OpKind::Signal) {
    checkRange("source", op.srcOffset, op.size, op.src->size);
    checkRange("destination", op.dstOffset, op.size, op.dst->size);
  }
  if (op.kind != OpKind::Write) {
    FAULTY_CHECK(op.signalOffset % 8 == 0, PB_ERR_INVALID,
                 "faulty: signal target offset " + std::to_string(op.signalOffset) + " is not 8-byte aligned");
    checkRange("signal target", op.signalOffset, 8, op.signalDst->size);
  }
}

void Connection::submit(Op op) {
  throwIfFailed();
  checkRanges(op);
  op.seq = seq_ + 1;
  const FaultPlan& plan = ctx_.plan();
  if (plan.onDataPath() && plan.eligible(op.kind) && (op.strike = ctx_.strike()) != 0) op.fault = plan.fault;
  const std::string what = std::string(opName(op.kind)) + " to " + describePeer();
  switch (op.fault) {
    case Fault::FailOp:
      failed_ = ctx_.describe(what, op.strike);
      throwIfFailed();
      break;
    case Fault::Exit:
      ctx_.log(PB_LOG_WARN, ctx_.describe(what, op.strike) + ": exiting with status " +
                                std::to_string(plan.exitCode));
      ::_exit(plan.exitCode);
    case Fault::Delay: op.due = Clock::now() + std::chrono::microseconds(plan.delayUs); break;
    default: break;
  }
  if (op.fault != Fault::None) ctx_.log(PB_LOG_INFO, ctx_.describe(what, op.strike));
  if (op.fault == Fault::Delay || !held_.empty()) {
    held_.push_back(op);  // behind every earlier held operation: a delay keeps the order
    seq_ = op.seq;
    return;
  }
  if (op.fault == Fault::Reorder && !reordered_) {
    reordered_ = op;
    reorderedSince_ = Clock::now();
    seq_ = op.seq;
    return;
  }
  post(op);  // an inner refusal throws here, and the operation takes no number
  seq_ = op.seq;
  overtaken_ = reordered_.has_value();  // the operation it waited for went first: post it at the next poll
}

void Connection::post(const Op& op) {
  uint64_t last = innerPosted_;
  const bool hasData = op.kind != OpKind::Signal;
  const bool hasSignal = op.kind != OpKind::Write;
  switch (op.fault) {
    case Fault::Drop: break;
    case Fault::Duplicate:
      for (int i = 0; i < 2; ++i)
        last = op.kind == OpKind::Write    ? innerWrite(*op.src, op.srcOffset, *op.dst, op.dstOffset, op.size)
               : op.kind == OpKind::Signal ? innerSignal(*op.signalDst, op.signalOffset, op.value)
                                           : innerWriteSignal(op, op.size);
      break;
    case Fault::Truncate:
    case Fault::Corrupt: {
      const size_t size = op.fault == Fault::Truncate ? op.size / 2 : op.size;
      if (hasData) last = innerWrite(*op.src, op.srcOffset, *op.dst, op.dstOffset, size);
      if (hasData && op.fault == Fault::Corrupt && op.size > 0) last = corruptByte(op);
      const uint64_t value = op.fault == Fault::Corrupt && !hasData ? op.value + 1 : op.value;
      if (hasSignal) last = innerSignal(*op.signalDst, op.signalOffset, value);
      break;
    }
    default:
      last = op.kind == OpKind::Write    ? innerWrite(*op.src, op.srcOffset, *op.dst, op.dstOffset, op.size)
             : op.kind == OpKind::Signal ? innerSignal(*op.signalDst, op.signalOffset, op.value)
                                         : innerWriteSignal(op, op.size);
  }
  posted_[op.seq] = last;
}

void Connection::releaseHeld() {
  const auto now = Clock::now();
  while (!held_.empty() && held_.front().due <= now) {
    post(held_.front());
    held_.pop_front();
  }
  if (reordered_ && (overtaken_ || now - reorderedSince_ >= kReorderPatience)) {
    post(*reordered_);
    reordered_.reset();
    overtaken_ = false;
  }
}

void Connection::progress(uint64_t* completed) {
  *completed = completed_;
  throwIfFailed();
  releaseHeld();
  InnerTransport& in = ctx_.inner();
  uint64_t innerDone = 0;
  // The inner plugin may report what completed before a failure: pass it on.
  const pb_status st = in.api().proxy_progress(inner_, &innerDone);
  for (auto it = posted_.begin(); it != posted_.end() && it->first == completed_ + 1 && it->second <= innerDone;) {
    completed_ = it->first;
    it = posted_.erase(it);
  }
  *completed = completed_;
  in.check(st, "proxy_progress");
}

void Connection::flush() {
  throwIfFailed();
  InnerTransport& in = ctx_.inner();
  in.check(in.api().flush(inner_), "flush");
}

uint64_t Connection::innerWrite(Region& src, size_t srcOffset, RemoteKey& dst, size_t dstOffset, size_t size) {
  InnerTransport& in = ctx_.inner();
  in.check(in.api().write(inner_, src.inner, srcOffset, dst.inner, dstOffset, size), "write");
  return ++innerPosted_;
}

uint64_t Connection::innerSignal(RemoteKey& dst, size_t dstOffset, uint64_t value) {
  InnerTransport& in = ctx_.inner();
  in.check(in.api().signal(inner_, dst.inner, dstOffset, value), "signal");
  return ++innerPosted_;
}

uint64_t Connection::innerWriteSignal(const Op& op, size_t size) {
  InnerTransport& in = ctx_.inner();
  if (!in.hasWriteSignal()) {
    innerWrite(*op.src, op.srcOffset, *op.dst, op.dstOffset, size);
    return innerSignal(*op.signalDst, op.signalOffset, op.value);
  }
  in.check(in.api().write_signal(inner_, op.src->inner, op.srcOffset, op.dst->inner, op.dstOffset, size,
                                 op.signalDst->inner, op.signalOffset, op.value),
           "write_signal");
  return ++innerPosted_;
}

uint64_t Connection::corruptByte(const Op& op) {
  Region& s = scratch();
  const size_t middle = op.size / 2;
  auto* bytes = static_cast<uint8_t*>(s.ptr);
  const size_t slot = scratchNext_++ % kScratchBytes;
  // The wrong byte differs from the right one where we can read it (host memory).
  const bool readable = op.src->type == PB_MEM_HOST && op.src->ptr;
  bytes[slot] = readable ? static_cast<uint8_t>(~static_cast<const uint8_t*>(op.src->ptr)[op.srcOffset + middle])
                         : uint8_t{0xA5};
  return innerWrite(s, slot, *op.dst, op.dstOffset + middle, 1);
}

Region& Connection::scratch() {
  if (scratch_) return *scratch_;
  Region r;
  r.ptr = new uint8_t[kScratchBytes]();
  r.size = kScratchBytes;
  InnerTransport& in = ctx_.inner();
  const pb_status st = in.api().register_memory(in.ctx(), r.ptr, r.size, PB_MEM_HOST, &r.inner);
  if (st != PB_OK) delete[] static_cast<uint8_t*>(r.ptr);
  in.check(st, "register_memory (corrupt's scratch bytes)");
  scratch_ = r;
  return *scratch_;
}

}  // namespace plugboard::faulty
