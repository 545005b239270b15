// Point-to-point messaging between ranks after the rendezvous: one lazily
// opened outgoing connection per peer, one accepted incoming connection per
// peer, and a stash of messages that arrived before anyone asked for them.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "bootstrap/context.hpp"
#include "bootstrap/inbound_link.hpp"
#include "bootstrap/rendezvous.hpp"

namespace plugboard::bootstrap {

/// Message spaces: user tags and the collectives' internal traffic never mix.
constexpr uint32_t kUserSpace = 0;
constexpr uint32_t kCollectiveSpace = 1;

/// Framed, tagged messages to and from every peer. Every wait reads all
/// incoming connections, so two ranks sending to each other never deadlock
/// on full socket buffers. Single-threaded.
class PeerLinks {
 public:
  PeerLinks(const RankContext& ctx, uint64_t nonce, Rendezvous rendezvous, std::chrono::milliseconds timeout);
  ~PeerLinks();
  PeerLinks(const PeerLinks&) = delete;
  PeerLinks& operator=(const PeerLinks&) = delete;

  /// Sends one message; returns once it is handed to the kernel. A message
  /// to this rank itself is queued locally.
  void send(int peer, uint32_t space, int tag, const void* data, size_t size);
  /// The next message from peer in (space, tag), waiting up to the timeout.
  std::vector<char> recv(int peer, uint32_t space, int tag);
  /// True when that message has arrived (stashed or readable now); reads
  /// what the sockets hold without waiting.
  bool hasMessage(int peer, uint32_t space, int tag);
  /// True when peer's connection to this rank has closed (read without
  /// waiting); its stashed messages stay readable.
  bool peerClosed(int peer);
  /// Marks the start of one bootstrap call (its sends and recvs): an
  /// abort() after this point ends the call's waits.
  void beginCall() { callEpoch_ = abortEpoch_.load(std::memory_order_acquire); }
  /// From any thread: the call waiting now throws Error(Aborted); calls
  /// begun later run as usual.
  void abort();

 private:
  using Key = std::tuple<int, uint32_t, int>;  // peer, space, tag

  net::Socket& outgoing(int peer, net::Deadline deadline);
  void writeFrame(net::Socket& out, const std::vector<uint8_t>& header, const void* data, size_t size,
                  net::Deadline deadline);
  void progress(net::Deadline deadline, const net::Socket* writable);
  void acceptNew();
  void serve(InboundLink& link);
  bool admit(InboundLink& link);
  InboundLink* inboundFrom(int peer);
  std::string peerText(int peer) const;
  std::string messageText(uint32_t space, int tag) const;
  [[noreturn]] void failRecv(int peer, uint32_t space, int tag);
  /// Throws Error(Aborted) when abort() was called since beginCall().
  void throwIfAborted() const;

  const RankContext& ctx_;
  uint64_t nonce_;
  std::chrono::milliseconds timeout_;
  net::Socket listener_;
  std::vector<net::SockAddr> table_;
  std::vector<net::Socket> outgoing_;                  // by peer rank
  std::vector<std::unique_ptr<InboundLink>> inbound_;  // identified or not yet
  std::map<Key, std::deque<std::vector<char>>> stash_;
  std::atomic<uint64_t> abortEpoch_{0};  // abort() calls so far
  uint64_t callEpoch_ = 0;               // abortEpoch_ when the current send/recv began
  int wakeFd_ = -1;                      // eventfd in every poll: abort() makes it readable
};

}  // namespace plugboard::bootstrap
