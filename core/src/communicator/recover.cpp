// Communicator::recover: after a failed call, every rank moves the pairs
// that failed on either side and drops the failure notices, together.
#include <cstdint>
#include <map>
#include <memory>
#include <set>

#include "communicator/communicator_impl.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {

namespace {
/// The memory kinds, by their bit in recover()'s table.
constexpr MemoryKind kKinds[] = {MemoryKind::Host, MemoryKind::Cuda};
constexpr int kKindCount = 2;
}  // namespace

std::vector<int> Communicator::recover(const std::vector<int>& suspects) {
  Impl& m = *impl_;
  m.throwIfAborted("recover()");
  const int n = size(), me = rank();
  if (!config().getBool("failover"))
    throw Error(ErrorCode::Config, "rank " + std::to_string(me) + " (host " + hostOf(me) +
                                       "): recover() asked for with the failover setting off");
  std::vector<bool> suspect(n, false);
  for (int peer : suspects) {
    if (peer < 0 || peer >= n || peer == me)
      throw Error(ErrorCode::InvalidUsage, "rank " + std::to_string(me) + " (host " + hostOf(me) + "): recover(): suspect " +
                                               std::to_string(peer) + " is not a peer (ranks 0-" + std::to_string(n - 1) +
                                               ", this one excepted)");
    suspect[peer] = true;
  }
  // Each rank's row: per rank, bit k set where this rank's connection
  // carrying kKinds[k] memory to it failed (or the rank is a suspect);
  // last, 1 when it sent a failure notice.
  const size_t width = static_cast<size_t>(n) + 1;
  std::vector<uint8_t> table(width * n, 0);
  uint8_t* row = table.data() + width * me;
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    for (int peer = 0; peer < n; ++peer)
      for (int k = 0; k < kKindCount && peer != me; ++k) {
        if (!m.choices.count(kKinds[k])) continue;
        auto conn = m.findConnection(peer, kKinds[k]);
        // A staged kind is in use on the connection only once it has a stager.
        const bool used = conn && (!m.choiceFor(peer, kKinds[k]).staged || conn->stager);
        if (used && (conn->failed.load() || suspect[peer])) row[peer] |= uint8_t(1u << k);
      }
  }
  row[n] = m.notices->sent();
  bootstrap().allGather(table.data(), width);
  std::vector<bool> sentBy(n);
  for (int r = 0; r < n; ++r) sentBy[r] = table[width * r + n] != 0;
  m.notices->forget(sentBy);
  // Kind by kind, so a kind whose next transport another kind has just
  // connected joins that connection (startFailover) on both ends alike.
  std::set<int> moved;
  for (int k = 0; k < kKindCount; ++k) {
    std::vector<int> peers;
    for (int peer = 0; peer < n; ++peer)
      if (peer != me && ((table[width * me + peer] | table[width * peer + me]) & (1u << k))) peers.push_back(peer);
    if (peers.empty()) continue;
    for (auto& [peer, conn] : m.movePairs(*this, peers, kKinds[k], "recover()")) {
      PB_LOG(Info, "NET", "rank " << me << ": recover() moved the pair with rank " << peer << " to "
                                  << conn->transport());
      moved.insert(peer);
    }
  }
  drain();
  return std::vector<int>(moved.begin(), moved.end());
}

void Communicator::drain() {
  // A failed call can leave writes in flight on pairs that did not fail;
  // landing after recover() returns, they would meet memory the program
  // has released since. Each side signals after its earlier writes (a
  // signal lands after them) and waits for the peer's. Both ends list a
  // pair's connections alike, by (peer, transport): every one the table
  // holds (the moves took the failed ones out; one failing meanwhile
  // fails the signal or the wait with its error).
  std::vector<std::shared_ptr<Connection>> conns;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    for (auto& [key, c] : impl_->connections)
      if (!(c->plugin->properties().flags & PB_CAP_MAPPED))
        conns.push_back(std::shared_ptr<Connection>(new Connection(c)));
  }
  std::vector<Host2HostSemaphore::Half> halves;
  for (auto& c : conns) {
    halves.push_back(Host2HostSemaphore::prepare(*this));
    const std::vector<char> mine = serializeMemory(halves.back().memory);
    bootstrap().send(mine.data(), mine.size(), c->remoteRank(), kTagSemaphore);
  }
  std::vector<std::unique_ptr<Host2HostSemaphore>> semaphores;
  for (size_t i = 0; i < conns.size(); ++i)
    semaphores.push_back(std::make_unique<Host2HostSemaphore>(*this, conns[i], std::move(halves[i]),
                                                              bootstrap().recv(conns[i]->remoteRank(), kTagSemaphore)));
  for (auto& s : semaphores) s->signal();
  for (auto& s : semaphores) s->wait();
}

}  // namespace plugboard
