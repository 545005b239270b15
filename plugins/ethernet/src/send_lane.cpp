#include "send_lane.hpp"

#include <sys/uio.h>

namespace plugboard::ethernet {

SendLane::SendLane(net::Socket socket, std::function<void()> changed)
    : socket_(std::move(socket)), changed_(std::move(changed)), thread_(&SendLane::run, this) {}

SendLane::~SendLane() { stop(); }

void SendLane::post(const Piece& piece) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(piece);
  cv_.notify_one();
}

std::optional<net::NetError> SendLane::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

void SendLane::stop() noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    queue_.clear();
    cv_.notify_one();
  }
  try {
    socket_.shutdownBoth();
  } catch (...) {
    // Already shut down, or never connected: nothing to wake.
  }
  if (thread_.joinable()) thread_.join();
}

bool SendLane::next(Piece* piece) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
  if (stopping_) return false;
  *piece = queue_.front();
  return true;
}

void SendLane::run() {
  try {
    Piece piece;
    while (next(&piece)) {
      uint8_t header[wire::FrameHeader::kSize];
      piece.header.encode(header);
      iovec iov[2] = {{header, sizeof(header)}, {const_cast<char*>(piece.payload), piece.length}};
      // Blocks while the peer's window is full; stop() wakes it by shutting
      // the socket down, and the core's own timeouts bound the caller.
      socket_.sendAllV(iov, piece.length > 0 ? 2 : 1, net::Deadline::never());
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!queue_.empty()) queue_.pop_front();
      }
      sentSeq_.store(piece.header.seq, std::memory_order_release);
      changed_();
    }
  } catch (const net::NetError& e) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) failure_ = e;
  }
  changed_();
}

}  // namespace plugboard::ethernet
