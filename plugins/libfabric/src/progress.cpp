// The completion queue: every connection's completions and errors, and
// the control messages peers send (hellos, signals applied here).
#include <rdma/fi_errno.h>

#include <cstring>

#include "connection.hpp"
#include "context.hpp"
#include "error.hpp"

namespace plugboard::libfabric {

namespace {

/// Completions read per fi_cq_read, and batches per progress call (so one
/// call cannot spin forever under a flood).
constexpr size_t kBatch = 32;
constexpr int kMaxBatches = 16;

}  // namespace

void Context::progressLocked() {
  fi_cq_msg_entry entries[kBatch];
  for (int batch = 0; batch < kMaxBatches; ++batch) {
    ssize_t n = fi_cq_read(endpoint_.cq.get(), entries, kBatch);
    if (n == -FI_EAGAIN) break;
    if (n == -FI_EAVAIL) {
      completeWithError();
      continue;
    }
    fiCheck(n, "libfabric provider " + choice_.name + ": reading the completion queue (fi_cq_read)");
    for (ssize_t i = 0; i < n; ++i) complete(entries[i]);
    if (static_cast<size_t>(n) < kBatch) break;
  }
  repostReceives();
}

void Context::complete(const fi_cq_msg_entry& entry) {
  // op_context is &OpRecord::fiCtx, the record's first member.
  auto* op = static_cast<OpRecord*>(entry.op_context);
  if (!op) return;
  if (op->kind == OpRecord::Kind::Recv) {
    size_t i = static_cast<size_t>(op->slot);
    handleMessage(i, entry.len);
    if (!postReceive(i)) unpostedReceives_.push_back(i);
    return;
  }
  // A connection already freed no longer cares.
  if (Connection* c = findConnection(op->conn)) c->onComplete(*op);
  dropOp(op);
}

void Context::completeWithError() {
  fi_cq_err_entry err{};
  ssize_t rc = fi_cq_readerr(endpoint_.cq.get(), &err, 0);
  if (rc == -FI_EAGAIN) return;
  fiCheck(rc, "libfabric provider " + choice_.name + ": reading a completion error (fi_cq_readerr)");
  char buf[256] = "";
  const char* detail = fi_cq_strerror(endpoint_.cq.get(), err.prov_errno, err.err_data, buf, sizeof(buf));
  std::string text = fi_strerror(err.err);
  if (detail && *detail) text += std::string(" (provider ") + choice_.name + ": " + detail + ")";
  auto* op = static_cast<OpRecord*>(err.op_context);
  if (!op) {
    log(PB_LOG_WARN, "libfabric: completion error with no operation: " + text);
    return;
  }
  if (op->kind == OpRecord::Kind::Recv) {
    if (err.err == FI_ECANCELED) return;  // the endpoint is closing
    log(PB_LOG_WARN, "libfabric: a receive for control messages failed: " + text);
    size_t i = static_cast<size_t>(op->slot);
    if (!postReceive(i)) unpostedReceives_.push_back(i);
    return;
  }
  if (err.err == FI_ECANCELED)
    text += "; the provider dropped the operation with its connection to the peer (the peer closed or died, "
            "or refused the access, e.g. to a deregistered region)";
  if (Connection* c = findConnection(op->conn)) c->onError(*op, statusForFiError(err.err), text);
  dropOp(op);
}

void Context::handleMessage(size_t i, size_t len) {
  const uint8_t* bytes = recvBytes_.data() + i * wire::kMessageBytes;
  if (len < wire::Message::kSize || len > wire::kMessageBytes) {
    log(PB_LOG_WARN, "libfabric: dropped a control message of " + std::to_string(len) + " bytes (expected " +
                         std::to_string(wire::Message::kSize) + " to " + std::to_string(wire::kMessageBytes) + ")");
    return;
  }
  auto m = wire::Message::decode(bytes);
  if (m.magic != wire::kMessageMagic || m.version != wire::kVersion) {
    log(PB_LOG_WARN, "libfabric: dropped a control message with a bad magic or version (claims rank " +
                         std::to_string(m.fromRank) + ")");
    return;
  }
  Connection* c = findConnection(m.toConn);
  if (!c) {
    log(PB_LOG_TRACE, "libfabric: dropped a message from rank " + std::to_string(m.fromRank) + " for connection " +
                          std::to_string(m.toConn) + ", which is closed");
    return;
  }
  std::string bad = "bad message from " + c->peer().describe() + ": ";
  if (m.fromRank != c->peer().rank || m.toRank != host_.rank()) {
    c->fail(PB_ERR_REMOTE, bad + "it claims to be from rank " + std::to_string(m.fromRank) + " to rank " +
                               std::to_string(m.toRank) + " but reached rank " + std::to_string(host_.rank()) +
                               "'s connection to rank " + std::to_string(c->peer().rank));
    return;
  }
  const auto type = static_cast<wire::MessageType>(m.type);
  if (type != wire::MessageType::WriteSignal && len != wire::Message::kSize) {
    c->fail(PB_ERR_REMOTE, bad + "message type " + std::to_string(m.type) + " of " + std::to_string(len) +
                               " bytes (expected " + std::to_string(wire::Message::kSize) + ")");
    return;
  }
  switch (type) {
    case wire::MessageType::Hello:
      c->onHello(m);
      return;
    case wire::MessageType::Signal:
      applySignal(*c, m);
      return;
    case wire::MessageType::WriteSignal:
      applyWriteSignal(*c, m, bytes + wire::Message::kSize, len - wire::Message::kSize);
      return;
    case wire::MessageType::LaneWake:
      wakeLanes(m.value);
      return;
  }
  c->fail(PB_ERR_REMOTE, bad + "unknown message type " + std::to_string(m.type));
}

void Context::applySignal(Connection& conn, const wire::Message& m) {
  std::string bad = "bad message from " + conn.peer().describe() + ": ";
  // The registry lookup and the add run under the context's mutex, which
  // deregister_memory takes too: a region is never written once it is gone.
  LocalRegion* region = regions_.find(m.region, m.check);
  if (!region)
    return conn.fail(PB_ERR_REMOTE, bad + "signal to region " + std::to_string(m.region) +
                                        ", which is not registered here (deregistered, or a stale key)");
  if (!rangeFits(m.offset, sizeof(uint64_t), region->size))
    return conn.fail(PB_ERR_REMOTE, bad + "signal at offset " + std::to_string(m.offset) + " overruns region " +
                                        std::to_string(m.region) + " of " + std::to_string(region->size) + " bytes");
  char* target = region->base + m.offset;
  if (reinterpret_cast<uintptr_t>(target) % alignof(uint64_t) != 0)
    return conn.fail(PB_ERR_REMOTE,
                     bad + "signal target at offset " + std::to_string(m.offset) + " is not 8-byte aligned");
  if (region->type != PB_MEM_HOST)
    return conn.fail(PB_ERR_REMOTE, bad + "signal into CUDA memory, which this process cannot add to with the "
                                          "CPU (use libfabric.signal = atomic)");
  // Release: the earlier writes were delivered before the peer sent this
  // (see README.md); whoever acquires the new value sees their data.
  __atomic_fetch_add(reinterpret_cast<uint64_t*>(target), m.value, __ATOMIC_RELEASE);
  signalLanded();
}

void Context::applyWriteSignal(Connection& conn, const wire::Message& m, const uint8_t* ext, size_t extAndPayload) {
  std::string bad = "bad message from " + conn.peer().describe() + ": ";
  if (extAndPayload < wire::WriteExt::kSize)
    return conn.fail(PB_ERR_REMOTE, bad + "write-with-signal message cut short (" + std::to_string(extAndPayload) +
                                        " bytes after its header)");
  const auto w = wire::WriteExt::decode(ext);
  if (w.length != extAndPayload - wire::WriteExt::kSize)
    return conn.fail(PB_ERR_REMOTE, bad + "write-with-signal message says " + std::to_string(w.length) +
                                        " payload bytes but carries " +
                                        std::to_string(extAndPayload - wire::WriteExt::kSize));
  // Checked and stored under the context's mutex, like signals: a region is
  // never written once deregister_memory has it.
  LocalRegion* region = regions_.find(w.region, w.check);
  if (!region)
    return conn.fail(PB_ERR_REMOTE, bad + "write of " + std::to_string(w.length) + " bytes to region " +
                                        std::to_string(w.region) +
                                        ", which is not registered here (deregistered, or a stale key)");
  if (!rangeFits(w.offset, w.length, region->size))
    return conn.fail(PB_ERR_REMOTE, bad + "write of " + std::to_string(w.length) + " bytes at offset " +
                                        std::to_string(w.offset) + " overruns region " + std::to_string(w.region) +
                                        " of " + std::to_string(region->size) + " bytes");
  if (region->type != PB_MEM_HOST)
    return conn.fail(PB_ERR_REMOTE, bad + "write-with-signal message into CUDA memory (its key says host memory)");
  if (w.length) std::memcpy(region->base + w.offset, ext + wire::WriteExt::kSize, w.length);
  applySignal(conn, m);
}

void Context::signalLanded() const {
  host_.signalLanded();
}

}  // namespace plugboard::libfabric
