#include "bootstrap/inbound_link.hpp"

#include "bootstrap/io.hpp"
#include "plugboard/error.hpp"

namespace plugboard::bootstrap {

InboundLink::InboundLink(const RankContext& ctx, net::Socket sock)
    : ctx_(ctx), sock_(std::move(sock)), from_(peerAddressText(sock_)) {}

void InboundLink::pump(std::vector<Frame>& done) {
  if (closed_) return;
  try {
    for (;;) {
      bool inHello = !helloDone();
      if (readSome() == 0) return;
      if (!inHello) {
        afterRead(done);
      } else if (helloDone()) {
        helloValid_ = decodeHello(helloBytes_.data(), hello_);
        return;
      }
    }
  } catch (const net::NetError& e) {
    closed_ = true;
    closeReason_ = e.what();
    if (headerGot_ > 0) closeReason_ += " in the middle of a message";
  }
}

size_t InboundLink::readSome() {
  if (!helloDone()) {
    size_t n = recvSome(sock_, helloBytes_.data() + helloGot_, kHelloBytes - helloGot_);
    helloGot_ += n;
    return n;
  }
  if (headerGot_ < kFrameHeaderBytes) {
    size_t n = recvSome(sock_, headerBytes_.data() + headerGot_, kFrameHeaderBytes - headerGot_);
    headerGot_ += n;
    return n;
  }
  size_t n = recvSome(sock_, payload_.data() + payloadGot_, payload_.size() - payloadGot_);
  payloadGot_ += n;
  return n;
}

// Invariant: headerGot_ < kFrameHeaderBytes, or the header is decoded and
// payload_ is sized for it.
void InboundLink::afterRead(std::vector<Frame>& done) {
  if (headerGot_ < kFrameHeaderBytes) return;
  if (!headerDecoded_) startPayload();
  if (payloadGot_ < payload_.size()) return;
  done.push_back(Frame{header_.space, header_.tag, std::move(payload_)});
  payload_ = std::vector<char>();
  payloadGot_ = 0;
  headerGot_ = 0;
  headerDecoded_ = false;
}

void InboundLink::startPayload() {
  header_ = decodeFrameHeader(headerBytes_.data());
  if (header_.magic != kFrameMagic)
    throw Error(ErrorCode::Remote, ctx_.who() + " received bytes from " + peerText() +
                                       " that are not a bootstrap message (bad magic); the stream is corrupt");
  if (header_.size > kMaxFrameBytes)
    throw Error(ErrorCode::Remote, ctx_.who() + " received a message header from " + peerText() + " announcing " +
                                       std::to_string(header_.size) + " bytes, over the 1 GiB limit; the stream is corrupt");
  payload_.resize(static_cast<size_t>(header_.size));
  headerDecoded_ = true;
}

std::string InboundLink::peerText() const {
  return "rank " + std::to_string(rank_) + " (" + from_ + ")";
}

}  // namespace plugboard::bootstrap
