#include "receive_lane.hpp"

#include "error.hpp"

namespace plugboard::ethernet {

namespace {

/// How long a lane waits for bytes before it looks at stopping_ again.
constexpr std::chrono::milliseconds kStopCheck{100};

}  // namespace

ReceiveLane::ReceiveLane(net::Socket socket, uint32_t index, uint32_t count, RegionRegistry& regions,
                         std::string peer, Hooks hooks)
    : socket_(std::move(socket)),
      index_(index),
      count_(count),
      regions_(regions),
      peer_(std::move(peer)),
      hooks_(std::move(hooks)),
      thread_(&ReceiveLane::run, this) {}

ReceiveLane::~ReceiveLane() { stop(); }

std::optional<ReceiveLane::Landed> ReceiveLane::front() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (landed_.empty()) return std::nullopt;
  return landed_.front();
}

void ReceiveLane::pop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!landed_.empty()) landed_.pop_front();
}

void ReceiveLane::stop() noexcept {
  stopping_.store(true, std::memory_order_release);
  try {
    socket_.shutdownBoth();
  } catch (...) {
    // Already shut down: the thread sees stopping_ within kStopCheck.
  }
  if (thread_.joinable()) thread_.join();
}

void ReceiveLane::run() {
  try {
    while (!stopping_.load(std::memory_order_acquire)) {
      uint8_t bytes[wire::FrameHeader::kSize];
      readHeader(bytes, sizeof(bytes));
      const wire::FrameHeader h = wire::FrameHeader::decode(bytes);
      const wire::PieceRange range = checkPiece(h);
      receivePayload(h, range);
      {
        std::lock_guard<std::mutex> lock(mu_);
        landed_.push_back(Landed{h.seq, h.region, h.key, h.offset, h.length});
      }
      hooks_.landed();
    }
  } catch (const Error& e) {
    if (!stopping_.load()) hooks_.fail(e.status(), e.what());
  } catch (const net::NetError& e) {
    // The end of the stream (the peer closed or crashed) ends the lane
    // quietly: the frame stream says which it was, and fails a striped
    // write still waiting for this socket's piece.
    if (e.kind() != net::NetErrorKind::Closed && !stopping_.load())
      hooks_.fail(PB_ERR_SYSTEM, "ethernet connection to " + peer_ + ": receive on stripe socket " +
                                     std::to_string(index_ + 1) + " failed: " + e.what());
  }
  ended_.store(true, std::memory_order_release);
  hooks_.landed();
}

bool ReceiveLane::waitReadable() {
  while (!stopping_.load(std::memory_order_acquire))
    if (socket_.waitReadable(net::Deadline::after(kStopCheck))) return true;
  return false;
}

void ReceiveLane::readHeader(uint8_t* out, size_t size) {
  size_t got = 0;
  while (got < size) {
    if (!waitReadable()) throw net::NetError(net::NetErrorKind::Closed, "stopped");
    got += socket_.recvSome(out + got, size - got);
  }
}

wire::PieceRange ReceiveLane::checkPiece(const wire::FrameHeader& h) {
  if (h.magic != wire::kFrameMagic || h.reserved != 0) bad("frame header has a bad magic");
  if (h.type != uint16_t(wire::FrameType::Piece))
    bad("frame type " + std::to_string(h.type) + " where only pieces of striped writes travel");
  if (h.seq <= lastSeq_)
    bad("piece of write seq " + std::to_string(h.seq) + " after seq " + std::to_string(lastSeq_));
  lastSeq_ = h.seq;
  auto pin = regions_.pin(h.region, h.key);
  if (!pin.get())
    bad("piece of a write to region " + std::to_string(h.region) +
        ", which is not registered here (deregistered, or a stale key)");
  if (!rangeFits(h.offset, h.length, pin.get()->size))
    bad("striped write of " + std::to_string(h.length) + " bytes at offset " + std::to_string(h.offset) +
        " overruns region " + std::to_string(h.region) + " of " + std::to_string(pin.get()->size) + " bytes");
  const wire::PieceRange piece = wire::stripePiece(h.length, index_, count_);
  return wire::PieceRange{h.offset + piece.offset, piece.length};
}

void ReceiveLane::receivePayload(const wire::FrameHeader& h, wire::PieceRange range) {
  size_t done = 0;
  while (done < range.length) {
    if (!waitReadable()) throw net::NetError(net::NetErrorKind::Closed, "stopped");
    // Pinned for one read only: deregister_memory() never waits on a stalled peer.
    auto pin = regions_.pin(h.region, h.key);
    if (!pin.get())
      throw Error(PB_ERR_INVALID, "piece of a write from " + peer_ + " on ethernet stripe socket " +
                                      std::to_string(index_ + 1) + " to region " + std::to_string(h.region) +
                                      " was cut short: " + kDeregisteredMidWrite);
    done += socket_.recvSome(pin.get()->base + range.offset + done, range.length - done);
  }
}

void ReceiveLane::bad(const std::string& what) const {
  throw Error(PB_ERR_REMOTE, "bad message from " + peer_ + " on ethernet stripe socket " +
                                 std::to_string(index_ + 1) + ": " + what);
}

}  // namespace plugboard::ethernet
