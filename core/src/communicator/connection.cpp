#include <thread>

#include "communicator/communicator_impl.hpp"
#include "communicator/wait.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {

std::string ConnectionImpl::describe() const {
  return "rank " + std::to_string(rank) + " -> rank " + std::to_string(peer) + " (host " + peerHost + ") over " +
         (plugin ? plugin->name() : std::string("?"));
}

void ConnectionImpl::fail(std::exception_ptr e) {
  if (!error) error = e;
  failed = true;
}

void ConnectionImpl::checkPost(pb_status st, const char* what) {
  if (st == PB_OK) return;
  try {
    plugin->check(st, describe() + ": " + what);
  } catch (...) {
    fail(std::current_exception());
    throw;
  }
}

bool ConnectionImpl::progress(bool ifIdle) {
  std::unique_lock<std::mutex> lock(mutex, std::defer_lock);
  if (!ifIdle) lock.lock();
  else if (!lock.try_lock()) return false;
  if (closed || error) return true;
  uint64_t done = 0;
  pb_status st = plugin->api().proxy_progress(conn, &done);
  // Also on failure: what completed before it (0, so no change, from a
  // plugin that does not say).
  if (done > completed.load(std::memory_order_relaxed)) completed.store(done, std::memory_order_release);
  if (st == PB_OK) return true;
  std::string why = plugin->lastError();
  fail(std::make_exception_ptr(Error(errorCodeForStatus(st), describe() + ": " + (why.empty() ? "transport error" : why))));
  PB_LOG(Warn, "NET", describe() << " failed: " << why);
  return true;
}

void ConnectionImpl::throwIfFailed() {
  if (aborted && aborted->load(std::memory_order_acquire))
    throw Error(ErrorCode::Aborted, describe() + ": the communicator was aborted (Communicator::abort)");
  if (!failed.load()) return;
  std::lock_guard<std::mutex> lock(mutex);
  if (error) std::rethrow_exception(error);
}

void ConnectionImpl::requireOpen() const {
  if (closed) throw Error(ErrorCode::InvalidUsage, describe() + " is closed (its communicator was destroyed)");
}

void ConnectionImpl::close() {
  if (stager) stager->stop();  // its thread posts on conn: stop it before taking the lock
  std::lock_guard<std::mutex> lock(mutex);
  if (closed) return;
  closed = true;
  for (auto& w : imports) {
    if (auto r = w.lock(); r && r->rkey) {
      plugin->api().release_rkey(conn, r->rkey);
      r->rkey = nullptr;
    }
  }
  imports.clear();
  if (conn) plugin->api().free(conn);
  conn = nullptr;
}

uint64_t ConnectionImpl::postWrite(pb_mr* src, uint64_t srcOffset, pb_rkey* dst, uint64_t dstOffset, uint64_t size) {
  std::lock_guard<std::mutex> lock(mutex);
  requireOpen();
  checkPost(plugin->api().write(conn, src, srcOffset, dst, dstOffset, size), "write");
  return posted.fetch_add(1) + 1;
}

uint64_t ConnectionImpl::postSignal(pb_rkey* dst, uint64_t dstOffset, uint64_t value) {
  std::lock_guard<std::mutex> lock(mutex);
  requireOpen();
  checkPost(plugin->api().signal(conn, dst, dstOffset, value), "signal");
  return posted.fetch_add(1) + 1;
}

uint64_t ConnectionImpl::postWriteSignal(pb_mr* src, uint64_t srcOffset, pb_rkey* dst, uint64_t dstOffset,
                                         uint64_t size, pb_rkey* signalDst, uint64_t signalOffset, uint64_t value) {
  const pb_transport_v1& api = plugin->api();
  auto fused = api.struct_size >= offsetof(pb_transport_v1, write_signal) + sizeof(void*) ? api.write_signal : nullptr;
  if (!fused) {
    postWrite(src, srcOffset, dst, dstOffset, size);
    return postSignal(signalDst, signalOffset, value);
  }
  std::lock_guard<std::mutex> lock(mutex);
  requireOpen();
  checkPost(fused(conn, src, srcOffset, dst, dstOffset, size, signalDst, signalOffset, value), "write with signal");
  return posted.fetch_add(1) + 1;
}

RemoteMemoryImpl::~RemoteMemoryImpl() {
  if (!connection) return;
  std::lock_guard<std::mutex> lock(connection->mutex);
  if (rkey && !connection->closed) connection->plugin->api().release_rkey(connection->conn, rkey);
}

// ---- Connection (public) ---------------------------------------------------

int Connection::remoteRank() const { return impl_->peer; }
const std::string& Connection::transport() const { return impl_->plugin->name(); }
uint64_t Connection::posted() const { return impl_->posted.load(); }
uint64_t Connection::completed() const { return impl_->completed.load(); }

std::string Connection::describeState() const {
  const ConnectionImpl& c = *impl_;
  std::string text =
      "transport posted " + std::to_string(c.posted.load()) + ", completed " + std::to_string(c.completed.load());
  if (c.stager) text += "; " + c.stager->describeState();
  return text;
}

void Connection::progress() {
  impl_->progress();
  impl_->throwIfFailed();
}

namespace {

/// Checks a write's handles and ranges; returns the source's handle for c's transport.
pb_mr* checkWrite(ConnectionImpl& c, const RemoteMemoryImpl* dstImpl, uint64_t dstOffset, const RegisteredMemory& src,
                  RegisteredMemoryImpl* srcImpl, uint64_t srcOffset, uint64_t size, size_t dstSize, int dstRank) {
  if (!dstImpl || !srcImpl) throw Error(ErrorCode::InvalidUsage, c.describe() + ": write with an empty memory handle");
  if (dstImpl->connection.get() != &c)
    throw Error(ErrorCode::InvalidUsage, c.describe() + ": destination memory of rank " + std::to_string(dstRank) +
                                             " was imported on another connection");
  if (srcOffset > src.size() || size > src.size() - srcOffset || dstOffset > dstSize || size > dstSize - dstOffset)
    throw Error(ErrorCode::InvalidUsage, c.describe() + ": write of " + std::to_string(size) + " bytes from offset " +
                                             std::to_string(srcOffset) + " (of " + std::to_string(src.size()) + ") to offset " +
                                             std::to_string(dstOffset) + " (of " + std::to_string(dstSize) + ") is out of range");
  pb_mr* mr = srcImpl->handleFor(c.plugin);
  if (!mr) throw Error(ErrorCode::InvalidUsage, c.describe() + ": source memory is not registered with " + c.plugin->name());
  return mr;
}

void checkSignal(ConnectionImpl& c, const RemoteMemoryImpl* dstImpl, uint64_t dstOffset, size_t dstSize) {
  if (!dstImpl || dstImpl->connection.get() != &c)
    throw Error(ErrorCode::InvalidUsage, c.describe() + ": signal target was not imported on this connection");
  if (dstOffset % 8 != 0 || dstOffset > dstSize || dstSize - dstOffset < 8)
    throw Error(ErrorCode::InvalidUsage, c.describe() + ": signal offset " + std::to_string(dstOffset) +
                                             " is not an aligned 8-byte slot inside " + std::to_string(dstSize) + " bytes");
}

}  // namespace

bool Connection::mapsPeerMemory() const {
  const pb_transport_v1& api = impl_->plugin->api();
  return (impl_->plugin->properties().flags & PB_CAP_MAPPED) &&
         api.struct_size >= offsetof(pb_transport_v1, remote_pointer) + sizeof(void*) && api.remote_pointer;
}

void* Connection::remotePointer(const RemoteMemory& remote) const {
  ConnectionImpl& c = *impl_;
  if (!mapsPeerMemory())
    throw Error(ErrorCode::InvalidUsage, c.describe() + ": transport " + c.plugin->name() +
                                             " does not map peer memory into this process (use a port channel)");
  if (!remote.impl_ || remote.impl_->connection.get() != &c)
    throw Error(ErrorCode::InvalidUsage, c.describe() + ": remotePointer of memory imported on another connection");
  std::lock_guard<std::mutex> lock(c.mutex);
  c.requireOpen();
  void* ptr = nullptr;
  const pb_status st = c.plugin->api().remote_pointer(c.conn, remote.impl_->rkey, &ptr);
  if (st != PB_OK) c.plugin->check(st, c.describe() + ": remote pointer");
  return ptr;
}

bool Connection::notifiesWaiters() const { return (impl_->plugin->properties().flags & PB_CAP_SIGNAL_NOTIFY) != 0; }

bool Connection::registersCheaply() const {
  return (impl_->plugin->properties().flags & PB_CAP_CHEAP_REGISTRATION) != 0;
}

namespace {

/// True when the write must go through the stager: the destination is
/// staged, or the source is CUDA memory the transport cannot read.
bool needsStaging(ConnectionImpl& c, const RemoteMemoryImpl* dst, RegisteredMemoryImpl* src) {
  return (dst && dst->staged) || (src && src->kind == MemoryKind::Cuda && !src->handleFor(c.plugin));
}

Stager& stagerOf(ConnectionImpl& c) {
  if (!c.stager)
    throw Error(ErrorCode::InvalidUsage, c.describe() + ": CUDA memory over " + c.plugin->name() +
                                             " is staged through host memory, which needs connect(peer, MemoryKind::Cuda) "
                                             "on both ranks and setup() first");
  return *c.stager;
}

/// Range checks of a staged write (the plugin never sees it).
void checkStagedWrite(ConnectionImpl& c, const RemoteMemoryImpl* dst, uint64_t dstOffset, const RegisteredMemory& src,
                      uint64_t srcOffset, uint64_t size) {
  if (!dst || dst->connection.get() != &c)
    throw Error(ErrorCode::InvalidUsage, c.describe() + ": destination memory was imported on another connection");
  if (srcOffset > src.size() || size > src.size() - srcOffset || dstOffset > dst->size || size > dst->size - dstOffset)
    throw Error(ErrorCode::InvalidUsage, c.describe() + ": write of " + std::to_string(size) + " bytes from offset " +
                                             std::to_string(srcOffset) + " (of " + std::to_string(src.size()) + ") to offset " +
                                             std::to_string(dstOffset) + " (of " + std::to_string(dst->size) + ") is out of range");
}

}  // namespace

void Connection::writeWithSignal(const RemoteMemory& dst, uint64_t dstOffset, const RegisteredMemory& src,
                                 uint64_t srcOffset, uint64_t size, const RemoteMemory& signalDst, uint64_t signalOffset,
                                 uint64_t value) {
  ConnectionImpl& c = *impl_;
  const bool staged = needsStaging(c, dst.impl_.get(), src.impl_.get()) || (signalDst.impl_ && signalDst.impl_->staged) ||
                      (c.stager && c.stager->ordersSignals());
  if (staged) {
    write(dst, dstOffset, src, srcOffset, size);
    signal(signalDst, signalOffset, value);
    return;
  }
  pb_mr* mr = checkWrite(c, dst.impl_.get(), dstOffset, src, src.impl_.get(), srcOffset, size, dst.size(), dst.rank());
  checkSignal(c, signalDst.impl_.get(), signalOffset, signalDst.size());
  c.throwIfFailed();
  c.postWriteSignal(mr, srcOffset, dst.impl_->rkey, dstOffset, size, signalDst.impl_->rkey, signalOffset, value);
}

void Connection::write(const RemoteMemory& dst, uint64_t dstOffset, const RegisteredMemory& src, uint64_t srcOffset,
                       uint64_t size) {
  ConnectionImpl& c = *impl_;
  if (needsStaging(c, dst.impl_.get(), src.impl_.get())) {
    if (!src.impl_) throw Error(ErrorCode::InvalidUsage, c.describe() + ": write with an empty memory handle");
    checkStagedWrite(c, dst.impl_.get(), dstOffset, src, srcOffset, size);
    c.throwIfFailed();
    stagerOf(c).write(*dst.impl_, dstOffset, static_cast<const char*>(src.data()) + srcOffset, size);
    return;
  }
  pb_mr* mr = checkWrite(c, dst.impl_.get(), dstOffset, src, src.impl_.get(), srcOffset, size, dst.size(), dst.rank());
  c.throwIfFailed();
  c.postWrite(mr, srcOffset, dst.impl_->rkey, dstOffset, size);
}

void Connection::signal(const RemoteMemory& dst, uint64_t dstOffset, uint64_t value) {
  ConnectionImpl& c = *impl_;
  checkSignal(c, dst.impl_.get(), dstOffset, dst.size());
  c.throwIfFailed();
  if ((dst.impl_ && dst.impl_->staged) || (c.stager && c.stager->ordersSignals())) {
    stagerOf(c).signal(*dst.impl_, dstOffset, value);
    return;
  }
  c.postSignal(dst.impl_->rkey, dstOffset, value);
}

void Connection::flush(std::chrono::milliseconds timeout) { waitCompleted(impl_->posted.load(), timeout); }

void Connection::waitCompleted(uint64_t target, std::chrono::milliseconds timeout) {
  ConnectionImpl& c = *impl_;
  // Completion is checked before failure: a connection that failed after
  // these operations completed (a later signal to a peer that has gone)
  // still answers for them. An abort ends every wait.
  const auto done = [&] { return c.completed.load(std::memory_order_acquire) >= target; };
  if (c.aborted && c.aborted->load(std::memory_order_acquire)) c.throwIfFailed();
  if (done()) return;
  c.progress();
  if (done()) return;
  c.throwIfFailed();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    c.requireOpen();
    const pb_status st = c.plugin->api().flush(c.conn);
    if (st != PB_OK) c.plugin->check(st, c.describe() + ": flush");  // the description only on failure
  }
  if (timeout.count() < 0) timeout = c.timeout;
  Backoff backoff(timeout, notifiesWaiters());
  for (backoff.arm(); !done(); backoff.arm()) {
    c.progress();
    if (done()) break;
    c.throwIfFailed();
    if (backoff.expired())
      throw Error(ErrorCode::Timeout, c.describe() + ": flush timed out after " + backoff.elapsedText() + " with " +
                                          std::to_string(c.completed.load()) + " of " + std::to_string(target) +
                                          " operations complete");
    backoff.pause();
  }
}

}  // namespace plugboard
