#include <algorithm>

#include "bootstrap/rendezvous.hpp"
#include "bootstrap/wire.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard::bootstrap {
namespace {

// Where a non-root rank listens: the interface interfaceSpec selects (same
// family as the root if possible), else the local end of the root connection,
// which the root's network can reach.
net::SockAddr listenAddress(const RankContext& ctx, const net::Socket& toRoot, const IdContents& id,
                            const std::string& interfaceSpec) {
  if (interfaceSpec.empty()) {
    net::SockAddr a = toRoot.localAddress();
    a.setPort(0);
    return a;
  }
  auto chosen = net::selectInterfaces(net::listInterfaces(), interfaceSpec);
  if (chosen.empty())
    throw Error(ErrorCode::Config, ctx.who() + ": no network interface matches '" + interfaceSpec + "'");
  for (const auto& itf : chosen)
    if (itf.address.family() == id.root.family()) return itf.address;
  return chosen.front().address;
}

net::Socket connectRoot(const RankContext& ctx, const IdContents& id, std::chrono::milliseconds timeout,
                        net::Deadline deadline) {
  if (id.root.port() == 0)
    throw Error(ErrorCode::InvalidUsage, ctx.who() + ": the unique id's root address " + id.root.str() +
                                             " has no port; other ranks cannot reach it");
  try {
    net::Socket s = net::Socket::connectTo(id.root, deadline);
    s.setNoDelay();
    return s;
  } catch (const net::NetError& e) {
    rethrowNet(e, ctx.who() + " could not reach the root (rank 0) at " + id.root.str() + " within " +
                      secondsText(timeout));
  }
}

[[noreturn]] void throwRootAbort(const RankContext& ctx, const IdContents& id, net::Socket& root,
                                 const ReplyHeader& h, net::Deadline deadline) {
  std::string why(h.size, '\0');
  root.recvAll(why.data(), why.size(), deadline);
  const std::string prefix = "bootstrap: ";
  if (why.compare(0, prefix.size(), prefix) == 0) why.erase(0, prefix.size());
  uint32_t code = h.status - 1;
  auto ec = code <= static_cast<uint32_t>(ErrorCode::Internal) ? static_cast<ErrorCode>(code) : ErrorCode::Remote;
  throw Error(ec, ctx.who() + ": the root (rank 0 at " + id.root.str() + ") ended the rendezvous: " + why);
}

std::vector<net::SockAddr> readTable(const RankContext& ctx, const IdContents& id, net::Socket& root,
                                     net::Deadline deadline) {
  std::array<uint8_t, kReplyHeaderBytes> raw{};
  root.recvAll(raw.data(), raw.size(), deadline);
  ReplyHeader h;
  if (!decodeReplyHeader(raw.data(), h) || h.size > kMaxFrameBytes)
    throw Error(ErrorCode::Remote, ctx.who() + ": the root at " + id.root.str() +
                                       " answered with bytes that are not a Plugboard bootstrap reply");
  if (h.status != 0) throwRootAbort(ctx, id, root, h, deadline);
  std::vector<uint8_t> payload(h.size);
  root.recvAll(payload.data(), payload.size(), deadline);
  std::vector<net::SockAddr> table;
  if (!decodeAddressTable(payload, ctx.nranks, table))
    throw Error(ErrorCode::Remote, ctx.who() + ": the root at " + id.root.str() + " sent a malformed address table");
  return table;
}

}  // namespace

Rendezvous joinRoot(const RankContext& ctx, const IdContents& id, std::chrono::milliseconds timeout,
                    const std::string& interfaceSpec) {
  net::Deadline deadline = net::Deadline::after(timeout);
  net::Socket root = connectRoot(ctx, id, timeout, deadline);
  // The root's own timer may have started a little later than ours; waiting
  // a bit longer for its answer lets its abort (naming the missing ranks)
  // reach us instead of a bare timeout.
  const auto replyWait = timeout + std::min<std::chrono::milliseconds>(timeout / 2, std::chrono::seconds(5));
  net::Deadline replyDeadline = net::Deadline::after(replyWait);
  Rendezvous out;
  try {
    out.listener = net::Socket::listenOn(listenAddress(ctx, root, id, interfaceSpec));
    Hello hello{HelloKind::Join, id.nonce, ctx.rank, ctx.nranks, out.listener.localAddress()};
    auto bytes = encodeHello(hello);
    root.sendAll(bytes.data(), bytes.size(), deadline);
    PB_LOG(Info, "BOOTSTRAP", ctx.who() << " joined the root at " << id.root.str() << ", listens on "
                                        << hello.listen.str());
    out.table = readTable(ctx, id, root, replyDeadline);
  } catch (const net::NetError& e) {
    std::string what = e.kind() == net::NetErrorKind::Timeout
        ? " heard nothing back from the root (rank 0) at " + id.root.str() + " within " + secondsText(replyWait) +
              " (the root answers once every rank has joined)"
        : " lost the root (rank 0) at " + id.root.str() + " during the rendezvous";
    rethrowNet(e, ctx.who() + what);
  }
  return out;
}

}  // namespace plugboard::bootstrap
