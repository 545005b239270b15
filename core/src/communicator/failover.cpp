// Communicator::failover / beginFailover and PendingFailover: moving a pair
// whose connection failed onto the next transport its rule allows.
#include "communicator/communicator_impl.hpp"
#include "communicator/proxy_service.hpp"
#include "communicator/wait.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {

std::unique_ptr<PendingFailover> Communicator::Impl::startFailover(Communicator& comm, int peer, MemoryKind kind) {
  checkPeer(peer, "failover");
  if (!comm.config().getBool("failover"))
    throw Error(ErrorCode::Config, "rank " + std::to_string(self.rank) + ": failover to rank " + std::to_string(peer) +
                                       " asked for with the failover setting off");
  std::shared_ptr<ConnectionImpl> failed;
  std::string failedTransport, next;
  bool shared = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    failed = takeFallback(peer, kind, &failedTransport);
    next = choiceFor(peer, kind).transport;
    // One connection carries every memory kind chosen onto its transport.
    // A stager another kind runs on it stays running: closing the
    // connection would stop it, and its streams may wait on GPU work that
    // waits on this very call (the host relay). Its users see the failure
    // themselves; host links sharing it move to a fresh inbox
    // (PeerLink::freshInbox), so its late frames land where nothing reads
    // them. Any other failed connection is closed now, so that none of its
    // late frames lands anywhere (docs/design.md, "Failover across transports").
    shared = failed && failed->stager && otherKindUses(peer, kind, failedTransport);
    if (shared) retired.push_back(failed);
  }
  if (failed && !shared) {
    proxy->remove(failed);
    failed->close();  // the peer's side sees it end, and fails over too
  }
  std::vector<char> address;
  auto conn = startConnection(peer, next, address);
  return std::unique_ptr<PendingFailover>(
      new PendingFailover(comm, std::move(conn), std::move(failedTransport), std::move(address)));
}

std::unique_ptr<PendingFailover> Communicator::beginFailover(int peer, MemoryKind kind) {
  impl_->checkPeer(peer, "beginFailover");
  impl_->throwIfAborted("beginFailover()");
  if (impl_->choiceFor(peer, kind).staged)
    throw Error(ErrorCode::InvalidUsage, "rank " + std::to_string(rank()) + ": beginFailover to rank " +
                                             std::to_string(peer) +
                                             ": the pair's memory is staged; fail it over with failover()");
  return impl_->startFailover(*this, peer, kind);
}

std::shared_ptr<Connection> Communicator::failover(int peer, MemoryKind kind) {
  Impl& m = *impl_;
  m.throwIfAborted("failover()");
  auto pending = m.startFailover(*this, peer, kind);
  m.sendConnectAddress(peer, pending->nextTransport(), pending->address());
  const std::vector<char> address =
      m.recvConnectAddress(peer, pending->nextTransport(),
                           "rank " + std::to_string(rank()) + ": failover to rank " + std::to_string(peer) +
                               ": the peer moves the pair to ",
                           ", this rank to " + pending->nextTransport());
  Backoff backoff(m.timeout);
  std::shared_ptr<Connection> conn;
  while (!(conn = pending->step(address))) {
    if (backoff.expired())
      throw Error(ErrorCode::Timeout, "rank " + std::to_string(rank()) + ": failover to rank " + std::to_string(peer) +
                                          ": connecting over " + pending->nextTransport() + " timed out after " +
                                          backoff.elapsedText());
    backoff.pause();
  }
  if (m.choiceFor(peer, kind).staged) m.startStager(conn->impl_);  // both ends build it here
  return conn;
}

PendingFailover::PendingFailover(Communicator& comm, std::shared_ptr<ConnectionImpl> conn, std::string failed,
                                 std::vector<char> address)
    : comm_(comm), conn_(std::move(conn)), failed_(std::move(failed)), address_(std::move(address)) {}

PendingFailover::~PendingFailover() {
  if (!done_) conn_->close();
}

const std::string& PendingFailover::nextTransport() const { return conn_->plugin->name(); }

std::shared_ptr<Connection> PendingFailover::step(const std::vector<char>& peerAddress) {
  if (done_) return done_;
  const pb_status st = conn_->plugin->api().proxy_connect(conn_->conn, peerAddress.data(), peerAddress.size());
  if (st == PB_IN_PROGRESS) return nullptr;
  conn_->plugin->check(st, conn_->describe() + ": connect");
  {
    std::lock_guard<std::mutex> lock(comm_.impl_->mutex);
    comm_.impl_->install(conn_);
  }
  done_ = std::shared_ptr<Connection>(new Connection(conn_));
  return done_;
}

}  // namespace plugboard
