// One of our stripe sockets to a peer: a thread that sends the pieces of
// striped writes with blocking sends while the frame stream and the caller
// go on (the helper threads of NCCL's socket transport play this part).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "net/socket.hpp"
#include "wire.hpp"

namespace plugboard::ethernet {

/// Sends the pieces posted to it, in posting order, on its own socket.
class SendLane {
 public:
  /// A Piece frame: its header (the whole write's offset and length) and
  /// this socket's part of the source.
  struct Piece {
    wire::FrameHeader header;
    const char* payload = nullptr;
    size_t length = 0;
  };

  /// Takes the socket and starts the thread. changed() is called, with no
  /// lock of this lane held, after each piece is sent and when the lane fails.
  SendLane(net::Socket socket, std::function<void()> changed);
  /// Stops (see stop()).
  ~SendLane();
  SendLane(const SendLane&) = delete;
  SendLane& operator=(const SendLane&) = delete;

  /// Queues a piece; its source must stay valid until sentSeq() reaches it.
  void post(const Piece& piece);
  /// Sequence number of the last piece whose every byte is sent.
  uint64_t sentSeq() const { return sentSeq_.load(std::memory_order_acquire); }
  /// The socket error that stopped the lane, if any.
  std::optional<net::NetError> failure() const;
  /// The lane's socket, for watching it for errors (its descriptor stays
  /// valid until the lane is destroyed; stop() only shuts it down).
  const net::Socket& socket() const { return socket_; }
  /// Drops queued pieces, shuts the socket down (waking a blocked send) and
  /// joins the thread. Never throws.
  void stop() noexcept;

 private:
  /// Thread body: sends pieces until stopped or failed.
  void run();
  /// Waits for the next piece; false once stopped.
  bool next(Piece* piece);

  net::Socket socket_;
  std::function<void()> changed_;
  std::atomic<uint64_t> sentSeq_{0};
  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::deque<Piece> queue_;
  bool stopping_ = false;
  std::optional<net::NetError> failure_;
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace plugboard::ethernet
