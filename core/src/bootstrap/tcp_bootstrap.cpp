#include <cstring>
#include <mutex>

#include "bootstrap/context.hpp"
#include "bootstrap/peer_links.hpp"
#include "bootstrap/rendezvous.hpp"
#include "bootstrap/unique_id.hpp"
#include "bootstrap/wire.hpp"
#include "plugboard/bootstrap.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {

struct TcpBootstrap::Impl {
  bootstrap::RankContext ctx;  // PeerLinks and its links refer to it: Impl never moves
  std::unique_ptr<bootstrap::PeerLinks> links;
  /// One call at a time in links. Polls only try it: a poll from a
  /// background thread (the GPU collectives' host relay) never waits for a
  /// user's blocking call, whose peers may wait on that thread's work.
  std::mutex mu;
};

TcpBootstrap::TcpBootstrap(int rank, int nranks, const UniqueId& id, std::chrono::milliseconds timeout,
                           const std::string& interfaceSpec)
    : impl_(std::make_unique<Impl>()) {
  if (nranks < 1 || rank < 0 || rank >= nranks)
    throw Error(ErrorCode::InvalidUsage, "bootstrap: rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
                                             " ranks is out of range: need nranks >= 1 and 0 <= rank < nranks");
  impl_->ctx = bootstrap::RankContext{rank, nranks, bootstrap::hostName()};
  bootstrap::IdContents contents = bootstrap::decodeId(id);
  bootstrap::Rendezvous r = rank == 0 ? bootstrap::runRoot(impl_->ctx, contents, timeout)
                                      : bootstrap::joinRoot(impl_->ctx, contents, timeout, interfaceSpec);
  impl_->links = std::make_unique<bootstrap::PeerLinks>(impl_->ctx, contents.nonce, std::move(r), timeout);
  PB_LOG(Info, "BOOTSTRAP", impl_->ctx.who() << " joined a job of " << nranks << " ranks rooted at "
                                             << contents.root.str());
}

TcpBootstrap::~TcpBootstrap() = default;

int TcpBootstrap::rank() const { return impl_->ctx.rank; }

int TcpBootstrap::size() const { return impl_->ctx.nranks; }

// Ring: at step s each rank forwards the slot it received at step s-1.
void TcpBootstrap::allGather(void* data, size_t bytesPerRank) {
  const int n = size(), me = rank();
  if (n > 1 && !data && bytesPerRank > 0)
    throw Error(ErrorCode::InvalidUsage, impl_->ctx.who() + ": allGather called with a null buffer");
  char* base = static_cast<char*>(data);
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->links->beginCall();
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  for (int step = 0; step < n - 1; ++step) {
    const size_t sendSlot = static_cast<size_t>((me - step + n) % n);
    const size_t recvSlot = static_cast<size_t>((me - step - 1 + 2 * n) % n);
    impl_->links->send(right, bootstrap::kCollectiveSpace, 0, base + sendSlot * bytesPerRank, bytesPerRank);
    std::vector<char> got = impl_->links->recv(left, bootstrap::kCollectiveSpace, 0);
    if (got.size() != bytesPerRank)
      throw Error(ErrorCode::Remote, impl_->ctx.who() + ": allGather/barrier mismatch: rank " + std::to_string(left) +
                                         " sent " + std::to_string(got.size()) + " bytes per rank, this rank passed " +
                                         std::to_string(bytesPerRank) + "; every rank must make the same calls");
    if (bytesPerRank > 0) memcpy(base + recvSlot * bytesPerRank, got.data(), bytesPerRank);
  }
}

void TcpBootstrap::send(const void* data, size_t size, int peer, int tag) {
  const auto& ctx = impl_->ctx;
  if (peer < 0 || peer >= ctx.nranks)
    throw Error(ErrorCode::InvalidUsage, ctx.who() + ": send to rank " + std::to_string(peer) + ", out of range 0.." +
                                             std::to_string(ctx.nranks - 1));
  if (size > bootstrap::kMaxFrameBytes || (!data && size > 0))
    throw Error(ErrorCode::InvalidUsage, ctx.who() + ": send of " + std::to_string(size) + " bytes to rank " +
                                             std::to_string(peer) + ": null data or over the 1 GiB limit");
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->links->beginCall();
  impl_->links->send(peer, bootstrap::kUserSpace, tag, data, size);
}

std::vector<char> TcpBootstrap::recv(int peer, int tag) {
  const auto& ctx = impl_->ctx;
  if (peer < 0 || peer >= ctx.nranks)
    throw Error(ErrorCode::InvalidUsage, ctx.who() + ": recv from rank " + std::to_string(peer) +
                                             ", out of range 0.." + std::to_string(ctx.nranks - 1));
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->links->beginCall();
  return impl_->links->recv(peer, bootstrap::kUserSpace, tag);
}

void TcpBootstrap::abort() { impl_->links->abort(); }

bool TcpBootstrap::poll(int peer, int tag) {
  if (peer < 0 || peer >= impl_->ctx.nranks) return false;
  std::unique_lock<std::mutex> lock(impl_->mu, std::try_to_lock);
  if (!lock.owns_lock()) return false;  // another thread's call: look again later
  impl_->links->beginCall();
  return impl_->links->hasMessage(peer, bootstrap::kUserSpace, tag);
}

bool TcpBootstrap::peerClosed(int peer) {
  if (peer < 0 || peer >= impl_->ctx.nranks) return false;
  std::unique_lock<std::mutex> lock(impl_->mu, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  impl_->links->beginCall();
  return impl_->links->peerClosed(peer);
}

void TcpBootstrap::barrier() {
  std::vector<char> slots(static_cast<size_t>(size()), 0);
  allGather(slots.data(), 1);
}

}  // namespace plugboard
