#include "handshake.hpp"

#include <arpa/inet.h>

#include <cstring>

#include "error.hpp"

namespace plugboard::ethernet {

namespace {

/// Pause between connect attempts the peer refused (it may not listen yet).
constexpr std::chrono::milliseconds kRetryInterval{10};
/// Connect attempts failing this long get a warning: the peer has listened
/// since before the addresses were exchanged, so it is a routing problem.
constexpr std::chrono::seconds kWarnAfter{1};

}  // namespace

void encodeAddress(int rank, const net::SockAddr& listen, void* out, size_t* len) {
  ETH_CHECK(out && len, PB_ERR_INVALID, "setup: address buffer and length must not be NULL");
  size_t room = *len;
  *len = wire::AddressBlob::kSize;
  ETH_CHECK(room >= wire::AddressBlob::kSize, PB_ERR_INVALID,
            "setup: address buffer of " + std::to_string(room) + " bytes is smaller than the " +
                std::to_string(wire::AddressBlob::kSize) + " an ethernet address needs");
  wire::AddressBlob blob{wire::kAddressMagic, wire::kVersion, rank, 0, listen.port(), {}};
  if (listen.family() == AF_INET) {
    blob.family = 4;
    std::memcpy(blob.address.data(), &reinterpret_cast<const sockaddr_in*>(&listen.storage)->sin_addr, 4);
  } else {
    blob.family = 6;
    std::memcpy(blob.address.data(), &reinterpret_cast<const sockaddr_in6*>(&listen.storage)->sin6_addr, 16);
  }
  blob.encode(static_cast<uint8_t*>(out));
}

net::SockAddr decodeAddress(const void* data, size_t len, const PeerInfo& peer) {
  std::string from = "ethernet address blob from " + peer.describe();
  ETH_CHECK(data, PB_ERR_INVALID, from + " is NULL");
  ETH_CHECK(len == wire::AddressBlob::kSize, PB_ERR_INVALID,
            from + " is " + std::to_string(len) + " bytes, expected " + std::to_string(wire::AddressBlob::kSize));
  auto blob = wire::AddressBlob::decode(static_cast<const uint8_t*>(data));
  ETH_CHECK(blob.magic == wire::kAddressMagic, PB_ERR_INVALID, from + " has a bad magic (not an ethernet blob?)");
  ETH_CHECK(blob.version == wire::kVersion, PB_ERR_INVALID,
            from + " has format version " + std::to_string(blob.version) + ", this plugin speaks " +
                std::to_string(wire::kVersion));
  ETH_CHECK(blob.rank == peer.rank, PB_ERR_INVALID, from + " was written by rank " + std::to_string(blob.rank));
  net::SockAddr addr;
  if (blob.family == 4) {
    auto* in4 = reinterpret_cast<sockaddr_in*>(&addr.storage);
    in4->sin_family = AF_INET;
    std::memcpy(&in4->sin_addr, blob.address.data(), 4);
    addr.length = sizeof(sockaddr_in);
  } else {
    ETH_CHECK(blob.family == 6, PB_ERR_INVALID, from + " has unknown address family " + std::to_string(blob.family));
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr.storage);
    in6->sin6_family = AF_INET6;
    std::memcpy(&in6->sin6_addr, blob.address.data(), 16);
    addr.length = sizeof(sockaddr_in6);
  }
  addr.setPort(blob.port);
  return addr;
}

Handshake::Handshake(net::Socket listener, int selfRank, PeerInfo peer, int bufferBytes, uint32_t stripes,
                     std::function<void(const std::string&)> warn)
    : listener_(std::move(listener)),
      selfRank_(selfRank),
      peer_(std::move(peer)),
      bufferBytes_(bufferBytes),
      stripes_(stripes),
      warn_(std::move(warn)) {}

std::string Handshake::who() const {
  return "ethernet set-up of rank " + std::to_string(selfRank_) + " with " + peer_.describe();
}

bool Handshake::step(const net::SockAddr& peerListen) {
  try {
    bool out = stepOutbound(peerListen);
    bool in = stepInbound();
    return out && in;
  } catch (const net::NetError& e) {
    pb_status st = e.kind() == net::NetErrorKind::Closed ? PB_ERR_REMOTE : PB_ERR_SYSTEM;
    throw Error(st, who() + ": " + e.what());
  }
}

void Handshake::connectFailed(const net::SockAddr& peerListen, const std::string& error) {
  nextAttempt_ = std::chrono::steady_clock::now() + kRetryInterval;
  if (firstFailure_ == std::chrono::steady_clock::time_point{}) firstFailure_ = std::chrono::steady_clock::now();
  if (warned_ || std::chrono::steady_clock::now() - firstFailure_ < kWarnAfter) return;
  warned_ = true;
  warn_(who() + ": connecting to its address " + peerListen.str() + " has failed for " +
        std::to_string(kWarnAfter.count()) + " s (" + error + "); retrying until the set-up timeout. Is that " +
        "address reachable from this host? The ethernet plugin's ifname setting chooses each rank's interface.");
}

bool Handshake::stepOutbound(const net::SockAddr& peerListen) {
  while (outbound_.size() < size_t(stripes_) + 1) {
    if (!stepOneOutbound(peerListen)) return false;
    outbound_.push_back(std::move(connecting_));
    outConnected_ = false;
    helloSent_ = 0;
  }
  return true;
}

bool Handshake::stepOneOutbound(const net::SockAddr& peerListen) {
  if (!connecting_.valid()) {
    if (std::chrono::steady_clock::now() < nextAttempt_) return false;
    try {
      connecting_ = net::Socket::beginConnect(peerListen, bufferBytes_);
    } catch (const net::NetError& e) {
      if (e.kind() != net::NetErrorKind::Invalid) throw;
      connectFailed(peerListen, e.what());
    }
    return false;
  }
  if (!outConnected_) {
    try {
      outConnected_ = connecting_.connectFinished();
    } catch (const net::NetError& e) {
      if (e.kind() != net::NetErrorKind::Invalid) throw;
      connecting_ = net::Socket();  // Refused or unreachable: retry.
      connectFailed(peerListen, e.what());
      return false;
    }
    if (!outConnected_) return false;
    wire::Hello{wire::kHelloMagic, wire::kVersion, selfRank_, peer_.rank, uint32_t(outbound_.size()), stripes_}
        .encode(helloOut_);
  }
  helloSent_ += connecting_.sendSome(helloOut_ + helloSent_, sizeof(helloOut_) - helloSent_);
  return helloSent_ == sizeof(helloOut_);
}

bool Handshake::stepInbound() {
  for (;;) {
    bool expectMore = inbound_.empty() || inboundFiled_ + greetings_.size() < inbound_.size();
    if (!expectMore || !listener_.valid()) break;
    net::Socket accepted = listener_.tryAccept();
    if (!accepted.valid()) break;
    greetings_.push_back(Greeting{std::move(accepted)});
  }
  for (size_t i = 0; i < greetings_.size();) {
    Greeting& g = greetings_[i];
    g.received += g.socket.recvSome(g.hello + g.received, sizeof(g.hello) - g.received);
    if (g.received < sizeof(g.hello)) {
      ++i;
      continue;
    }
    acceptGreeting(g);
    greetings_.erase(greetings_.begin() + i);
  }
  bool done = !inbound_.empty() && inboundFiled_ == inbound_.size();
  if (done) listener_ = net::Socket();  // Every socket of the peer is in: stop accepting.
  return done;
}

void Handshake::acceptGreeting(Greeting& greeting) {
  auto hello = wire::Hello::decode(greeting.hello);
  ETH_CHECK(hello.magic == wire::kHelloMagic, PB_ERR_REMOTE,
            who() + ": an inbound connection did not start with an ethernet hello (bad magic); "
                    "something other than the peer connected to our port");
  ETH_CHECK(hello.version == wire::kVersion, PB_ERR_REMOTE,
            who() + ": the peer speaks wire version " + std::to_string(hello.version) + ", we speak " +
                std::to_string(wire::kVersion) + " (mixed plugin versions?)");
  ETH_CHECK(hello.fromRank == peer_.rank && hello.toRank == selfRank_, PB_ERR_REMOTE,
            who() + ": the inbound connection is from rank " + std::to_string(hello.fromRank) + " for rank " +
                std::to_string(hello.toRank) + ", expected rank " + std::to_string(peer_.rank) + " for rank " +
                std::to_string(selfRank_));
  ETH_CHECK(hello.stripes <= kMaxStripes, PB_ERR_REMOTE,
            who() + ": the peer announces " + std::to_string(hello.stripes) + " stripe sockets (at most " +
                std::to_string(kMaxStripes) + ")");
  if (inbound_.empty()) inbound_.resize(size_t(hello.stripes) + 1);
  ETH_CHECK(hello.stripes + 1 == inbound_.size(), PB_ERR_REMOTE,
            who() + ": the peer's sockets disagree on its stripe count (" + std::to_string(hello.stripes) +
                " vs " + std::to_string(inbound_.size() - 1) + ")");
  ETH_CHECK(hello.socket < inbound_.size() && !inbound_[hello.socket].valid(), PB_ERR_REMOTE,
            who() + ": the peer greeted socket " + std::to_string(hello.socket) + " twice or out of range");
  inbound_[hello.socket] = std::move(greeting.socket);
  ++inboundFiled_;
}

}  // namespace plugboard::ethernet
