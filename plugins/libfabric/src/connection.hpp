// One libfabric connection to a peer (the core's pb_conn*). Connections of
// a context share its RDM endpoint; a connection is the peer's address in
// the address vector plus the bookkeeping that turns fabric operations into
// the ABI's sequence numbers.
//
// Every method runs with the context's mutex held (the public ones take it
// themselves; the on* callbacks are called by Context::progressLocked).
#pragma once

#include <rdma/fabric.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <map>
#include <string>
#include <vector>

#include "context.hpp"
#include "memory.hpp"
#include "wire.hpp"

namespace plugboard::libfabric {

/// A connection. See README.md for the operation model and ordering.
class Connection {
 public:
  /// setup(): registers with ctx and writes our address blob into addr
  /// (*addrLen: room in, size used out). Throws Error.
  Connection(Context& ctx, const PeerInfo& peer, void* addr, size_t* addrLen);
  /// free(): waits a bounded time for operations already handed to the
  /// provider, then forgets them and drops the peer's address. Never throws.
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// proxy_connect(): one non-blocking step. True once both hellos are
  /// through. Throws Error for a bad blob or a failed hello.
  bool connect(const void* peerAddr, size_t peerAddrLen);
  /// Posts a write of size bytes (split into fragments of at most
  /// Context::maxFragment()); returns its sequence number. Throws Error
  /// (PB_ERR_INVALID for a bad range, the connection's failure otherwise).
  uint64_t postWrite(const LocalRegion& src, size_t srcOffset, const RemoteRegion& dst, size_t dstOffset,
                     size_t size);
  /// Posts an atomic add of value to the u64 at dst + dstOffset; it is
  /// handed to the provider once every earlier write has completed. As
  /// postWrite.
  uint64_t postSignal(const RemoteRegion& dst, size_t dstOffset, uint64_t value);
  /// Posts a write and then a signal as one operation (one sequence number).
  /// A small write into host memory travels inside the signal's message;
  /// otherwise as postWrite then postSignal. As postWrite.
  uint64_t postWriteSignal(const LocalRegion& src, size_t srcOffset, const RemoteRegion& dst, size_t dstOffset,
                           size_t size, const RemoteRegion& signalDst, size_t signalOffset, uint64_t value);
  /// Polls the completion queue, posts what waits, sets *completed to the
  /// sequence number of the last completed operation, then throws the
  /// connection's failure if any (final).
  void progress(uint64_t* completed);
  /// Posts whatever waits for resources; throws the failure if any.
  void flush();
  /// Posts what waits (signals held for writes now delivered), unless the
  /// connection failed or is not connected; never throws. Mutex held.
  void postWaiting();
  /// The owning context.
  Context& context() { return ctx_; }
  /// The peer.
  const PeerInfo& peer() const { return peer_; }

  // ---- called by the context, mutex held --------------------------------

  /// An operation of this connection completed.
  void onComplete(const OpRecord& op);
  /// An operation of this connection failed: the connection fails.
  void onError(const OpRecord& op, pb_status status, const std::string& what);
  /// The peer's hello arrived.
  void onHello(const wire::Message& m);
  /// Records the connection's final failure (first one wins) and logs it.
  void fail(pb_status status, const std::string& reason);
  /// Drops the queued operations that read region (being deregistered: the
  /// core gave up on them), failing the connection if any was. Matched by
  /// registration, not by address: another region over the same bytes (a
  /// caller's buffer registered once to receive into, once to send from)
  /// keeps its operations. Context mutex held.
  void forgetSource(const LocalRegion* region);

 private:
  /// A write or signal not yet (fully) handed to the provider.
  struct Pending {
    uint64_t seq = 0;
    const LocalRegion* source = nullptr;  ///< The region a write or fused signal reads; NULL for a bare signal.
    // write: the rest of it
    const char* src = nullptr;
    void* desc = nullptr;
    uint64_t remote = 0;  ///< Remote address of the next byte.
    uint64_t key = 0;
    uint64_t left = 0;
    int lane = -1;  ///< The lane that carries it (README "Lanes"), or -1: the endpoint.
    // signal
    uint64_t region = 0, check = 0, offset = 0, value = 0;
    // a write carried by the signal's message (WRITE_SIGNAL)
    bool fused = false;
    const char* inlineSrc = nullptr;
    uint64_t inlineLen = 0;
    uint64_t writeRegion = 0, writeCheck = 0, writeOffset = 0;
  };

  /// Throws Error(PB_ERR_INVALID) until proxy_connect has returned PB_OK.
  void requireConnected() const;
  /// Throws the failure, if any.
  void throwIfFailed() const;
  /// Throws PB_ERR_INVALID unless the write's ranges fit both regions.
  void checkWriteRange(const LocalRegion& src, size_t srcOffset, const RemoteRegion& dst, size_t dstOffset,
                       size_t size) const;
  /// Throws PB_ERR_INVALID unless the signal target is an aligned u64 inside dst.
  void checkSignalTarget(const RemoteRegion& dst, size_t dstOffset) const;
  /// Write seq as the pieces it travels in: one on the endpoint, or one per
  /// lane for a write of at least Context::laneBytes() (both ends' regions
  /// registered on the lanes); none for 0 bytes.
  std::vector<Pending> planWrite(uint64_t seq, const LocalRegion& src, size_t srcOffset, const RemoteRegion& dst,
                                 size_t dstOffset, size_t size) const;
  /// Fabric writes the pieces take.
  uint64_t fragmentsOf(const std::vector<Pending>& pieces) const;
  /// Posts (or backlogs) the pieces of one write; records them as open.
  void enqueueWrite(const std::vector<Pending>& pieces);
  /// A signal of seq, not yet queued.
  static Pending signalOf(uint64_t seq, const RemoteRegion& dst, size_t dstOffset, uint64_t value);
  /// The control message of signal s.
  wire::Message signalMessage(const Pending& s, wire::MessageType type) const;
  /// Writes s's WRITE_SIGNAL message (header, WriteExt, payload) to buf;
  /// returns its length.
  size_t encodeWriteSignal(const Pending& s, uint8_t* buf) const;
  /// Hands fragments of w to the provider until it is all posted (true) or
  /// the provider is out of room (false).
  bool postFragments(Pending& w);
  /// Hands signal s to the provider; false when out of room.
  bool postSignalNow(const Pending& s);
  /// Sends our hello; false when out of room.
  bool postHello();
  /// Tells the peer that bytes are coming over the lanes (a LaneWake
  /// message), so its lanes progress; a hint, skipped when out of room.
  void postLaneWake(uint64_t bytes);
  /// Posts backlogged fragments and the signals whose writes are delivered.
  void drain();
  /// True when every write before seq has completed.
  bool writesDoneBefore(uint64_t seq) const;
  /// One fabric operation of op seq completed.
  void opPartDone(uint64_t seq);
  /// "rank A -> rank B (host H)", for messages.
  std::string link() const;

  Context& ctx_;
  PeerInfo peer_;
  uint64_t id_ = 0;                 // our connection id (in our blob)
  std::optional<wire::AddressBlob> peerBlob_;
  fi_addr_t addr_ = FI_ADDR_NOTAVAIL;
  std::vector<fi_addr_t> laneAddrs_;  // the peer's lane i in our lane i's AV; as many as both ends have
  bool helloPosted_ = false, helloSent_ = false, helloReceived_ = false;
  uint64_t helloFromConn_ = 0;      // from_conn of the peer's hello
  bool connected_ = false;

  uint64_t posted_ = 0;             // last sequence number handed out
  uint64_t completed_ = 0;          // all operations <= completed_ are done
  std::deque<uint64_t> parts_;      // parts_[i]: fabric ops left of seq completed_ + 1 + i
  std::map<uint64_t, uint64_t> writeFragments_;  // per open write: fabric writes not yet delivered
  std::deque<Pending> backlog_;     // write fragments waiting for room, in order
  std::deque<Pending> signals_;     // signals waiting for earlier writes, in order
  uint64_t inFabric_ = 0;           // operations handed to the provider, not yet completed

  struct Failure {
    pb_status status;
    std::string reason;
  };
  std::optional<Failure> failure_;
};

}  // namespace plugboard::libfabric
