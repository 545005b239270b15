// Private state of HostCollectives and the helpers its algorithms share.
#pragma once

#include <cstring>

#include <map>
#include <memory>
#include <vector>

#include "collectives/collective_kind.hpp"
#include "collectives/exchange.hpp"
#include "collectives/host_plan_selection.hpp"
#include "collectives/peer_link.hpp"
#include "plugboard/host_collectives.hpp"

namespace plugboard {

/// memcpy for user buffers: zero-count calls may pass null pointers,
/// which memcpy must not get even for 0 bytes.
inline void copyBytes(void* dst, const void* src, size_t n) {
  if (n) std::memcpy(dst, src, n);
}

/// Element range [begin, begin + count) of one rank's segment.
struct Segment {
  size_t begin = 0;
  size_t count = 0;
};

/// Splits count elements into n near-equal segments, in rank order.
std::vector<Segment> splitSegments(size_t count, int n);

struct HostCollectives::Impl {
  Communicator& comm;
  int rank = 0;
  int nranks = 1;
  size_t smallBytes = 65536;
  size_t halvingBytes = 0;  ///< allreduce_halving_bytes: halving and doubling above min(doublingBytes, smallBytes) up to it
  size_t doublingBytes = 0;  ///< allreduce_doubling_bytes: recursive doubling's limit on power-of-two >= 4 ranks
  size_t gatherDoublingBytes = 0;  ///< allgather_doubling_bytes: the same for allgather (gathered bytes)
  DirectPolicy direct;     ///< host_direct_bytes (0: no direct transfers), host_direct_piece_bytes
  std::vector<bool> coresScarce;  ///< by peer: DirectPolicy::coresScarce (direct points here)
  bool failover = false;   ///< the "failover" setting (direct transfers off then)
  std::chrono::milliseconds timeout{60000};
  std::chrono::milliseconds closeTimeout{10000};  ///< the close_timeout setting
  bool callFailed = false;  ///< a call threw: the peers may be anywhere, so closing does not wait for them
  std::map<int, std::unique_ptr<PeerLink>> links;
  std::map<int, uint64_t> sendSeq;  // per peer: point-to-point sends so far
  std::map<int, uint64_t> recvSeq;  // per peer: point-to-point receives so far
  uint64_t opSeq = 0;              // collective calls so far
  std::vector<char> scratch;       // reused between calls
  std::unique_ptr<HostPlanSelection> plans;  // YAML `plans:` rules for this rank count, if any

  explicit Impl(Communicator& c) : comm(c) {}
  /// The link to peer.
  PeerLink* link(int peer) const { return links.at(peer).get(); }
  /// Next collective call's signature.
  CallSignature nextCall(CollectiveKind kind, DataType type, ReduceOp op, int root, size_t count);
  /// runExchange with this communicator's timeout.
  void run(std::vector<SendJob>& sends, std::vector<RecvJob>& recvs);
  /// run() whose large messages may travel as direct transfers
  /// (host_direct_bytes): copyJobs straight into place, other receives into
  /// the link's staging buffer, consumed piece by piece as they land.
  /// peersAtOnce: DirectPolicy's; n - 1 only where every rank sends to and
  /// receives from every peer (each message's size the same at both ends).
  void runDirect(std::vector<SendJob>& sends, std::vector<RecvJob>& recvs, int peersAtOnce = 1);
  /// runExchange with direct transfers as `policy` says; on failure tells
  /// the peers (failure notices) and rethrows.
  void exchange(std::vector<SendJob>& sends, std::vector<RecvJob>& recvs, const DirectPolicy& policy);
  /// True when a plan rule served the call (host_plan_selection.hpp): bytes
  /// is its size as rules count it, inputCount its input's elements. A plan
  /// that fails fails the call as exchange() does (failCall).
  bool servedByPlan(const CallSignature& call, const char* collective, size_t bytes, const void* input, void* output,
                    size_t inputCount, DataType type, ReduceOp op);
  /// From a catch block of `call`: marks the call failed, tells the peers
  /// (failure notices: a peer's landed notice, if any, as the reason, since
  /// this rank's error is often its consequence) and throws that notice's
  /// error or rethrows. An abort is local: rethrown, no notices.
  [[noreturn]] void failCall(const Error& e, const CallSignature& call);
  /// The closing handshake of ~HostCollectives: flushes every link, tells
  /// every peer through the bootstrap, and waits (bounded by closeTimeout,
  /// driving the connections meanwhile) for every peer's word.
  void closeLinks();
  /// Scratch space of at least bytes (contents undefined).
  char* scratchOf(size_t bytes);

  void allReduceOneStep(const CallSignature& call, const char* send, char* recv, size_t count, DataType type, ReduceOp op);
  void allReduceTwoStep(const CallSignature& call, const char* send, char* recv, size_t count, DataType type, ReduceOp op);
  /// Small allreduce on a power-of-two rank count: log2(n) exchanges with one partner each.
  void allReduceDoubling(const CallSignature& call, const char* send, char* recv, size_t count, DataType type,
                         ReduceOp op);
  /// Mid-size allreduce on a power-of-two rank count of 4 or more (Rabenseifner's):
  /// reduce-scatter by recursive halving, then allgather by recursive
  /// doubling; 2 log2(n) messages per rank of (n - 1) / n of the vector in
  /// all, each segment reduced once, on its owner.
  void allReduceHalving(const CallSignature& call, const char* send, char* recv, size_t count, DataType type,
                        ReduceOp op);
  /// Allgather of up to allgather_doubling_bytes on a power-of-two rank
  /// count above 2: log2(n) exchanges with one partner each, every block
  /// received in place (no scratch, no final rotation). recv: n blocks,
  /// this rank's already there.
  void allGatherDoubling(const CallSignature& call, char* recv, size_t bytes);
  /// Small allgather on other rank counts above 2 (Bruck): ceil(log2(n)) rounds; in
  /// round k a rank passes every block it holds so far (up to 2^k) to the
  /// rank 2^k below it. mine: this rank's block; recv: n blocks.
  void allGatherBruck(const CallSignature& call, const char* mine, char* recv, size_t bytes);
  /// Phase 1 of the two-step algorithms: leaves op over ranks of this rank's
  /// segment of send in acc (segs[rank].count elements).
  void reduceScatterSegments(const CallSignature& call, const char* send, char* acc, const std::vector<Segment>& segs,
                             DataType type, ReduceOp op);
};

/// Throws Error(InvalidUsage) for a bad type/op, null buffers with count > 0,
/// or a byte size that overflows size_t when multiplied by factor.
size_t checkedBytes(const char* what, const void* a, const void* b, size_t count, DataType type, size_t factor);
/// Throws Error(InvalidUsage) unless op is a ReduceOp value.
void checkOp(const char* what, ReduceOp op);
/// Throws Error(InvalidUsage) unless 0 <= root < nranks.
void checkRoot(const char* what, int root, int nranks);

}  // namespace plugboard
