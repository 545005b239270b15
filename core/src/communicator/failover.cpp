// Communicator::failover / beginFailover and PendingFailover: moving a pair
// whose connection failed onto the next transport its rule allows.
#include "communicator/communicator_impl.hpp"
#include "communicator/proxy_service.hpp"
#include "communicator/wait.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {

void Communicator::Impl::markGivenUp(ConnectionImpl& conn, const std::string& next) {
  const std::string moved =
      "given up by a failover of the pair to " + next + "; make what was built on it again (Communicator::recover)";
  std::lock_guard<std::mutex> lock(conn.mutex);
  Error given(ErrorCode::Remote, conn.describe() + ": " + moved);
  if (conn.error) {
    try {
      std::rethrow_exception(conn.error);
    } catch (const Error& e) {
      given = Error(e.code(), std::string(e.what()) + "; since then " + moved);
    } catch (const std::exception& e) {
      given = Error(ErrorCode::Remote, conn.describe() + ": " + e.what() + "; since then " + moved);
    }
  }
  conn.error = std::make_exception_ptr(given);
  conn.failed = true;
}

std::unique_ptr<PendingFailover> Communicator::Impl::joinedFailover(Communicator& comm,
                                                                    const std::shared_ptr<ConnectionImpl>& conn,
                                                                    const std::string& failedTransport) {
  auto joined = std::unique_ptr<PendingFailover>(new PendingFailover(comm, conn, failedTransport, {}));
  joined->done_ = std::shared_ptr<Connection>(new Connection(conn));
  return joined;
}

std::unique_ptr<PendingFailover> Communicator::Impl::startFailover(Communicator& comm, int peer, MemoryKind kind,
                                                                   const ConnectionImpl* seen) {
  checkPeer(peer, "failover");
  if (!comm.config().getBool("failover"))
    throw Error(ErrorCode::Config, "rank " + std::to_string(self.rank) + ": failover to rank " + std::to_string(peer) +
                                       " asked for with the failover setting off");
  std::shared_ptr<ConnectionImpl> failed, existing;
  std::string failedTransport, next;
  bool shared = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (seen) {
      auto current = findConnection(peer, kind);
      // Moved since the caller took its connection: join the move.
      if (current && current.get() != seen && !current->failed.load())
        return joinedFailover(comm, current, seen->plugin->name());
    }
    failed = takeFallback(peer, kind, &failedTransport);
    next = choiceFor(peer, kind).transport;
    auto up = connections.find({peer, next});
    // Connected already (another memory kind's move or rule): both ends join it.
    if (up != connections.end() && !up->second->failed.load()) existing = up->second;
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
    markGivenUp(*failed, next);
    failed->close();  // the peer's side sees it end, and fails over too
  }
  if (existing) return joinedFailover(comm, existing, failedTransport);
  std::vector<char> address;
  auto conn = startConnection(peer, next, address);
  return std::unique_ptr<PendingFailover>(
      new PendingFailover(comm, std::move(conn), std::move(failedTransport), std::move(address)));
}

std::unique_ptr<PendingFailover> Communicator::beginFailover(const Connection& failing, MemoryKind kind) {
  const int peer = failing.remoteRank();
  impl_->checkPeer(peer, "beginFailover");
  impl_->throwIfAborted("beginFailover()");
  if (impl_->choiceFor(peer, kind).staged)
    throw Error(ErrorCode::InvalidUsage, "rank " + std::to_string(rank()) + ": beginFailover to rank " +
                                             std::to_string(peer) +
                                             ": the pair's memory is staged; fail it over with failover()");
  return impl_->startFailover(*this, peer, kind, failing.impl_.get());
}

std::map<int, std::shared_ptr<Connection>> Communicator::Impl::movePairs(Communicator& comm, const std::vector<int>& peers,
                                                                        MemoryKind kind, const std::string& what) {
  const std::string me = "rank " + std::to_string(self.rank) + " (host " + self.host + "): ";
  std::map<int, std::unique_ptr<PendingFailover>> pending;  // by peer: both ends go through their pairs in one order
  // Where no transport is left both ends find so here, from the same
  // table, before any address goes out (a word to the peer would stay
  // unread in its queue, or meet a peer already gone).
  for (int peer : peers) pending[peer] = startFailover(comm, peer, kind, nullptr);
  for (auto& [peer, f] : pending) sendConnectAddress(peer, f->nextTransport(), f->address());
  std::map<int, std::vector<char>> theirs;
  for (auto& [peer, f] : pending)
    theirs[peer] = recvConnectAddress(peer, f->nextTransport(),
                                      me + what + " with rank " + std::to_string(peer) + ": the peer moves the pair to ",
                                      ", this rank to " + f->nextTransport());
  std::map<int, std::shared_ptr<Connection>> done;
  Backoff backoff(timeout);
  for (;;) {
    for (auto& [peer, f] : pending)
      if (!done.count(peer))
        if (auto conn = f->step(theirs[peer])) done[peer] = conn;
    if (done.size() == pending.size()) break;
    if (backoff.expired()) {
      std::string stalled;
      for (auto& [peer, f] : pending)
        if (!done.count(peer)) stalled += " rank " + std::to_string(peer) + " (host " + views[peer].host + ") over " + f->nextTransport();
      throw Error(ErrorCode::Timeout, me + what + ": connecting timed out after " + backoff.elapsedText() + " to" + stalled);
    }
    backoff.pause();
  }
  for (auto& [peer, conn] : done)  // by peer, so each pair's two ends build its stager at the same point
    if (choiceFor(peer, kind).staged && !conn->impl_->stager) startStager(conn->impl_);
  return done;
}

std::shared_ptr<Connection> Communicator::failover(int peer, MemoryKind kind) {
  impl_->throwIfAborted("failover()");
  return impl_->movePairs(*this, {peer}, kind, "failover to rank " + std::to_string(peer)).at(peer);
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
