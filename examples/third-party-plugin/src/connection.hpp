// One connection to a peer of this host. Each side receives on a segment
// it created in setup() and sends into the segment its peer created:
//
//   rank A                                  rank B
//   write()/signal() -> pending -> RingWriter ==> [B's segment] -> B's receiver thread
//   A's receiver thread <- [A's segment] <== RingWriter <- pending <- write()/signal()
//
// Posting copies what fits into the peer's ring at once; proxy_progress()
// copies the rest as the peer drains it. A record completes (the source may
// be reused) once it is in the ring. The receiver applies records strictly
// in ring order, so a signal lands after every earlier write.
#pragma once

#include <plugboard/transport.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "context.hpp"
#include "ring.hpp"
#include "segment.hpp"

namespace shm {

/// Bytes of setup()'s address blob: magic, version, rank, pid, ring bytes,
/// segment name (NUL-terminated, 96 bytes).
constexpr size_t kAddressBytes = 128;

/// A pb_conn.
class Connection {
 public:
  /// setup(): creates this side's receiving segment for peer and writes the
  /// address blob into addr (*addrLen bytes available; on return the size
  /// used). Error(PB_ERR_INVALID, with *addrLen set) when addr is too small.
  Connection(Context& ctx, const pb_peer_info_v1& peer, void* addr, size_t* addrLen);
  /// free(): tells the peer, stops the receiver, unmaps. Never blocks on
  /// the peer; queued operations are abandoned.
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// One proxy_connect step: true once both sides have mapped each other.
  bool connect(const void* addr, size_t len);
  /// Posts a write after checking both ranges (Error(PB_ERR_INVALID)).
  void postWrite(const LocalRegion& src, uint64_t srcOffset, const RemoteKey& dst, uint64_t dstOffset, uint64_t size);
  /// Posts an atomic add to an aligned uint64_t of the peer.
  void postSignal(const RemoteKey& dst, uint64_t offset, uint64_t value);
  /// Moves queued records into the ring; returns the last completed
  /// sequence number. Error(PB_ERR_REMOTE) once the connection has failed.
  uint64_t progress();
  /// The context errors on this connection are recorded in.
  Context& context() const { return ctx_; }

 private:
  /// A posted operation not yet entirely in the ring.
  struct Op {
    uint32_t type;       ///< RecordType.
    uint64_t seq;        ///< Its sequence number.
    const uint8_t* src;  ///< WRITE: first source byte.
    uint64_t region, key, offset;
    uint64_t length;     ///< WRITE: bytes; SIGNAL: value.
    uint64_t sent;       ///< WRITE: bytes already in the ring.
  };

  std::string peerName() const;
  bool peerAlive() const;
  void requirePostable(const char* op) const;
  void enqueue(const Op& op);
  void pump();
  void pumpRecords();
  void receiveLoop();
  void apply(const RingReader& reader, const RecordHeader& r);
  void failReceive(const std::string& reason);

  Context& ctx_;
  const int peerRank_;
  const std::string peerHost_;
  std::unique_ptr<Segment> inbound_;   ///< Ours: the peer writes, we receive.
  std::unique_ptr<Segment> outbound_;  ///< The peer's: we write.
  std::unique_ptr<RingWriter> writer_;
  int64_t peerPid_ = 0;
  bool connected_ = false;

  // Sending side, used only under the core's per-connection lock.
  std::deque<Op> pending_;
  uint64_t posted_ = 0;
  uint64_t completed_ = 0;
  uint64_t chunkBytes_ = 0;
  std::string sendError_;
  std::chrono::steady_clock::time_point lastAdvance_;
  std::chrono::steady_clock::time_point lastLivenessCheck_;

  // Receiving side, run by receiver_.
  std::thread receiver_;
  bool stop_ = false;  ///< Set by free(); read with __atomic builtins.
  uint64_t lastSeq_ = 0;
  std::atomic<bool> receiveFailed_{false};
  mutable std::mutex receiveErrorMu_;
  std::string receiveError_;
};

}  // namespace shm
