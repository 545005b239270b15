// Moves several messages to and from several peers at once through their
// PeerLinks. One loop makes progress on every send and receive, so no
// pattern of sends and receives can deadlock on slot credits.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collectives/peer_link.hpp"
#include "plugboard/communicator.hpp"

namespace plugboard {

/// The call every chunk of a collective is stamped with.
struct CallSignature {
  uint8_t kind = 0;
  uint8_t dtype = 0;
  uint8_t op = 0;
  int32_t root = -1;
  uint64_t opSeq = 0;
  uint64_t count = 0;
};

/// Which messages travel as direct transfers, and in what pieces.
struct DirectPolicy {
  size_t minBytes = 0;            ///< host_direct_bytes: from this size (0: none)
  size_t pieceBytes = 1u << 20;   ///< host_direct_piece_bytes: largest write per Done chunk
  /// Peers every rank of the exchange sends to and receives from at once
  /// (n - 1 in the all-peers exchanges, 1 elsewhere): their messages' Ready
  /// round trips overlap, so where cores are scarce a message counts its
  /// bytes that many times.
  int peersAtOnce = 1;
  /// By peer rank: whether a host of the pair has no more cores than
  /// ranks on it (Communicator::coresScarceOn, the same at both ends).
  /// Null: no pair.
  const std::vector<bool>* coresScarce = nullptr;

  /// The smallest message to peer that travels direct: minBytes, or where
  /// the pair's cores are scarce minBytes / peersAtOnce, but at least
  /// kDirectFloorBytes (or minBytes, if lower). 0: none.
  size_t threshold(int peer) const;
};

/// Below this no message of an all-peers exchange travels direct. At 4 ranks
/// on the CI kind, allgathers of 80 KiB messages gained 6% direct and
/// allreduce halves of 80 KiB none; a single 128 KiB message (2 ranks, a
/// doubling step) loses 6-9% to its Ready round trip.
constexpr size_t kDirectFloorBytes = 64 * 1024;

/// Where a direct send stands (direct_transfer.hpp).
struct DirectSendState {
  RemoteMemory target;      ///< the receiver's buffer, from its Ready chunk
  RegisteredMemory source;  ///< data, registered for the write
  bool offerTaken = false;  ///< target and source are set
  size_t posted = 0;        ///< bytes written and announced (a Done chunk each piece)
  uint64_t pieces = 0;      ///< Done chunks posted
  uint64_t lastWrite = 0;   ///< the connection's posted() after the last piece's write
};

/// Where a direct receive stands.
struct DirectRecvState {
  RegisteredMemory target;  ///< the destination, registered for the peer's write
  char* staging = nullptr;  ///< the link's staging buffer, when the job is not a copy
  bool readySent = false;
  size_t landed = 0;        ///< bytes announced by the sender's Done chunks, consumed
  uint64_t pieces = 0;      ///< Done chunks taken
  bool done = false;
};

/// A message to send: bytes starting at data, stamped with call.
struct SendJob {
  PeerLink* link;
  const char* data;
  size_t bytes;
  CallSignature call;
  size_t nextChunk = 0;
  /// Written straight into the receiver's buffer instead of in chunks; the
  /// receiver's job is direct too (both ends decide alike: runExchange).
  bool direct = false;
  DirectSendState directState{};
};

/// Called for each received chunk: offset within the message, payload, length.
using ChunkConsumer = std::function<void(size_t offset, const char* payload, size_t len)>;

/// A message to receive: bytes in total, handed to consume chunk by chunk,
/// in order; each chunk's stamp must equal call.
struct RecvJob {
  PeerLink* link;
  size_t bytes;
  ChunkConsumer consume;
  CallSignature call;
  size_t nextChunk = 0;
  /// When consume only copies into one contiguous buffer: that buffer, which
  /// a direct transfer writes into instead (copyJob makes such jobs). A
  /// direct receive without one lands in the link's staging buffer and is
  /// consumed there whole.
  char* copyTo = nullptr;
  bool direct = false;
  DirectRecvState directState{};
};

/// The header every chunk of call's message of `bytes` carries (chunk 0,
/// phase data); callers set what differs.
ChunkHeader stampHeader(const CallSignature& call, size_t bytes);

/// A consumer that copies each chunk into dst at its offset.
ChunkConsumer copyInto(char* dst);

/// A receive that copies bytes into dst (so it may be direct).
RecvJob copyJob(PeerLink* link, size_t bytes, char* dst, const CallSignature& call);

/// Runs every job to completion. Throws Error(Remote) when a peer's chunk
/// shows it called a different collective, count or type; Error(Timeout)
/// naming the peers still outstanding when nothing moves for `timeout`;
/// any connection error the proxy recorded; and Error(Remote) with the
/// peer's reason when a failure notice (failure_notice.hpp) lands on any
/// of links while this rank waits.
///
/// direct.minBytes > 0 makes every message of at least direct.threshold(peer)
/// bytes on a link whose transport registers cheaply a direct transfer
/// (direct_transfer.hpp); every rank of the exchange must pass the same
/// policy. failover (the setting): a link whose connection fails moves
/// to the pair's next transport and the exchange goes on
/// (PeerLink::failover); direct transfers must be off then.
void runExchange(Communicator& comm, std::vector<SendJob>& sends, std::vector<RecvJob>& recvs,
                 const std::map<int, std::unique_ptr<PeerLink>>& links, std::chrono::milliseconds timeout,
                 const DirectPolicy& direct = DirectPolicy(), bool failover = false);

/// "allreduce(count 100, float, sum)" for messages.
std::string describeCall(uint8_t kind, uint8_t dtype, uint8_t op, int32_t root, uint64_t count);

}  // namespace plugboard
