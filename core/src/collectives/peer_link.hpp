// A pipe of fixed-size slots to one peer, for the host collectives.
//
// Each side owns an outbox (staging for what it sends) and an inbox (where
// the peer's writes land), both K slots of [header | chunk]. Two semaphores
// carry the flow control: "data" (+1 per chunk written into the peer's
// inbox) and "free" (chunks the receiver consumed). Consumed counts also
// ride in the header of every chunk going the other way, so symmetric
// collectives need no separate credit messages; an explicit "free" signal
// goes out only when a rank is about to wait (returnCredits), which keeps
// a blocked sender from waiting on a blocked receiver. Invariants:
//   sent - credits <= K          (never overwrite an unread inbox slot)
//   an outbox slot is rewritten only after its last write completed
// Counters only grow, so a link serves any number of collectives in turn.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "plugboard/communicator.hpp"
#include "plugboard/error.hpp"

namespace plugboard {

/// ChunkHeader::magic of every chunk.
constexpr uint32_t kChunkMagic = 0x50424348;  // "PBCH"

/// ChunkHeader::phase: an ordinary chunk of a message.
constexpr uint32_t kPhaseData = 0;
/// A direct receiver's "write here": its buffer's descriptor (direct_transfer.hpp).
constexpr uint32_t kPhaseReady = 1;
/// A direct sender's "the write has landed" (it follows the write on the connection).
constexpr uint32_t kPhaseDone = 2;

/// What every chunk carries, so ranks that disagree are caught, not corrupted.
struct ChunkHeader {
  uint32_t magic;
  uint8_t kind;       ///< Which collective (CollectiveKind).
  uint8_t dtype;      ///< DataType.
  uint8_t op;         ///< ReduceOp.
  uint8_t reserved;
  int32_t root;       ///< Root rank, or -1.
  uint32_t phase;     ///< kPhaseData, or a direct transfer's kPhaseReady / kPhaseDone.
  uint64_t opSeq;     ///< Collective call number on this communicator.
  uint64_t count;     ///< The call's element count as the caller gave it.
  uint64_t bytes;     ///< Total bytes of this message on this link.
  uint64_t chunk;     ///< Index of this chunk within the message.
  uint64_t credits;   ///< Chunks the sender has consumed from the receiver, in total.
  uint64_t controlBytes;  ///< kPhaseReady: bytes of the descriptor in the payload.
};
static_assert(sizeof(ChunkHeader) == 64, "chunk data must start cache-line aligned");

/// One peer's slots and semaphores. Construction is collective with the peer.
class PeerLink {
 public:
  PeerLink(Communicator& comm, std::shared_ptr<Connection> conn, size_t chunkBytes, int slots, int tag);
  ~PeerLink();

  /// The peer's rank.
  int peer() const { return peer_; }
  /// "rank 3 (host node-b, ethernet)", for messages.
  const std::string& describePeer() const { return description_; }
  /// Largest chunk payload.
  size_t chunkBytes() const { return chunkBytes_; }
  /// True when a slot is free at the peer and its outbox slot is reusable.
  bool canSend() const;
  /// Copies header + payload into the next outbox slot and posts write + signal.
  void send(const ChunkHeader& header, const void* payload, size_t len);
  /// True when the peer's next chunk has landed.
  bool hasChunk() const;
  /// True when the peer's next chunk has landed, as far as this thread
  /// knows without driving the transport (cheap: for looking around while
  /// waiting on other links).
  bool hasLandedChunk() const;
  /// Header of the chunk hasChunk() reported.
  const ChunkHeader& header() const { return headerAt(0); }
  /// Payload of that chunk.
  const char* payload() const { return payloadAt(0); }
  /// Chunks that have landed and are not consumed yet, as far as this
  /// thread knows without driving the transport.
  uint64_t landedCount() const;
  /// Header and payload of the landed chunk `behind` places after the
  /// next one (behind < landedCount()); the peer does not reuse its slot
  /// before it is consumed.
  const ChunkHeader& headerAt(uint64_t behind) const;
  const char* payloadAt(uint64_t behind) const;
  /// Consumes the chunk: its slot may be reused once the peer learns of it.
  void release();
  /// A buffer of at least bytes owned by the link, kept between calls (a
  /// direct receive that is not a copy lands there). Invalidated by the next
  /// call with more bytes.
  char* staging(size_t bytes);
  /// Sends any credits not yet returned; call before waiting idle.
  void returnCredits();
  /// True when the connection's transport wakes waiters.
  bool notifiesWaiters() const { return conn_->notifiesWaiters(); }
  /// The connection (for direct transfers: writes straight between the
  /// callers' buffers, direct_transfer.hpp).
  Connection& connection() const { return *conn_; }
  /// True when the link's connection has failed (the transport reported an
  /// error); drives the transport once to find out.
  bool connectionFailed() const;
  /// True when the peer has asked to fail the link over (its side failed;
  /// its request waits in the bootstrap). Never waits.
  bool failoverAsked(Communicator& comm) const;
  /// The "failover" setting: starts moving the link onto the pair's next
  /// transport (Communicator::beginFailover) and sends the peer, in one
  /// bootstrap message, everything it needs of this side: the transport
  /// given up, the new connection's address, the inbox's and two fresh
  /// semaphore counters' descriptors, and how many of the peer's chunks
  /// arrived whole here (their signal landed, so their data did) and how
  /// many were consumed. That message is also the request: a side whose
  /// connection still looks fine learns of the failure from it
  /// (failoverAsked). stepFailover() completes it.
  void beginFailover(Communicator& comm);
  /// Advances the failover begun by beginFailover() without waiting: takes
  /// the peer's message once there, drives the new connection's connect,
  /// then resends from the outbox the chunks the peer lacks (still there: a
  /// slot is reused only once the peer consumed its chunk) and counts
  /// credits and arrivals from the new semaphores on top of what it had.
  /// True once done. Nothing here waits on the peer, so a rank can fail
  /// over many links at once in any order. Throws Error(Remote) when the
  /// peer's message or counts cannot be right.
  bool stepFailover(Communicator& comm);
  /// True between beginFailover() and the stepFailover() that finished.
  bool failingOver() const { return failover_ != nullptr; }
  /// Where a failover under way stands, for a timeout's message.
  std::string failoverState() const;
  /// Reads, at most once a millisecond (a poll costs a system call and
  /// waits check often), what the peer may have said through the bootstrap
  /// while this rank waits: a failure notice this link could not carry
  /// (taken and kept, so later calls fail on it too) and its "closing" word
  /// (only looked at: closing in step takes it). Never throws.
  void pollBootstrap(Communicator& comm);
  /// The failure notice the peer sent through the bootstrap, as it came
  /// (collectives/failure_notice.cpp reads it); empty if none.
  const std::optional<std::vector<char>>& outOfBandNotice() const { return outOfBandNotice_; }
  /// True once the peer has said it closed its host collectives: it has
  /// left its last call and sends nothing more.
  bool peerClosing() const { return peerClosing_; }

 private:
  size_t stride() const { return sizeof(ChunkHeader) + chunkBytes_; }

  int peer_;
  size_t chunkBytes_;
  uint64_t slots_;
  std::shared_ptr<Connection> conn_;
  std::vector<char> outbox_, inbox_;
  std::vector<char> staging_;  // direct receives that are not copies (grows, never shrinks)
  RegisteredMemory outboxMem_, inboxMem_;
  // Inboxes given up at failovers, kept registered until the link closes:
  // a failed connection left open lands late frames there, unread
  // (freshInbox). The registrations go first (declared after the bytes).
  std::vector<std::vector<char>> retiredInboxes_;
  std::vector<RegisteredMemory> retiredInboxMems_;
  RemoteMemory peerInbox_;
  std::unique_ptr<Host2HostSemaphore> data_, free_;
  std::vector<uint64_t> slotPostedSeq_;
  std::vector<size_t> slotBytes_;  // header + payload of the chunk last sent from each slot (resent on failover)
  std::string description_;
  uint64_t credits() const;
  uint64_t sent_ = 0, received_ = 0;
  uint64_t returned_ = 0;       // credits the peer has been told of (headers or signals)
  uint64_t signalled_ = 0;      // sum of explicit "free" adds: the peer's counter equals it
  uint64_t peerCredits_ = 0;    // the peer's consumed count, as last seen in its headers
  // After a failover the new semaphores count from 0: arrivals and credits
  // before the switch are these bases.
  uint64_t dataBase_ = 0;       // chunks from the peer that had landed whole
  uint64_t freeBase_ = 0;       // chunks of ours the peer had consumed
  int failovers_ = 0;
  std::optional<std::vector<char>> outOfBandNotice_;
  bool peerClosing_ = false;
  std::chrono::steady_clock::time_point nextBootstrapPoll_{};
  struct Failover;                      // the state of a failover under way (peer_link.cpp)
  std::unique_ptr<Failover> failover_;
  void readPeerFailover(const std::vector<char>& message);  // checks it against this side
  void finishFailover(Communicator& comm, std::shared_ptr<Connection> conn);
  /// Chunks from the peer landed whole, in total.
  uint64_t arrived() const;
  /// beginFailover: moves the chunks landed and not consumed, [received_,
  /// landed), into a new registered inbox that only the new connection
  /// will write; the old one is retired.
  void freshInbox(Communicator& comm, uint64_t landed);
};

}  // namespace plugboard
