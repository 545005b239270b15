#include "plugboard/communicator.hpp"

#include <unistd.h>

#include <algorithm>
#include <thread>

#include "communicator/communicator_impl.hpp"
#include "communicator/proxy_service.hpp"
#include "communicator/signal_event.hpp"
#include "communicator/wait.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {

const char* libraryVersion() { return PLUGBOARD_VERSION; }

namespace {

std::string localHostName() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

}  // namespace

Communicator::Communicator(std::shared_ptr<Bootstrap> bootstrap, CommunicatorOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (!bootstrap) throw Error(ErrorCode::InvalidUsage, "Communicator needs a bootstrap");
  impl_->bootstrap = std::move(bootstrap);
  impl_->self.rank = impl_->bootstrap->rank();
  impl_->self.nranks = impl_->bootstrap->size();
  impl_->self.host = localHostName();
  logSetRank(impl_->self.rank);
  std::string localError;
  ErrorCode localCode = ErrorCode::Internal;
  try {
    prepareLocalSetup(options, impl_->self.rank, impl_->self.nranks, impl_->local);
    impl_->config = impl_->local.config.get();
    impl_->timeout = impl_->local.timeout;
    impl_->self.host = impl_->local.host;
  } catch (const Error& e) {
    localError = e.what();
    localCode = e.code();
  } catch (const std::exception& e) {
    localError = e.what();
  }
  impl_->exchangeIdentity(localError, localCode);
  impl_->paceWaits();
  impl_->exchangeReach();
  impl_->notices = std::make_unique<FailureNotices>(*this, NoticeScope::Communicator);
  impl_->notices->dropStale();  // an earlier communicator's, on this bootstrap
  impl_->noticeWatcher = std::make_unique<NoticeWatcher>("rank " + std::to_string(impl_->self.rank));
  impl_->proxy = std::make_unique<ProxyService>();
}

bool Communicator::Impl::coresScarceOn(int rank) const {
  return static_cast<unsigned>(ranksOnHostOf(rank)) >= views[rank].cores;
}

void Communicator::Impl::paceWaits() {
  const bool scarce = coresScarceOn(self.rank);
  gWaitSpinPolls.store(scarce ? 0u : 20u, std::memory_order_relaxed);
  PB_LOG(Info, "INIT", localRanks() << " rank(s) on this host of " << views[self.rank].cores << " core(s): waits "
                                    << (scarce ? "yield at once" : "spin 20 polls before they yield"));
}

void Communicator::Impl::shutdown() {
  if (proxy) proxy->stop();
  std::lock_guard<std::mutex> lock(mutex);
  for (auto& [key, c] : connections) c->close();
  for (auto& c : retired) c->close();
  retired.clear();
  for (auto& w : memories)
    if (auto m = w.lock()) m->release();
  memories.clear();
}

Communicator::~Communicator() {
  try {
    impl_->shutdown();
  } catch (const std::exception& e) {
    PB_LOG(Warn, "INIT", "error while destroying the communicator: " << e.what());
  }
}

int Communicator::rank() const { return impl_->self.rank; }
int Communicator::size() const { return impl_->self.nranks; }
Bootstrap& Communicator::bootstrap() const { return *impl_->bootstrap; }
const Config& Communicator::config() const { return *impl_->config; }
std::chrono::milliseconds Communicator::defaultTimeout() const { return impl_->timeout; }

const std::string& Communicator::hostOf(int rank) const {
  if (rank < 0 || rank >= size()) throw Error(ErrorCode::InvalidUsage, "hostOf: rank " + std::to_string(rank) + " is out of range");
  return impl_->views[rank].host;
}

bool Communicator::coresScarceOn(int rank) const {
  if (rank < 0 || rank >= size())
    throw Error(ErrorCode::InvalidUsage, "coresScarceOn: rank " + std::to_string(rank) + " is out of range");
  return impl_->coresScarceOn(rank);
}

std::string Communicator::transportFor(int peer, MemoryKind kind) const { return impl_->choiceFor(peer, kind).transport; }
std::string Communicator::selectionReason(int peer, MemoryKind kind) const { return impl_->choiceFor(peer, kind).why; }

std::vector<std::string> Communicator::loadedTransports() const {
  std::vector<std::string> out;
  for (const auto& p : impl_->plugins) out.push_back(p->name());
  return out;
}

void Communicator::checkErrors() const {
  if (aborted()) throw Error(ErrorCode::Aborted, impl_->abortText());
  // A peer's reason first: a connection to it may have failed because it left.
  if (auto notice = impl_->notices->poll()) throw *notice;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  for (auto& [key, c] : impl_->connections) c->throwIfFailed();
}

std::string Communicator::Impl::abortText() const {
  return "rank " + std::to_string(self.rank) + " (host " + self.host +
         "): the communicator was aborted (Communicator::abort)";
}

void Communicator::Impl::throwIfAborted(const char* call) const {
  if (aborted->load(std::memory_order_acquire))
    throw Error(ErrorCode::Aborted, abortText() + "; " + call + " cannot run on it (create a new communicator)");
}

void Communicator::abort() {
  Impl& m = *impl_;
  if (m.aborted->exchange(true)) return;
  PB_LOG(Warn, "INIT", m.abortText());
  {
    // Under the lock: removeAbortHook() returning means its hook is not running.
    std::lock_guard<std::mutex> lock(m.abortMutex);
    for (auto& [id, fn] : m.abortHooks) fn();
  }
  SignalEvent::instance().notify();  // host waiters asleep on the event count look again
  m.bootstrap->abort();               // and a rank waiting in a bootstrap call stops
}

bool Communicator::aborted() const { return impl_->aborted->load(std::memory_order_acquire); }

void Communicator::reportFailure(const std::string& reason) noexcept { impl_->notices->sendOnce(reason); }

std::optional<Error> Communicator::peerFailure() { return impl_->notices->poll(); }

std::optional<Error> Communicator::asyncError() const {
  if (aborted()) return Error(ErrorCode::Aborted, impl_->abortText());
  if (auto notice = impl_->notices->heard()) return notice;
  if (const int peer = impl_->notices->peerWithNotice(); peer >= 0)
    return Error(ErrorCode::Remote, "rank " + std::to_string(rank()) + " (host " + hostOf(rank()) + "): rank " +
                                        std::to_string(peer) + " (host " + hostOf(peer) +
                                        ") reported a failure (checkErrors() or peerFailure() reads its reason)");
  std::lock_guard<std::mutex> lock(impl_->mutex);
  for (auto& [key, c] : impl_->connections) {
    if (!c->failed.load()) continue;
    try {
      c->throwIfFailed();
    } catch (const Error& e) {
      return e;
    } catch (const std::exception& e) {
      return Error(ErrorCode::Internal, c->describe() + ": " + e.what());
    }
  }
  return std::nullopt;
}

uint64_t Communicator::Impl::addAbortHook(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(abortMutex);
  const uint64_t id = nextAbortHook++;
  abortHooks.emplace(id, fn);
  if (aborted->load(std::memory_order_acquire)) fn();
  return id;
}

void Communicator::Impl::removeAbortHook(uint64_t id) {
  std::lock_guard<std::mutex> lock(abortMutex);
  abortHooks.erase(id);
}

TransportPlugin& Communicator::Impl::plugin(const std::string& name) const {
  for (const auto& p : plugins)
    if (p->name() == name) return *p;
  throw Error(ErrorCode::Internal, "transport " + name + " was selected but is not loaded on rank " + std::to_string(self.rank));
}

const PairChoice& Communicator::Impl::choiceFor(int peer, MemoryKind kind) const {
  checkPeer(peer, "transportFor");
  auto table = choices.find(kind);
  if (table == choices.end()) {
    auto err = selectionErrors.find(kind);
    throw Error(ErrorCode::Config, err != selectionErrors.end()
                                       ? err->second
                                       : std::string("no loaded transport moves ") +
                                             (kind == MemoryKind::Cuda ? "CUDA" : "host") + " memory");
  }
  auto key = peer < self.rank ? std::make_pair(peer, self.rank) : std::make_pair(self.rank, peer);
  return table->second.at(key);
}

std::shared_ptr<ConnectionImpl> Communicator::Impl::takeFallback(int peer, MemoryKind kind, std::string* failed) {
  PairChoice& choice = const_cast<PairChoice&>(choiceFor(peer, kind));
  *failed = choice.transport;
  std::shared_ptr<ConnectionImpl> old;
  std::string why = "not on this side: the peer asked to fail the pair over";
  auto it = connections.find({peer, choice.transport});
  if (it != connections.end()) {
    old = it->second;
    try {
      old->throwIfFailed();
    } catch (const std::exception& e) {
      why = e.what();
    }
  }
  const std::string pair = "rank " + std::to_string(self.rank) + " (host " + self.host + ") -> rank " +
                           std::to_string(peer) + " (host " + views[peer].host + ")";
  if (choice.fallbacks.empty())
    throw Error(ErrorCode::Remote, pair + ": " + choice.transport + " failed (" + why +
                                       ") and no other transport can take the pair (failover: the pair's rule or "
                                       "the loaded transports list none left)");
  if (it != connections.end()) connections.erase(it);  // kept when no transport is left: the pair stays as it was
  PB_LOG(Warn, "NET", pair << ": " << choice.transport << " failed (" << why << "); failing over to "
                           << choice.fallbacks.front());
  choice.why += "; failed over from " + choice.transport;
  choice.transport = choice.fallbacks.front();
  choice.fallbacks.erase(choice.fallbacks.begin());
  return old;
}

bool Communicator::Impl::otherKindUses(int peer, MemoryKind kind, const std::string& transport) const {
  const auto key = peer < self.rank ? std::make_pair(peer, self.rank) : std::make_pair(self.rank, peer);
  for (const auto& [k, table] : choices) {
    if (k == kind) continue;
    const auto it = table.find(key);
    if (it != table.end() && it->second.transport == transport) return true;
  }
  return false;
}

std::shared_ptr<ConnectionImpl> Communicator::Impl::findConnection(int peer, MemoryKind kind) const {
  auto it = connections.find({peer, choiceFor(peer, kind).transport});
  return it == connections.end() ? nullptr : it->second;
}

void Communicator::Impl::checkPeer(int peer, const char* what) const {
  if (peer < 0 || peer >= self.nranks || peer == self.rank)
    throw Error(ErrorCode::InvalidUsage, std::string(what) + ": peer rank " + std::to_string(peer) + " is not another rank of 0.." +
                                             std::to_string(self.nranks - 1) + " (this is rank " + std::to_string(self.rank) + ")");
}

}  // namespace plugboard
