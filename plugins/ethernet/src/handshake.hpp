// Connection set-up: the address blob exchanged through the core, and the
// non-blocking state machine proxy_connect() drives until both sockets of a
// connection are up.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "context.hpp"
#include "net/socket.hpp"
#include "wire.hpp"

namespace plugboard::ethernet {

/// Writes the address blob {magic, version, rank, listen address} for
/// setup(); *len is the room on entry and the size used on return.
void encodeAddress(int rank, const net::SockAddr& listen, void* out, size_t* len);

/// Parses the peer's blob; throws Error(PB_ERR_INVALID) naming the peer when
/// its size, magic, version, rank or address family is wrong.
net::SockAddr decodeAddress(const void* blob, size_t len, const PeerInfo& peer);

/// Brings up a connection's two sockets without ever blocking:
///  - outbound: connect to the peer's listener (retrying while refused,
///    because the peer may not listen yet), then send our hello;
///  - inbound: accept one connection on our listener, read its hello and
///    check it comes from the expected peer for us.
class Handshake {
 public:
  /// listener: ours, already listening. bufferBytes: socket buffer setting.
  /// warn: logs a warning (connect attempts failing for a second, once).
  Handshake(net::Socket listener, int selfRank, PeerInfo peer, int bufferBytes,
            std::function<void(const std::string&)> warn);

  /// Advances both halves; true once both sockets are connected and greeted.
  /// Throws Error: PB_ERR_REMOTE for a wrong hello or a peer that closed
  /// during set-up, PB_ERR_SYSTEM for other socket failures.
  bool step(const net::SockAddr& peerListen);
  /// Our socket to the peer (our writes); valid after step() returned true.
  net::Socket takeOutbound() { return std::move(outbound_); }
  /// The peer's socket to us (its writes); valid after step() returned true.
  net::Socket takeInbound() { return std::move(inbound_); }

 private:
  /// Connect (retrying refusals every few ms), then send our hello.
  bool stepOutbound(const net::SockAddr& peerListen);
  /// Accept one connection, then read and check its hello.
  bool stepInbound();
  /// Throws Error(PB_ERR_REMOTE) unless the hello is from the peer to us.
  void checkHello() const;
  /// "ethernet set-up of rank A with rank B (host H)", for messages.
  std::string who() const;
  /// Records a failed connect attempt (retried); warns once when they have
  /// gone on for kWarnAfter, naming the address and the last error.
  void connectFailed(const net::SockAddr& peerListen, const std::string& error);

  net::Socket listener_;
  int selfRank_;
  PeerInfo peer_;
  int bufferBytes_;

  net::Socket outbound_;
  bool outConnected_ = false;
  size_t helloSent_ = 0;
  uint8_t helloOut_[wire::Hello::kSize];
  std::chrono::steady_clock::time_point nextAttempt_{};
  std::function<void(const std::string&)> warn_;
  std::chrono::steady_clock::time_point firstFailure_{};
  bool warned_ = false;

  net::Socket inbound_;
  size_t helloReceived_ = 0;
  uint8_t helloIn_[wire::Hello::kSize];
};

}  // namespace plugboard::ethernet
