#include "communicator/communicator_impl.hpp"
#include "communicator/wait.hpp"
#include "plugboard/error.hpp"

namespace plugboard {

Host2HostSemaphore::Host2HostSemaphore(Communicator& comm, std::shared_ptr<Connection> connection)
    : comm_(comm), connection_(std::move(connection)), inbound_(std::make_unique<uint64_t>(0)) {
  if (!connection_) throw Error(ErrorCode::InvalidUsage, "Host2HostSemaphore needs a connection");
  int peer = connection_->remoteRank();
  local_ = comm.registerMemory(inbound_.get(), sizeof(uint64_t));
  Communicator::Impl& impl = *comm.impl_;
  impl.sendMemoryTagged(local_, peer, kTagSemaphore);
  remote_ = impl.recvMemoryTagged(peer, kTagSemaphore);
}

Host2HostSemaphore::Half Host2HostSemaphore::prepare(Communicator& comm) {
  Half half{std::make_unique<uint64_t>(0), RegisteredMemory()};
  half.memory = comm.registerMemory(half.counter.get(), sizeof(uint64_t));
  return half;
}

Host2HostSemaphore::Host2HostSemaphore(Communicator& comm, std::shared_ptr<Connection> connection, Half half,
                                       const std::vector<char>& peerCounter)
    : comm_(comm), connection_(std::move(connection)), inbound_(std::move(half.counter)), local_(half.memory) {
  if (!connection_ || !inbound_) throw Error(ErrorCode::InvalidUsage, "Host2HostSemaphore needs a connection and a half");
  remote_ = comm.deserializeMemory(peerCounter, connection_->remoteRank());
}

Host2HostSemaphore::~Host2HostSemaphore() = default;

void Host2HostSemaphore::signal() { connection_->signal(remote_, 0, 1); }

void Host2HostSemaphore::signalAdd(uint64_t n) { connection_->signal(remote_, 0, n); }

void Host2HostSemaphore::writeAndSignal(const RemoteMemory& dst, uint64_t dstOffset, const RegisteredMemory& src,
                                        uint64_t srcOffset, uint64_t size) {
  connection_->writeWithSignal(dst, dstOffset, src, srcOffset, size, remote_, 0, 1);
}

uint64_t Host2HostSemaphore::inbound() const { return __atomic_load_n(inbound_.get(), __ATOMIC_ACQUIRE); }

void Host2HostSemaphore::wait(std::chrono::milliseconds timeout) {
  ++expected_;
  if (timeout.count() < 0) timeout = comm_.defaultTimeout();
  Backoff backoff(timeout, connection_->notifiesWaiters());
  for (backoff.arm(); inbound() < expected_; backoff.arm()) {
    ConnectionImpl& c = *connection_->impl_;
    c.progress();  // a transport may need polling to land the signal; also finds a dead peer
    c.throwIfFailed();
    if (backoff.checkDue())
      if (auto notice = comm_.peerFailure()) throw *notice;  // a peer gave up: its signal may never come
    if (backoff.expired()) {
      throw Error(ErrorCode::Timeout,
                  "rank " + std::to_string(comm_.rank()) + ": semaphore wait for rank " +
                      std::to_string(connection_->remoteRank()) + " (host " + comm_.hostOf(connection_->remoteRank()) +
                      ") over " + connection_->transport() + " timed out after " + backoff.elapsedText() +
                      ": expected signal " + std::to_string(expected_) + ", received " + std::to_string(inbound()));
    }
    backoff.pause();
  }
}

}  // namespace plugboard
