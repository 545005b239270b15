// One accepted connection from a peer: its hello, then a stream of frames,
// read incrementally so that one thread can serve every peer at once.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "bootstrap/context.hpp"
#include "bootstrap/wire.hpp"
#include "net/socket.hpp"

namespace plugboard::bootstrap {

/// A complete message received from a peer.
struct Frame {
  uint32_t space = 0;
  int32_t tag = 0;
  std::vector<char> payload;
};

/// Reads one peer's connection without blocking. Until helloDone() the
/// sender is unknown; the owner then checks hello() and calls identify().
class InboundLink {
 public:
  InboundLink(const RankContext& ctx, net::Socket sock);

  /// Reads what has arrived. Stops right after the hello completes so the
  /// owner can identify the sender. Appends completed frames to done. End of
  /// stream marks the link closed(). Throws Error(Remote) naming the peer on
  /// a frame with a bad magic or a size over kMaxFrameBytes.
  void pump(std::vector<Frame>& done);

  bool helloDone() const { return helloGot_ == kHelloBytes; }
  /// The decoded hello; meaningful only when helloValid().
  const Hello& hello() const { return hello_; }
  /// False when the first bytes were not a hello of this wire version.
  bool helloValid() const { return helloValid_; }
  /// Files the link under the sender's rank.
  void identify(int rank) { rank_ = rank; }
  int rank() const { return rank_; }

  bool closed() const { return closed_; }
  /// Why the link closed, e.g. "connection closed by peer".
  const std::string& closeReason() const { return closeReason_; }
  /// The sender's address, for messages.
  const std::string& from() const { return from_; }
  int fd() const { return sock_.fd(); }

 private:
  size_t readSome();
  void afterRead(std::vector<Frame>& done);
  void startPayload();
  std::string peerText() const;

  const RankContext& ctx_;
  net::Socket sock_;
  std::string from_;
  int rank_ = -1;
  std::array<uint8_t, kHelloBytes> helloBytes_{};
  size_t helloGot_ = 0;
  Hello hello_;
  bool helloValid_ = false;
  // Frame in progress: header first, then payload.
  std::array<uint8_t, kFrameHeaderBytes> headerBytes_{};
  size_t headerGot_ = 0;
  FrameHeader header_;
  bool headerDecoded_ = false;
  std::vector<char> payload_;
  size_t payloadGot_ = 0;
  bool closed_ = false;
  std::string closeReason_;
};

}  // namespace plugboard::bootstrap
