// connect() and setup(): address exchange over the bootstrap, then the
// transports' non-blocking connect driven on every pending pair at once.
#include <set>

#include "communicator/communicator_impl.hpp"
#include "communicator/proxy_service.hpp"
#include "communicator/wait.hpp"
#include "communicator/wire.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {
namespace {

using ConnKey = Communicator::Impl::ConnKey;

/// Drives proxy_connect on every connection until all are up or time runs out.
void finishConnections(std::map<ConnKey, std::shared_ptr<ConnectionImpl>>& conns,
                       std::map<ConnKey, std::vector<char>>& peerAddrs, std::chrono::milliseconds timeout) {
  std::map<ConnKey, bool> done;
  Backoff backoff(timeout);
  while (done.size() < conns.size()) {
    for (auto& [peer, c] : conns) {
      if (done.count(peer)) continue;
      const auto& a = peerAddrs[peer];
      pb_status st = c->plugin->api().proxy_connect(c->conn, a.data(), a.size());
      if (st == PB_OK) { done[peer] = true; continue; }
      if (st != PB_IN_PROGRESS) c->plugin->check(st, c->describe() + ": connect");
    }
    if (done.size() == conns.size()) break;
    if (backoff.expired()) {
      std::string missing;
      for (auto& [peer, c] : conns)
        if (!done.count(peer)) missing += "\n  " + c->describe();
      throw Error(ErrorCode::Timeout, "rank " + std::to_string(conns.begin()->second->rank) + ": connecting timed out after " +
                                          backoff.elapsedText() + "; still not connected:" + missing);
    }
    backoff.pause();
  }
}

}  // namespace

std::shared_ptr<ConnectionImpl> Communicator::Impl::startConnection(int peer, const std::string& transport,
                                                                    std::vector<char>& addr) {
  auto c = std::make_shared<ConnectionImpl>();
  c->plugin = &plugin(transport);
  c->rank = self.rank;
  c->peer = peer;
  c->peerHost = views[peer].host;
  c->timeout = timeout;
  c->aborted = aborted;
  const pb_peer_info_v1 info = peerInfo(peer);
  size_t len = c->plugin->properties().max_address_size;
  addr.assign(len, 0);
  c->plugin->check(c->plugin->api().setup(c->plugin->context(), &info, &c->conn, addr.data(), &len),
                   c->describe() + ": setup");
  addr.resize(len);
  return c;
}

void Communicator::Impl::sendConnectAddress(int peer, const std::string& transport, const std::vector<char>& addr) {
  BlobWriter w;
  w.str(transport);
  w.bytes(addr.data(), addr.size());
  bootstrap->send(w.data().data(), w.data().size(), peer, kTagConnect);
}

std::vector<char> Communicator::Impl::recvConnectAddress(int peer, const std::string& transport,
                                                         const std::string& mismatchBefore,
                                                         const std::string& mismatchAfter) {
  const std::vector<char> blob = bootstrap->recv(peer, kTagConnect);
  BlobReader r(blob, "rank " + std::to_string(peer));
  const std::string theirs = r.str();
  std::vector<char> addr = r.bytes();
  if (theirs != transport) throw Error(ErrorCode::Remote, mismatchBefore + theirs + mismatchAfter);
  return addr;
}

void Communicator::Impl::install(const std::shared_ptr<ConnectionImpl>& c) {
  connections[{c->peer, c->plugin->name()}] = c;
  proxy->add(c);
  PB_LOG(Info, "NET", "connected " << c->describe() << (c->stager ? " (CUDA memory staged)" : ""));
}

std::shared_future<std::shared_ptr<Connection>> Communicator::connect(int peer, MemoryKind kind) {
  impl_->checkPeer(peer, "connect");
  const PairChoice& choice = impl_->choiceFor(peer, kind);
  const ConnKey key{peer, choice.transport};
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (auto it = impl_->pendingFutures.find(key); it != impl_->pendingFutures.end()) {
    if (choice.staged) impl_->pendingStagers.insert(key);
    return it->second;
  }
  auto& promise = impl_->pendingPromises[key];
  auto future = promise.get_future().share();
  auto existing = impl_->connections.find(key);
  const bool needsStager = choice.staged && (existing == impl_->connections.end() || !existing->second->stager);
  if (needsStager) impl_->pendingStagers.insert(key);
  if (existing != impl_->connections.end() && !needsStager) {
    promise.set_value(std::shared_ptr<Connection>(new Connection(existing->second)));
    impl_->pendingPromises.erase(key);
    return future;
  }
  impl_->pendingFutures[key] = future;
  return future;
}

void Communicator::setup() {
  Impl& m = *impl_;
  std::map<ConnKey, std::promise<std::shared_ptr<Connection>>> promises;
  std::set<ConnKey> stagers;
  std::map<ConnKey, std::shared_ptr<ConnectionImpl>> existing;  // up already; only a stager is missing
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    promises.swap(m.pendingPromises);
    stagers.swap(m.pendingStagers);
    m.pendingFutures.clear();
    for (auto& [key, p] : promises)
      if (auto it = m.connections.find(key); it != m.connections.end()) existing[key] = it->second;
  }
  std::map<ConnKey, std::shared_ptr<ConnectionImpl>> conns;
  try {
    m.throwIfAborted("setup()");
    // Keys are sorted by (peer, transport): both ends send and receive a
    // pair's blobs in the same order under one tag.
    std::map<ConnKey, std::vector<char>> mine, theirs;
    for (auto& [key, p] : promises)
      if (!existing.count(key)) conns[key] = m.startConnection(key.first, key.second, mine[key]);
    for (auto& [key, addr] : mine) m.sendConnectAddress(key.first, key.second, addr);
    for (auto& [key, p] : promises)
      if (!existing.count(key))
        theirs[key] = m.recvConnectAddress(key.first, key.second,
                                           conns[key]->describe() + ": the peer set up its side with ",
                                           " (both ranks must connect for the same memory kinds)");
    if (!conns.empty()) finishConnections(conns, theirs, m.timeout);
    for (const ConnKey& key : stagers) {  // sorted: both ends build a pair's stager at the same point
      auto c = conns.count(key) ? conns[key] : existing[key];
      if (c && !c->stager) m.startStager(c);
    }
  } catch (...) {
    for (auto& [key, c] : conns) c->close();
    for (auto& [key, p] : promises) p.set_exception(std::current_exception());
    throw;
  }
  std::lock_guard<std::mutex> lock(m.mutex);
  for (auto& [key, c] : conns) {
    m.install(c);
    promises[key].set_value(std::shared_ptr<Connection>(new Connection(c)));
  }
  for (auto& [key, c] : existing) promises[key].set_value(std::shared_ptr<Connection>(new Connection(c)));
}

std::map<int, std::shared_ptr<Connection>> Communicator::connectAll(MemoryKind kind) {
  std::map<int, std::shared_future<std::shared_ptr<Connection>>> futures;
  for (int p = 0; p < size(); ++p)
    if (p != rank()) futures[p] = connect(p, kind);
  setup();
  std::map<int, std::shared_ptr<Connection>> out;
  for (auto& [p, f] : futures) out[p] = f.get();
  return out;
}

std::shared_ptr<Connection> Communicator::connection(int peer, MemoryKind kind) const {
  impl_->checkPeer(peer, "connection");
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto c = impl_->findConnection(peer, kind);
  if (!c)
    throw Error(ErrorCode::InvalidUsage, "rank " + std::to_string(rank()) + " has no connection to rank " +
                                             std::to_string(peer) + ": call connect() and setup() first");
  return std::shared_ptr<Connection>(new Connection(c));
}

}  // namespace plugboard
