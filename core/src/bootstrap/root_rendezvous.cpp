#include <array>

#include "bootstrap/io.hpp"
#include "bootstrap/rendezvous.hpp"
#include "bootstrap/wire.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard::bootstrap {
namespace {

/// Sends a refusal (code and message) as the reply to a join, within 500 ms;
/// a peer that is gone does not need the reason.
void sendRefusal(net::Socket& s, ErrorCode code, const std::string& message) {
  auto header = encodeReplyHeader({static_cast<uint32_t>(code) + 1, static_cast<uint32_t>(message.size())});
  try {
    auto quick = net::Deadline::after(std::chrono::milliseconds(500));
    s.sendAll(header.data(), header.size(), quick);
    s.sendAll(message.data(), message.size(), quick);
  } catch (const net::NetError&) {
  }
}

// An accepted connection whose hello has not fully arrived yet.
struct PendingJoin {
  net::Socket sock;
  std::string from;
  std::array<uint8_t, kHelloBytes> hello{};
  size_t got = 0;
};

// Rank 0's side of the rendezvous: one object per run, single-threaded.
class RootRendezvous {
 public:
  RootRendezvous(const RankContext& ctx, const IdContents& id, std::chrono::milliseconds timeout)
      : ctx_(ctx), id_(id), timeout_(timeout), joined_(ctx.nranks), table_(ctx.nranks) {}

  Rendezvous run();

 private:
  net::Socket openListener() const;
  void waitOnce(net::Deadline deadline);
  void acceptPending();
  bool readHello(PendingJoin& p);
  void admit(PendingJoin& p, const Hello& hello);
  void sendTables(net::Deadline deadline);
  [[noreturn]] void failTimeout();
  [[noreturn]] void abortJob(ErrorCode code, const std::string& message);

  const RankContext& ctx_;
  const IdContents& id_;
  std::chrono::milliseconds timeout_;
  net::Socket listener_;
  std::vector<PendingJoin> pending_;
  std::vector<net::Socket> joined_;  // by rank; [0] unused
  std::vector<net::SockAddr> table_;
  int joinedCount_ = 0;
};

Rendezvous RootRendezvous::run() {
  listener_ = openListener();
  table_[0] = id_.root;
  PB_LOG(Info, "BOOTSTRAP", ctx_.who() << " is the root at " << id_.root.str() << ", waiting for "
                                       << ctx_.nranks - 1 << " rank(s)");
  net::Deadline deadline = net::Deadline::after(timeout_);
  try {
    while (joinedCount_ < ctx_.nranks - 1) {
      if (deadline.expired()) failTimeout();
      waitOnce(deadline);
    }
  } catch (const net::NetError& e) {
    rethrowNet(e, ctx_.who() + " failed while waiting for ranks to join at " + id_.root.str());
  }
  sendTables(deadline);
  return Rendezvous{std::move(listener_), table_};
}

net::Socket RootRendezvous::openListener() const {
  net::Socket s = takeRootListener(id_.nonce);
  try {
    if (!s.valid()) s = net::Socket::listenOn(id_.root);
    s.setNonBlocking(true);  // tryAccept loops until the backlog is empty
    return s;
  } catch (const net::NetError& e) {
    std::string why = id_.created
        ? " (the id came from createUniqueId: rank 0 must run in the process that created it or in a "
          "child forked from it)"
        : " (is rank 0 on that host, and is the port free?)";
    throw Error(errorCodeFor(e), ctx_.who() + " cannot listen on the root address " + id_.root.str() +
                                     why + ": " + e.what());
  }
}

void RootRendezvous::waitOnce(net::Deadline deadline) {
  std::vector<pollfd> fds{{listener_.fd(), POLLIN, 0}};
  for (const auto& p : pending_) fds.push_back({p.sock.fd(), POLLIN, 0});
  if (!pollAny(fds, deadline)) return;
  for (size_t i = pending_.size(); i-- > 0;) {
    if (fds[i + 1].revents == 0) continue;
    if (readHello(pending_[i])) pending_.erase(pending_.begin() + static_cast<long>(i));
  }
  if (fds[0].revents != 0) acceptPending();
}

void RootRendezvous::acceptPending() {
  for (net::Socket s = listener_.tryAccept(); s.valid(); s = listener_.tryAccept()) {
    PendingJoin p;
    p.from = peerAddressText(s);
    p.sock = std::move(s);
    pending_.push_back(std::move(p));
  }
}

// True when p is done with: admitted or dropped.
bool RootRendezvous::readHello(PendingJoin& p) {
  try {
    p.got += recvSome(p.sock, p.hello.data() + p.got, kHelloBytes - p.got);
  } catch (const net::NetError& e) {
    PB_LOG(Warn, "BOOTSTRAP", ctx_.who() << " dropped a connection from " << p.from
                                         << " before it said hello: " << e.what());
    return true;
  }
  if (p.got < kHelloBytes) return false;
  Hello hello;
  if (!decodeHello(p.hello.data(), hello) || hello.kind != HelloKind::Join) {
    PB_LOG(Warn, "BOOTSTRAP", ctx_.who() << " ignored a connection from " << p.from
                                         << ": not a Plugboard bootstrap join of this version");
    return true;
  }
  if (hello.nonce != id_.nonce) {
    PB_LOG(Warn, "BOOTSTRAP", ctx_.who() << " refused rank " << hello.rank << " from " << p.from
                                         << ": it belongs to another job (different unique id or job id)");
    sendRefusal(p.sock, ErrorCode::Config,
                ctx_.who() + " at " + id_.root.str() + " serves another job: the unique id differs (from " +
                    "another createUniqueId, or another job id: every rank needs the same PLUGBOARD_JOB_ID or " +
                    "launcher job, see launchInfoFromEnvironment); this rank was not admitted");
    return true;
  }
  admit(p, hello);
  return true;
}

void RootRendezvous::admit(PendingJoin& p, const Hello& hello) {
  std::string peer = "rank " + std::to_string(hello.rank) + " (from " + p.from + ")";
  if (hello.nranks != ctx_.nranks) {
    joined_[0] = std::move(p.sock);  // slot 0 is free: lets abortJob tell this rank too
    abortJob(ErrorCode::Remote, "bootstrap: rank 0 (host " + ctx_.host + ") and " + peer +
                                    " disagree on the number of ranks: rank 0 has " +
                                    std::to_string(ctx_.nranks) + ", rank " + std::to_string(hello.rank) +
                                    " has " + std::to_string(hello.nranks));
  }
  if (hello.rank <= 0 || hello.rank >= ctx_.nranks || joined_[hello.rank].valid()) {
    joined_[0] = std::move(p.sock);
    abortJob(ErrorCode::Remote, ctx_.who() + ": " + peer + " tried to join, but that rank " +
                                    (hello.rank == 0 ? "is the root" : "has already joined") +
                                    "; every process needs its own rank in 0.." +
                                    std::to_string(ctx_.nranks - 1));
  }
  joined_[hello.rank] = std::move(p.sock);
  table_[hello.rank] = hello.listen;
  ++joinedCount_;
  PB_LOG(Info, "BOOTSTRAP", ctx_.who() << ": " << peer << " joined, listens on " << hello.listen.str() << " ("
                                       << joinedCount_ << " of " << ctx_.nranks - 1 << ")");
}

void RootRendezvous::sendTables(net::Deadline deadline) {
  std::vector<uint8_t> payload = encodeAddressTable(table_);
  auto header = encodeReplyHeader({0, static_cast<uint32_t>(payload.size())});
  for (int r = 1; r < ctx_.nranks; ++r) {
    try {
      joined_[r].sendAll(header.data(), header.size(), deadline);
      joined_[r].sendAll(payload.data(), payload.size(), deadline);
    } catch (const net::NetError& e) {
      rethrowNet(e, ctx_.who() + " could not send the address table to rank " + std::to_string(r));
    }
  }
  PB_LOG(Info, "BOOTSTRAP", ctx_.who() << ": all " << ctx_.nranks << " ranks joined");
}

void RootRendezvous::failTimeout() {
  std::vector<int> missing;
  for (int r = 1; r < ctx_.nranks; ++r)
    if (!joined_[r].valid()) missing.push_back(r);
  std::string list = rankListText(missing);
  abortJob(ErrorCode::Timeout, ctx_.who() + " timed out after " + secondsText(timeout_) + " waiting for rank" +
                                   (missing.size() > 1 ? "s " : " ") + list + " to join at " +
                                   id_.root.str() + "; ranks that never joined: " + list);
}

void RootRendezvous::abortJob(ErrorCode code, const std::string& message) {
  for (auto& s : joined_)
    if (s.valid()) sendRefusal(s, code, message);
  throw Error(code, message);
}

}  // namespace

Rendezvous runRoot(const RankContext& ctx, const IdContents& id, std::chrono::milliseconds timeout) {
  return RootRendezvous(ctx, id, timeout).run();
}

std::string rankListText(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace plugboard::bootstrap
