// A connection of the faulty transport: the inner transport's connection,
// with the plan's fault applied to the operations posted on it. The core
// never calls two functions of one connection at once, so no lock here.
//
// Invariants:
//  - Every operation gets the next sequence number of this connection
//    (seq_), whatever the fault does to it; it completes once the inner
//    operation that carries it (the last, when it became several) has
//    completed. A dropped operation completes with everything posted
//    before it. Completions are reported in sequence order.
//  - Held operations (delay, reorder) are not yet posted to the inner
//    transport; the regions and keys they name stay valid because the core
//    keeps them until the operation completes.
#pragma once

#include <plugboard/transport.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "fault_plan.hpp"

namespace plugboard::faulty {

class Context;

/// A registered local region: the inner region and what it covers.
struct Region {
  pb_mr* inner = nullptr;
  void* ptr = nullptr;
  size_t size = 0;
  pb_mem_type type = PB_MEM_HOST;
};

/// An imported remote key: the inner key and the size of the region it
/// names (faulty's packed key carries it before the inner transport's), so
/// ranges are checked when an operation is posted even if it is held.
struct RemoteKey {
  pb_rkey* inner = nullptr;
  uint64_t size = 0;
};

/// Bytes faulty's packed key adds in front of the inner transport's: the region size, u64 LE.
constexpr size_t kRkeyHeaderBytes = 8;

/// One connection (the core's pb_conn*).
class Connection {
 public:
  /// Sets up the inner connection; its address blob is this one's.
  Connection(Context& ctx, const pb_peer_info_v1* peer, void* addr, size_t* addrLen);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  Context& context() { return ctx_; }
  pb_conn* inner() const { return inner_; }

  /// proxy_connect: fail_connect strikes here (one event per connection).
  bool connect(const void* peerAddr, size_t len);
  void postWrite(Region& src, size_t srcOffset, RemoteKey& dst, size_t dstOffset, size_t size);
  void postSignal(RemoteKey& dst, size_t dstOffset, uint64_t value);
  void postWriteSignal(Region& src, size_t srcOffset, RemoteKey& dst, size_t dstOffset, size_t size,
                       RemoteKey& signalDst, size_t signalOffset, uint64_t value);
  /// Posts held operations whose time came, progresses the inner connection, reports completions.
  void progress(uint64_t* completed);
  /// Flushes the inner connection (held operations stay held).
  void flush();

 private:
  using Clock = std::chrono::steady_clock;

  /// One operation as posted by the core.
  struct Op {
    OpKind kind = OpKind::Write;
    Region* src = nullptr;
    size_t srcOffset = 0, dstOffset = 0, size = 0, signalOffset = 0;
    RemoteKey* dst = nullptr;
    RemoteKey* signalDst = nullptr;
    uint64_t value = 0;
    uint64_t seq = 0;           ///< this connection's sequence number
    Fault fault = Fault::None;  ///< the fault applied to it (None: passes)
    uint64_t strike = 0;        ///< its event number when struck
    Clock::time_point due{};    ///< held until then (delay)
  };

  /// Checks op's ranges, numbers it, decides its fault, then posts or holds it.
  void submit(Op op);
  /// Error(PB_ERR_INVALID) unless op's source, destination and counter lie in their regions.
  static void checkRanges(const Op& op);
  /// Applies op's fault and posts it to the inner transport.
  void post(const Op& op);
  /// Posts held operations that are due (and a reordered one left alone too long).
  void releaseHeld();
  /// Inner posts; each returns the inner sequence number of what it posted.
  uint64_t innerWrite(Region& src, size_t srcOffset, RemoteKey& dst, size_t dstOffset, size_t size);
  uint64_t innerSignal(RemoteKey& dst, size_t dstOffset, uint64_t value);
  uint64_t innerWriteSignal(const Op& op, size_t size);
  /// Posts one wrong byte over the middle of op's destination range.
  uint64_t corruptByte(const Op& op);
  /// A small region registered with the inner transport for corrupt's bytes.
  Region& scratch();
  std::string describePeer() const;
  void throwIfFailed() const;

  Context& ctx_;
  pb_conn* inner_ = nullptr;
  int peerRank_ = -1;
  std::string peerHost_;
  bool connectCounted_ = false;
  uint64_t seq_ = 0;          ///< last sequence number given out
  uint64_t innerPosted_ = 0;  ///< last inner sequence number
  uint64_t completed_ = 0;    ///< last sequence number reported complete
  std::map<uint64_t, uint64_t> posted_;  ///< seq -> inner seq that completes it
  std::deque<Op> held_;                  ///< delayed, in sequence order
  std::optional<Op> reordered_;          ///< waits for the next operation to be posted
  bool overtaken_ = false;               ///< it was: post reordered_ at the next progress call
  Clock::time_point reorderedSince_{};
  std::optional<Region> scratch_;
  uint32_t scratchNext_ = 0;
  std::string failed_;  ///< fail_op's error, final for the connection
};

}  // namespace plugboard::faulty
