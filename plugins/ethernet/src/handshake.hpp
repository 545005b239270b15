// Connection set-up: the address blob exchanged through the core, and the
// non-blocking state machine proxy_connect() drives until both sockets of a
// connection are up.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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

/// Brings up a connection's sockets without ever blocking:
///  - outbound: for each of our sockets in turn (0: the frame stream, then
///    each stripe socket), connect to the peer's listener (retrying while
///    refused, because the peer may not listen yet), then send a hello
///    naming the socket and our stripe count;
///  - inbound: accept on our listener until the peer's frame stream and
///    each of its stripe sockets (its hellos say how many) have come in,
///    reading and checking every hello.
class Handshake {
 public:
  /// listener: ours, already listening. bufferBytes: socket buffer setting.
  /// stripes: how many stripe sockets we open. warn: logs a warning
  /// (connect attempts failing for a second, once).
  Handshake(net::Socket listener, int selfRank, PeerInfo peer, int bufferBytes, uint32_t stripes,
            std::function<void(const std::string&)> warn);

  /// Advances both halves; true once every socket is connected and greeted.
  /// Throws Error: PB_ERR_REMOTE for a wrong hello or a peer that closed
  /// during set-up, PB_ERR_SYSTEM for other socket failures.
  bool step(const net::SockAddr& peerListen);
  /// Our sockets to the peer (our writes), frame stream first; valid after
  /// step() returned true.
  std::vector<net::Socket> takeOutbound() { return std::move(outbound_); }
  /// The peer's sockets to us (its writes), frame stream first; valid after
  /// step() returned true.
  std::vector<net::Socket> takeInbound() { return std::move(inbound_); }

 private:
  /// An accepted socket whose hello is still arriving.
  struct Greeting {
    net::Socket socket;
    size_t received = 0;
    uint8_t hello[wire::Hello::kSize] = {};
  };

  /// Connects and greets our sockets one after the other.
  bool stepOutbound(const net::SockAddr& peerListen);
  /// Connect (retrying refusals every few ms), then send the hello of the
  /// socket being brought up; true once it is greeted.
  bool stepOneOutbound(const net::SockAddr& peerListen);
  /// Accepts what is pending and reads hellos; true once all are in.
  bool stepInbound();
  /// Checks greeting's complete hello and files its socket by number.
  void acceptGreeting(Greeting& greeting);
  /// "ethernet set-up of rank A with rank B (host H)", for messages.
  std::string who() const;
  /// Records a failed connect attempt (retried); warns once when they have
  /// gone on for kWarnAfter, naming the address and the last error.
  void connectFailed(const net::SockAddr& peerListen, const std::string& error);

  net::Socket listener_;
  int selfRank_;
  PeerInfo peer_;
  int bufferBytes_;
  uint32_t stripes_;

  std::vector<net::Socket> outbound_;  // greeted sockets, in order
  net::Socket connecting_;             // the next one, being brought up
  bool outConnected_ = false;
  size_t helloSent_ = 0;
  uint8_t helloOut_[wire::Hello::kSize];
  std::chrono::steady_clock::time_point nextAttempt_{};
  std::function<void(const std::string&)> warn_;
  std::chrono::steady_clock::time_point firstFailure_{};
  bool warned_ = false;

  std::vector<Greeting> greetings_;  // accepted, hello incomplete
  std::vector<net::Socket> inbound_;  // by socket number once the first hello came
  size_t inboundFiled_ = 0;
};

}  // namespace plugboard::ethernet
