#include "bootstrap/peer_links.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "bootstrap/io.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard::bootstrap {

PeerLinks::PeerLinks(const RankContext& ctx, uint64_t nonce, Rendezvous rendezvous,
                     std::chrono::milliseconds timeout)
    : ctx_(ctx),
      nonce_(nonce),
      timeout_(timeout),
      listener_(std::move(rendezvous.listener)),
      table_(std::move(rendezvous.table)),
      outgoing_(static_cast<size_t>(ctx.nranks)) {
  try {
    listener_.setNonBlocking(true);  // tryAccept loops until the backlog is empty
  } catch (const net::NetError& e) {
    rethrowNet(e, ctx_.who() + " cannot set up its listener");
  }
  wakeFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wakeFd_ < 0) throw Error(ErrorCode::System, ctx_.who() + ": eventfd: " + net::errnoText(errno));
}

PeerLinks::~PeerLinks() {
  if (wakeFd_ >= 0) close(wakeFd_);
}

void PeerLinks::abort() {
  abortEpoch_.fetch_add(1, std::memory_order_acq_rel);
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wakeFd_, &one, sizeof(one));  // EAGAIN: already readable
}

void PeerLinks::throwIfAborted() const {
  if (abortEpoch_.load(std::memory_order_acquire) != callEpoch_)
    throw Error(ErrorCode::Aborted, ctx_.who() + ": the bootstrap wait was aborted (Communicator::abort)");
}

// ---- sending -----------------------------------------------------------------

void PeerLinks::send(int peer, uint32_t space, int tag, const void* data, size_t size) {
  if (peer == ctx_.rank) {
    auto* p = static_cast<const char*>(data);
    stash_[Key{peer, space, tag}].emplace_back(p, p + size);
    return;
  }
  net::Deadline deadline = net::Deadline::after(timeout_);
  auto header = encodeFrameHeader(FrameHeader{kFrameMagic, space, tag, size});
  net::Socket& out = outgoing(peer, deadline);
  try {
    writeFrame(out, std::vector<uint8_t>(header.begin(), header.end()), data, size, deadline);
  } catch (const net::NetError& e) {
    if (e.kind() == net::NetErrorKind::Timeout)
      throw Error(ErrorCode::Timeout, ctx_.who() + " timed out after " + secondsText(timeout_) + " sending " +
                                          messageText(space, tag) + " (" + std::to_string(size) + " bytes) to " +
                                          peerText(peer) + ": it is not receiving");
    rethrowNet(e, ctx_.who() + " could not send " + messageText(space, tag) + " to " + peerText(peer));
  }
}

net::Socket& PeerLinks::outgoing(int peer, net::Deadline deadline) {
  net::Socket& s = outgoing_[static_cast<size_t>(peer)];
  if (s.valid()) return s;
  try {
    net::Socket c = net::Socket::connectTo(table_[static_cast<size_t>(peer)], deadline);
    c.setNoDelay();
    auto hello = encodeHello(Hello{HelloKind::Peer, nonce_, ctx_.rank, ctx_.nranks, net::SockAddr{}});
    c.sendAll(hello.data(), hello.size(), deadline);
    s = std::move(c);
  } catch (const net::NetError& e) {
    rethrowNet(e, ctx_.who() + " could not connect to " + peerText(peer) + " within " + secondsText(timeout_));
  }
  PB_LOG(Info, "BOOTSTRAP", ctx_.who() << " connected to " << peerText(peer));
  return s;
}

// Writes header then payload, serving incoming links whenever the socket is
// full so that a peer sending to us at the same time can make progress.
void PeerLinks::writeFrame(net::Socket& out, const std::vector<uint8_t>& header, const void* data, size_t size,
                           net::Deadline deadline) {
  const std::pair<const char*, size_t> pieces[] = {
      {reinterpret_cast<const char*>(header.data()), header.size()}, {static_cast<const char*>(data), size}};
  for (auto [p, left] : pieces) {
    while (left > 0) {
      size_t n = sendSome(out, p, left);
      p += n;
      left -= n;
      if (left == 0) break;
      throwIfAborted();
      if (deadline.expired()) throw net::NetError(net::NetErrorKind::Timeout, "send timed out");
      if (n == 0) progress(deadline, &out);
    }
  }
}

// ---- receiving ---------------------------------------------------------------

std::vector<char> PeerLinks::recv(int peer, uint32_t space, int tag) {
  const Key key{peer, space, tag};
  net::Deadline deadline = net::Deadline::after(timeout_);
  for (;;) {
    throwIfAborted();
    auto it = stash_.find(key);
    if (it != stash_.end() && !it->second.empty()) {
      std::vector<char> out = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) stash_.erase(it);
      return out;
    }
    InboundLink* in = inboundFrom(peer);
    if (peer == ctx_.rank || (in && in->closed()) || deadline.expired()) failRecv(peer, space, tag);
    progress(deadline, nullptr);
  }
}

bool PeerLinks::hasMessage(int peer, uint32_t space, int tag) {
  const Key key{peer, space, tag};
  auto found = [&] {
    auto it = stash_.find(key);
    return it != stash_.end() && !it->second.empty();
  };
  if (found()) return true;
  progress(net::Deadline::after(std::chrono::milliseconds(0)), nullptr);
  return found();
}

bool PeerLinks::peerClosed(int peer) {
  progress(net::Deadline::after(std::chrono::milliseconds(0)), nullptr);
  InboundLink* in = inboundFrom(peer);
  return in && in->closed();
}

void PeerLinks::failRecv(int peer, uint32_t space, int tag) {
  std::string what = messageText(space, tag);
  if (peer == ctx_.rank)
    throw Error(ErrorCode::InvalidUsage, ctx_.who() + " called recv from itself for " + what +
                                             ", but nothing was sent to itself under it");
  InboundLink* in = inboundFrom(peer);
  if (in && in->closed())
    throw Error(ErrorCode::Remote, ctx_.who() + ": " + peerText(peer) + " closed its connection (" +
                                       in->closeReason() + ") before sending " + what);
  throw Error(ErrorCode::Timeout, ctx_.who() + " timed out after " + secondsText(timeout_) + " waiting for " +
                                      what + " from " + peerText(peer) +
                                      (in ? "" : "; that rank has not connected to this one yet"));
}

// One wait: until a peer connects or sends, writable becomes writable, or
// the deadline passes.
void PeerLinks::progress(net::Deadline deadline, const net::Socket* writable) {
  try {
    std::vector<pollfd> fds{{listener_.fd(), POLLIN, 0}, {wakeFd_, POLLIN, 0}};
    if (writable) fds.push_back({writable->fd(), POLLOUT, 0});
    const size_t first = fds.size();
    std::vector<InboundLink*> polled;
    for (auto& l : inbound_) {
      if (l->closed()) continue;
      fds.push_back({l->fd(), POLLIN, 0});
      polled.push_back(l.get());
    }
    if (!pollAny(fds, deadline)) return;
    if (fds[1].revents != 0) {  // an abort: drain the eventfd so later waits block again
      uint64_t count = 0;
      [[maybe_unused]] ssize_t n = read(wakeFd_, &count, sizeof(count));
    }
    throwIfAborted();
    for (size_t i = 0; i < polled.size(); ++i)
      if (fds[first + i].revents != 0) serve(*polled[i]);
    inbound_.erase(std::remove_if(inbound_.begin(), inbound_.end(),
                                  [](const auto& l) { return l->rank() < 0 && (l->helloDone() || l->closed()); }),
                   inbound_.end());
    if (fds[0].revents != 0) acceptNew();
  } catch (const net::NetError& e) {
    rethrowNet(e, ctx_.who() + " failed while waiting for its peers");
  }
}

void PeerLinks::acceptNew() {
  for (net::Socket s = listener_.tryAccept(); s.valid(); s = listener_.tryAccept())
    inbound_.push_back(std::make_unique<InboundLink>(ctx_, std::move(s)));
}

// Reads what link has; files completed messages under the sender's rank.
void PeerLinks::serve(InboundLink& link) {
  std::vector<Frame> done;
  link.pump(done);
  if (link.rank() < 0) {
    if (!link.helloDone() || !admit(link)) return;
    link.pump(done);
  }
  for (auto& f : done) stash_[Key{link.rank(), f.space, f.tag}].push_back(std::move(f.payload));
}

bool PeerLinks::admit(InboundLink& link) {
  const Hello& h = link.hello();
  const char* why = nullptr;
  if (!link.helloValid() || h.kind != HelloKind::Peer) why = "it is not a Plugboard bootstrap peer";
  else if (h.nonce != nonce_) why = "it belongs to another job (different unique id)";
  else if (h.nranks != ctx_.nranks || h.rank < 0 || h.rank >= ctx_.nranks || h.rank == ctx_.rank)
    why = "its rank or number of ranks does not fit this job";
  if (why) {
    PB_LOG(Warn, "BOOTSTRAP", ctx_.who() << " ignored a connection from " << link.from() << ": " << why);
    return false;
  }
  if (InboundLink* twin = inboundFrom(h.rank))
    throw Error(ErrorCode::Remote, ctx_.who() + ": rank " + std::to_string(h.rank) + " connected twice (from " +
                                       twin->from() + " and " + link.from() +
                                       "); are two processes using the same rank?");
  link.identify(h.rank);
  PB_LOG(Info, "BOOTSTRAP", ctx_.who() << " accepted a connection from rank " << h.rank << " (" << link.from() << ")");
  return true;
}

InboundLink* PeerLinks::inboundFrom(int peer) {
  for (auto& l : inbound_)
    if (l->rank() == peer) return l.get();
  return nullptr;
}

std::string PeerLinks::peerText(int peer) const {
  return "rank " + std::to_string(peer) + " at " + table_[static_cast<size_t>(peer)].str();
}

std::string PeerLinks::messageText(uint32_t space, int tag) const {
  if (space == kCollectiveSpace) return "the allGather/barrier message";
  return "tag " + std::to_string(tag);
}

}  // namespace plugboard::bootstrap
