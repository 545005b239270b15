#include "connection.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "error.hpp"

namespace shm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kAddressMagic = 0x41534250;  // "PBSA"
constexpr size_t kNameOffset = 32;
/// Largest WRITE record payload: big copies go through the ring in pieces.
constexpr uint64_t kMaxChunk = 1 << 20;

void put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
void put64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t get32(const uint8_t* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }
uint64_t get64(const uint8_t* p) { uint64_t v; std::memcpy(&v, p, 8); return v; }

/// A segment name no other connection on this host uses.
std::string uniqueSegmentName() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  return "/plugboard-shm-" + std::to_string(getpid()) + "-" + std::to_string(counter.fetch_add(1)) + "-" +
         std::to_string(salt % 1000000007);
}

/// Lets the CPU breathe inside a spin loop.
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/// [offset, offset + size) inside a region of regionSize bytes, overflow-safe.
bool inside(uint64_t offset, uint64_t size, uint64_t regionSize) {
  return offset <= regionSize && size <= regionSize - offset;
}

}  // namespace

Connection::Connection(Context& ctx, const pb_peer_info_v1& peer, void* addr, size_t* addrLen)
    : ctx_(ctx), peerRank_(peer.peer_rank), peerHost_(peer.peer_host ? peer.peer_host : "?") {
  SHM_CHECK(addrLen, PB_ERR_INVALID, "shm setup: addr_len must not be NULL");
  if (!addr || *addrLen < kAddressBytes) {
    *addrLen = kAddressBytes;
    throw Error(PB_ERR_INVALID, "shm setup: the address buffer needs " + std::to_string(kAddressBytes) + " bytes");
  }
  const std::string name = uniqueSegmentName();
  inbound_ = Segment::create(name, ctx.settings().ringBytes, ctx.rank(), peerRank_);
  auto* p = static_cast<uint8_t*>(addr);
  std::memset(p, 0, kAddressBytes);
  put32(p, kAddressMagic);
  put32(p + 4, kLayoutVersion);
  put32(p + 8, uint32_t(ctx.rank()));
  put64(p + 16, uint64_t(getpid()));
  put64(p + 24, ctx.settings().ringBytes);
  std::memcpy(p + kNameOffset, name.c_str(), name.size() + 1);
  *addrLen = kAddressBytes;
  ctx_.connections.fetch_add(1);
}

Connection::~Connection() {
  __atomic_store_n(&stop_, true, __ATOMIC_RELEASE);
  if (outbound_) {
    __atomic_store_n(&outbound_->header()->producerClosed, 1, __ATOMIC_RELEASE);
    ringDoorbell(*outbound_);  // the peer's receiver drains and stops
  }
  if (inbound_) {
    __atomic_store_n(&inbound_->header()->ownerClosed, 1, __ATOMIC_RELEASE);
    ringDoorbell(*inbound_);  // wakes our own receiver
  }
  if (receiver_.joinable()) receiver_.join();
  ctx_.connections.fetch_sub(1);
}

std::string Connection::peerName() const {
  return "rank " + std::to_string(peerRank_) + " (host " + peerHost_ + ")";
}

bool Connection::peerAlive() const { return peerPid_ <= 0 || kill(pid_t(peerPid_), 0) == 0 || errno == EPERM; }

bool Connection::connect(const void* addr, size_t len) {
  if (connected_) return true;
  if (!outbound_) {
    const auto* p = static_cast<const uint8_t*>(addr);
    SHM_CHECK(p && len == kAddressBytes, PB_ERR_INVALID,
              "shm proxy_connect: the address from " + peerName() + " has " + std::to_string(len) + " bytes, expected " +
                  std::to_string(kAddressBytes));
    SHM_CHECK(get32(p) == kAddressMagic && get32(p + 4) == kLayoutVersion, PB_ERR_INVALID,
              "shm proxy_connect: the address from " + peerName() + " has a bad magic or version");
    SHM_CHECK(int32_t(get32(p + 8)) == peerRank_, PB_ERR_INVALID,
              "shm proxy_connect: the address is from rank " + std::to_string(int32_t(get32(p + 8))) + ", expected " +
                  peerName());
    const char* name = reinterpret_cast<const char*>(p + kNameOffset);
    SHM_CHECK(memchr(name, '\0', kAddressBytes - kNameOffset) && std::strncmp(name, "/plugboard-shm-", 15) == 0,
              PB_ERR_INVALID, "shm proxy_connect: the address from " + peerName() + " names no shm segment");
    std::unique_ptr<Segment> seg = Segment::open(name);
    SegmentHeader* h = seg->header();
    SHM_CHECK(h->ownerRank == peerRank_ && h->producerRank == ctx_.rank(), PB_ERR_REMOTE,
              "shm proxy_connect: segment " + seg->name() + " belongs to rank " + std::to_string(h->ownerRank) +
                  " -> rank " + std::to_string(h->producerRank) + ", not to " + peerName());
    outbound_ = std::move(seg);
    peerPid_ = int64_t(get64(p + 16));
    chunkBytes_ = std::min<uint64_t>(kMaxChunk, outbound_->ringBytes() / 4);
    writer_ = std::make_unique<RingWriter>(*outbound_);
    __atomic_store_n(&h->producerAttached, 1, __ATOMIC_RELEASE);
  }
  if (!__atomic_load_n(&inbound_->header()->producerAttached, __ATOMIC_ACQUIRE)) return false;
  inbound_->unlink();  // both sides have it mapped: the name is no longer needed
  receiver_ = std::thread([this] { receiveLoop(); });
  connected_ = true;
  return true;
}

// ---- sending ---------------------------------------------------------------

void Connection::requirePostable(const char* op) const {
  SHM_CHECK(connected_, PB_ERR_INVALID, std::string("shm ") + op + ": the connection to " + peerName() + " is not connected");
  SHM_CHECK(sendError_.empty(), PB_ERR_REMOTE, sendError_);
  SHM_CHECK(!__atomic_load_n(&outbound_->header()->ownerClosed, __ATOMIC_ACQUIRE), PB_ERR_REMOTE,
            peerName() + " closed the shm connection; cannot " + op);
}

void Connection::enqueue(const Op& op) {
  if (pending_.empty()) lastAdvance_ = Clock::now();
  pending_.push_back(op);
  ++posted_;
  pump();  // copy what fits now: low latency for small operations
}

void Connection::postWrite(const LocalRegion& src, uint64_t srcOffset, const RemoteKey& dst, uint64_t dstOffset,
                           uint64_t size) {
  requirePostable("write");
  SHM_CHECK(inside(srcOffset, size, src.size), PB_ERR_INVALID,
            "shm write: source range " + std::to_string(srcOffset) + "+" + std::to_string(size) + " outside the " +
                std::to_string(src.size) + "-byte region");
  SHM_CHECK(inside(dstOffset, size, dst.size), PB_ERR_INVALID,
            "shm write: destination range " + std::to_string(dstOffset) + "+" + std::to_string(size) +
                " outside the peer's " + std::to_string(dst.size) + "-byte region");
  enqueue(Op{kRecordWrite, posted_ + 1, src.base + srcOffset, dst.region, dst.key, dstOffset, size, 0});
}

void Connection::postSignal(const RemoteKey& dst, uint64_t offset, uint64_t value) {
  requirePostable("signal");
  SHM_CHECK(inside(offset, 8, dst.size), PB_ERR_INVALID,
            "shm signal: offset " + std::to_string(offset) + " is not inside the peer's " + std::to_string(dst.size) +
                "-byte region");
  SHM_CHECK((dst.baseMod8 + offset) % 8 == 0, PB_ERR_INVALID,
            "shm signal: offset " + std::to_string(offset) + " is not 8-byte aligned in the peer's memory");
  enqueue(Op{kRecordSignal, posted_ + 1, nullptr, dst.region, dst.key, offset, value, 0});
}

void Connection::pump() {
  const uint64_t before = completed_;
  pumpRecords();
  if (completed_ != before) ctx_.signalLanded();  // wakes core threads waiting for completions
}

void Connection::pumpRecords() {
  while (!pending_.empty()) {
    Op& op = pending_.front();
    do {
      const uint64_t n = op.type == kRecordWrite ? std::min(op.length - op.sent, chunkBytes_) : op.length;
      RecordHeader h{op.type, 0, op.seq, op.region, op.key, op.offset + op.sent, n};
      if (!writer_->append(h, op.src ? op.src + op.sent : nullptr)) return;
      writer_->publish();
      if (op.type == kRecordWrite) op.sent += n;
    } while (op.type == kRecordWrite && op.sent < op.length);
    completed_ = op.seq;  // every byte is in the ring: the source may be reused
    pending_.pop_front();
    lastAdvance_ = Clock::now();
  }
}

uint64_t Connection::progress() {
  if (receiveFailed_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(receiveErrorMu_);
    throw Error(PB_ERR_REMOTE, receiveError_);
  }
  SHM_CHECK(sendError_.empty(), PB_ERR_REMOTE, sendError_);
  if (pending_.empty() || !connected_) return completed_;
  if (__atomic_load_n(&outbound_->header()->ownerClosed, __ATOMIC_ACQUIRE)) {
    sendError_ = peerName() + " closed the shm connection with " + std::to_string(pending_.size()) +
                 " operation(s) undelivered";
    throw Error(PB_ERR_REMOTE, sendError_);
  }
  pump();
  const auto now = Clock::now();
  if (!pending_.empty() && now - lastAdvance_ > std::chrono::seconds(1) &&
      now - lastLivenessCheck_ > std::chrono::seconds(1)) {
    lastLivenessCheck_ = now;
    if (!peerAlive()) {
      sendError_ = peerName() + " (pid " + std::to_string(peerPid_) + ") exited without closing the shm connection";
      throw Error(PB_ERR_REMOTE, sendError_);
    }
  }
  return completed_;
}

// ---- receiving -------------------------------------------------------------

void Connection::failReceive(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(receiveErrorMu_);
    receiveError_ = reason;
  }
  receiveFailed_.store(true, std::memory_order_release);
  ctx_.log(PB_LOG_WARN, reason);
}

void Connection::apply(const RingReader& reader, const RecordHeader& r) {
  SHM_CHECK(r.reserved == 0 && (r.type == kRecordWrite || r.type == kRecordSignal), PB_ERR_REMOTE,
            "unknown record type " + std::to_string(r.type));
  SHM_CHECK(r.seq == lastSeq_ || r.seq == lastSeq_ + 1, PB_ERR_REMOTE,
            "sequence number jumped from " + std::to_string(lastSeq_) + " to " + std::to_string(r.seq));
  lastSeq_ = r.seq;
  if (r.type == kRecordWrite) {
    SHM_CHECK(recordBytes(r.type, r.length) <= reader.available(), PB_ERR_REMOTE,
              "write record of " + std::to_string(r.length) + " bytes is longer than what was published");
    ctx_.regions().with(r.region, r.key, r.offset, r.length,
                        [&](uint8_t* dst) { reader.copyPayload(dst, 0, r.length); });
    return;
  }
  ctx_.regions().with(r.region, r.key, r.offset, 8, [&](uint8_t* dst) {
    SHM_CHECK(reinterpret_cast<uintptr_t>(dst) % 8 == 0, PB_ERR_REMOTE,
              "signal at offset " + std::to_string(r.offset) + " is not 8-byte aligned");
    // Earlier records were copied by this thread before; the atomic add
    // publishes them to whoever reads the counter with acquire.
    __atomic_fetch_add(reinterpret_cast<uint64_t*>(dst), r.length, __ATOMIC_SEQ_CST);
  });
  ctx_.signalLanded();
}

void Connection::receiveLoop() {
  RingReader reader(*inbound_);
  SegmentHeader* h = inbound_->header();
  const auto spin = std::chrono::microseconds(ctx_.settings().spinUs);
  auto lastCheck = Clock::now();
  while (!__atomic_load_n(&stop_, __ATOMIC_ACQUIRE)) {
    if (reader.hasRecord()) {
      const RecordHeader r = reader.peek();
      try {
        apply(reader, r);
      } catch (const std::exception& e) {
        failReceive("bad message from " + peerName() + ": " + e.what());
        return;
      }
      reader.consume(r);
      continue;
    }
    if (__atomic_load_n(&h->producerClosed, __ATOMIC_ACQUIRE)) {
      if (reader.hasRecord()) continue;  // drain what came before the close
      return;                            // a clean close: nothing more will come
    }
    const auto spinUntil = Clock::now() + spin;
    while (!reader.hasRecord() && Clock::now() < spinUntil) cpuRelax();
    if (reader.hasRecord()) continue;
    reader.sleep(&stop_, 100);
    if (Clock::now() - lastCheck > std::chrono::seconds(1)) {
      lastCheck = Clock::now();
      if (!peerAlive() && !__atomic_load_n(&h->producerClosed, __ATOMIC_ACQUIRE) && !reader.hasRecord()) {
        failReceive(peerName() + " (pid " + std::to_string(peerPid_) + ") exited without closing the shm connection");
        return;
      }
    }
  }
}

}  // namespace shm
