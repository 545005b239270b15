// One ucx connection to a peer (the core's pb_conn*): a UCP endpoint on the
// context's worker, the operations posted on it, and the control words
// that make a clean close tell apart from a crash.
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "context.hpp"
#include "memory.hpp"
#include "wire.hpp"

namespace plugboard::ucx {

/// A connection. The core serializes calls on one connection
/// (transport.h); everything here that UCX callbacks or other connections'
/// progress can reach is guarded by the context's worker lock, which every
/// public method takes.
class Connection {
 public:
  /// setup(): takes a control word and writes our address blob into addr
  /// (*addrLen: room in, size used out). Throws Error.
  Connection(Context& ctx, const PeerInfo& peer, void* addr, size_t* addrLen);
  /// Closes (see close()) and frees every key still imported; never throws.
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// proxy_connect(): creates the endpoint on the first call, then
  /// progresses until the handshake flush completed. True once connected.
  /// Throws Error for a bad blob (PB_ERR_INVALID) or a failed endpoint.
  bool connect(const void* peerAddr, size_t peerAddrLen);

  /// import_rkey(): checks and unpacks a peer's key on our endpoint.
  RemoteKey* importRkey(const void* buf, size_t len);
  /// release_rkey(): drops the core's reference to key.
  void releaseRkey(RemoteKey* key);

  /// Posts a put of size bytes. Throws Error (PB_ERR_INVALID for a bad
  /// range; the connection's failure; PB_ERR_REMOTE after the peer closed).
  void postWrite(const LocalRegion& src, size_t srcOffset, const RemoteKey& dst, size_t dstOffset, size_t size);
  /// Posts an atomic add of value to the u64 at dst + dstOffset, ordered
  /// after every earlier write. As postWrite.
  void postSignal(const RemoteKey& dst, size_t dstOffset, uint64_t value);
  /// write() then signal() as one operation with one sequence number.
  void postWriteSignal(const LocalRegion& src, size_t srcOffset, const RemoteKey& dst, size_t dstOffset,
                       size_t size, const RemoteKey& signalDst, size_t signalOffset, uint64_t value);
  /// Progresses the worker, posts signals whose flush completed, retires
  /// completed operations; sets *completed to the last retired sequence
  /// number, then throws the connection's failure if any (final).
  void progress(uint64_t* completed);
  /// Starts what can be started now (a pending signal's flush); non-blocking.
  void flush();
  /// The progress thread's share of progress(): post signals whose flush
  /// completed, retire operations, note endpoint errors. Caller holds the
  /// worker lock; never throws (failures are recorded for progress()).
  void pumpLocked();
  /// The owning context.
  Context& context() { return ctx_; }
  /// An active message for this connection arrived (Context::onAm, worker
  /// lock held): checks it against the peer and the local regions, stores
  /// eager data or starts the rendezvous receive into place, and applies
  /// signals once every earlier message landed. Returns what UCP's
  /// callback returns (an error fails a rendezvous at the sender too).
  ucs_status_t receiveAm(const wire::AmHeader& h, void* data, size_t length, const ucp_am_recv_param_t* param);
  /// A rendezvous receive of message seq finished with status (worker lock held).
  void rndvLanded(uint64_t seq, ucs_status_t status);
  /// A lane piece for this connection arrived (worker lock held): checks
  /// it against the peer, the lane's numbering and the local regions; on
  /// Accepted *dst is where its bytes go.
  LanePieceVerdict acceptLanePiece(const wire::LanePiece& piece, size_t length, char** dst);
  /// One of a lane's events for this connection (worker lock held).
  void onLaneEvent(int lane, const LaneEvent& event);

 private:
  /// A posted operation, kept from posting until it is retired. Lives in
  /// a deque, so its address (and value's, which UCX reads) is stable.
  struct Op {
    uint64_t seq = 0;
    void* putReq = nullptr;        ///< The put's UCX request while in flight.
    void* amoReq = nullptr;        ///< The atomic's UCX request while in flight.
    void* amReq = nullptr;         ///< The active message's UCX request while in flight.
    uint8_t amHeader[wire::AmHeader::kSize];  ///< Its header, kept until the request completes.
    bool signalPending = false;    ///< The atomic waits for a flush (Ordering::Flush).
    uint64_t needFlushed = 0;      ///< ... covering every write up to this seq.
    uint64_t value = 0;            ///< The atomic's operand.
    uint64_t signalAddr = 0;       ///< Peer's address of the counter.
    std::shared_ptr<UcpRkey> putRkey;     ///< Kept while the put may use it.
    std::shared_ptr<UcpRkey> signalRkey;  ///< Kept while the atomic may use it.
    unsigned lanePieces = 0;       ///< Its lane pieces not yet sent.
  };
  /// An active message that arrived but whose signal (if any) is not
  /// applied yet, because it or an earlier message has not fully landed.
  struct Arrival {
    bool landed = false;       ///< Its data (if any) is in place.
    bool hasSignal = false;
    uint64_t signalRegion = 0, signalCheck = 0, signalOffset = 0, value = 0;
    uint64_t laneWrite = 0;    ///< A lane write: it needs every lane's pieces through this number,
    uint32_t lanes = 0;        ///< on this many lanes.
  };
  /// The pieces of one lane that arrived for this connection.
  struct LaneLanding {
    uint64_t through = 0;              ///< Every piece numbered up to this landed.
    std::map<uint64_t, bool> pending;  ///< Accepted pieces beyond it: landed yet?
  };
  /// A final error and the status it maps to.
  struct Failure {
    pb_status status;
    std::string reason;
  };

  // ---- connection.cpp: set-up and close ----
  /// UCX's endpoint error handler (arg is our EndpointGuard).
  static void onEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);
  /// "lane[0]: 0:tcp/lo.0 md[0] -> ...; lane[1]: ...", from ucp_ep_print_info.
  std::string describeLanes() const;
  /// "; active messages eager below 262144 bytes" (empty with RMA), for the connect log.
  std::string describeEager() const;
  /// Waits (progressing, lock taken per round) until req completes or the
  /// deadline passes; returns its status, or UCS_INPROGRESS on timeout.
  /// Frees req either way.
  ucs_status_t waitAndFree(void* req, std::chrono::steady_clock::time_point deadline);
  /// Stores the close marker into the peer's control word and waits (bounded)
  /// until an ep flush says it landed.
  void sayGoodbye();
  /// Closes the endpoint, gracefully (UCX flushes it) while the peer is
  /// there, else forced; waits a bounded time, then frees requests and
  /// keys, or leaks keys UCX may still use if the close did not finish.
  void closeEndpoint(bool graceful);
  /// Says goodbye if the peer is still there, closes the endpoint. Never
  /// throws or hangs.
  void close() noexcept;

  // ---- am.cpp: operations as active messages (worker lock held) ----
  /// Sends h (seq and token filled in here) with size bytes from src at
  /// srcOffset as op's active message; marks the connection failed and
  /// throws on error.
  void sendAm(Op& op, wire::AmHeader& h, const LocalRegion* src, size_t srcOffset, size_t size);
  /// Fills h's write fields for dst at dstOffset.
  static void describeWrite(wire::AmHeader& h, const RemoteKey& dst, size_t dstOffset, size_t size);
  /// Fills h's signal fields.
  static void describeSignal(wire::AmHeader& h, const RemoteKey& dst, size_t dstOffset, uint64_t value);
  /// Where a message's write goes, or NULL after failing the connection.
  char* writeTarget(const wire::AmHeader& h, size_t length);
  /// [offset, offset + length) of host region (id, check), or NULL with
  /// the problem in *problem (the caller fails the connection, naming the
  /// message: its text is built only then).
  char* regionBytes(uint64_t id, uint64_t check, uint64_t offset, uint64_t length, std::string* problem) const;
  /// Sends a write of at least lane_bytes as one piece per lane, then h
  /// (marked as a lane write, no data) on the endpoint.
  void sendLaneWrite(Op& op, wire::AmHeader& h, const LocalRegion& src, size_t srcOffset, size_t size);
  /// Checks a lane-write message's numbering and lanes; false after failing the connection.
  bool acceptLaneWrite(const wire::AmHeader& h, size_t length, const std::string& what);
  /// True when every lane of a has landed its pieces.
  bool lanesLanded(const Arrival& a) const;
  /// Applies, in order, the signals of messages that fully landed.
  void applyLanded();
  /// The counter a signal adds to, or NULL after failing the connection
  /// (why names the message, for the error).
  uint64_t* signalTarget(uint64_t region, uint64_t check, uint64_t offset, const std::string& why);
  /// Marks seq landed and applies, in order, the signals now unblocked.
  void markLanded(uint64_t seq);

  // ---- progress.cpp: posting and completion (worker lock held) ----
  /// Throws unless connected, healthy, and the peer has not closed.
  void requirePostable() const;
  /// Appends a new operation with the next sequence number.
  Op& newOp();
  /// ucp_put_nbx for op; marks the connection failed and throws on error.
  void issuePut(Op& op, const LocalRegion& src, size_t srcOffset, const RemoteKey& dst, size_t dstOffset,
                size_t size);
  /// Arranges op's atomic: at once (after a fence) or after a flush.
  void scheduleSignal(Op& op, const RemoteKey& dst, size_t dstOffset, uint64_t value);
  /// ucp_atomic_op_nbx(ADD) for op; marks the connection failed and throws on error.
  void issueAtomic(Op& op);
  /// Starts an ep flush covering every write posted so far.
  void startFlush();
  /// Completes the flush, posts the signals it unblocked, starts the next.
  void advanceSignals();
  /// True when req (may be null) is done; frees it then. Records a failed
  /// request as the connection's failure.
  bool requestDone(void*& req, const Op& op, const char* what);
  /// Pops completed operations from the front, in order.
  void retire();
  /// advanceSignals + retire + endpoint error check.
  void pump();
  /// Checks a signal's target; throws Error(PB_ERR_INVALID).
  void checkSignalTarget(const RemoteKey& dst, size_t dstOffset) const;
  /// Checks a write's ranges; throws Error(PB_ERR_INVALID).
  void checkWriteRanges(const LocalRegion& src, size_t srcOffset, const RemoteKey& dst, size_t dstOffset,
                        size_t size) const;
  /// True once the peer stored the close marker into our control word.
  bool peerClosed() const;
  /// Records the connection's final failure (first one wins) and logs it.
  void fail(pb_status status, const std::string& reason);
  /// Throws the recorded failure, if any.
  void throwIfFailed() const;

  Context& ctx_;
  PeerInfo peer_;
  ControlSlot control_;                 // the peer writes its close marker here
  EndpointGuard* guard_ = nullptr;      // owned by ctx_
  ucp_ep_h ep_ = nullptr;
  void* handshake_ = nullptr;           // the connect flush while in flight
  bool connected_ = false;
  ucs_status_t epStatus_ = UCS_OK;      // set by onEndpointError
  uint64_t peerControlAddr_ = 0;
  std::shared_ptr<UcpRkey> peerControl_;

  std::unordered_map<const RemoteKey*, std::unique_ptr<RemoteKey>> keys_;  // imported, not released

  std::deque<Op> ops_;                  // posted, not yet retired, in seq order
  std::deque<Op*> pendingSignals_;      // ops whose atomic waits for a flush, in seq order
  uint64_t posted_ = 0;                 // last sequence number handed out
  uint64_t completed_ = 0;              // last retired sequence number
  uint64_t lastWrite_ = 0;              // seq of the last put posted
  uint64_t flushedThrough_ = 0;         // every put with seq <= this is done at the peer
  uint64_t fencedThrough_ = 0;          // Ordering::Fence: puts up to here precede a fence
  void* flushReq_ = nullptr;            // the ordering flush while in flight
  uint64_t flushCovers_ = 0;            // lastWrite_ when flushReq_ was posted
  std::optional<Failure> failure_;

  // Active messages (Protocol::ActiveMessage).
  uint32_t token_ = 0;                  // names this connection in messages peers send us
  uint32_t peerToken_ = 0;              // names the peer's connection in ours
  size_t eagerBelow_ = 0;               // messages shorter than this go with UCP_AM_SEND_FLAG_EAGER
  uint64_t amSent_ = 0;                 // last seq of an active message we sent
  uint64_t landedThrough_ = 0;          // every message with seq <= this landed and signalled
  std::map<uint64_t, Arrival> arrivals_;  // seq > landedThrough_: arrived, not yet applied

  // Lanes (README "Lanes").
  int usableLanes_ = 0;                 // lanes both ends have: large writes go over these
  uint64_t laneWritesSent_ = 0;         // lane writes we sent
  uint64_t laneWritesSeen_ = 0;         // lane-write messages the peer sent us
  std::vector<LaneLanding> laneLanding_;  // per local lane: the peer's pieces
};

}  // namespace plugboard::ucx
