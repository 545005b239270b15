// One of the peer's stripe sockets to us: a thread that receives the pieces
// of its striped writes straight into our registered memory. The frame
// stream's parser (receive.cpp) applies a striped write, and the signal
// after it, only once every stripe socket has delivered its piece and the
// pieces match the write's header.
#pragma once

#include <plugboard/transport.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "memory.hpp"
#include "net/socket.hpp"
#include "wire.hpp"

namespace plugboard::ethernet {

/// Receives pieces, in stream order, on its own socket.
class ReceiveLane {
 public:
  /// A piece that has landed: the header fields the frame stream checks.
  struct Landed {
    uint64_t seq, region, key, offset, length;
  };
  /// What the lane tells its connection.
  struct Hooks {
    std::function<void()> landed;  ///< A piece landed or the lane ended (no lane lock held).
    std::function<void(pb_status, const std::string&)> fail;  ///< A bad piece: final.
  };

  /// Takes the socket and starts the thread. index/count: this socket's
  /// place among the peer's stripe sockets; peer: "rank N (host H)".
  ReceiveLane(net::Socket socket, uint32_t index, uint32_t count, RegionRegistry& regions, std::string peer,
              Hooks hooks);
  /// Stops (see stop()).
  ~ReceiveLane();
  ReceiveLane(const ReceiveLane&) = delete;
  ReceiveLane& operator=(const ReceiveLane&) = delete;

  /// The oldest landed piece the frame stream has not taken yet.
  std::optional<Landed> front() const;
  /// Drops front().
  void pop();
  /// True once the socket ended (the peer closed it, or an error); no more
  /// pieces will land.
  bool ended() const { return ended_.load(std::memory_order_acquire); }
  /// Shuts the socket down and joins the thread. Never throws.
  void stop() noexcept;

 private:
  /// Thread body: receives pieces until the socket ends or a piece is bad.
  void run();
  /// Reads exactly size bytes of header into out; throws NetError(Closed)
  /// at the end of the stream.
  void readHeader(uint8_t* out, size_t size);
  /// Checks a piece header; returns where its payload goes (region offset).
  wire::PieceRange checkPiece(const wire::FrameHeader& h);
  /// Receives the piece's payload into region + offset, pinning the region
  /// for each read only.
  void receivePayload(const wire::FrameHeader& h, wire::PieceRange range);
  /// Waits (bounded, so stop() is noticed) until the socket is readable;
  /// false when stopping.
  bool waitReadable();
  /// Throws Error(PB_ERR_REMOTE, "bad message from <peer> on stripe socket i: what").
  [[noreturn]] void bad(const std::string& what) const;

  net::Socket socket_;
  uint32_t index_, count_;
  RegionRegistry& regions_;
  std::string peer_;
  Hooks hooks_;
  uint64_t lastSeq_ = 0;  // thread only
  std::atomic<bool> stopping_{false};
  std::atomic<bool> ended_{false};
  mutable std::mutex mu_;  // guards landed_
  std::deque<Landed> landed_;
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace plugboard::ethernet
