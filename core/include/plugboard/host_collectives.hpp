/// @file host_collectives.hpp
/// Collectives on host (CPU) buffers over whatever transport each peer pair
/// of the communicator selected.
#pragma once

#include <cstddef>
#include <memory>

#include "plugboard/communicator.hpp"
#include "plugboard/datatype.hpp"

namespace plugboard {

/// Collectives on host memory. Construction is collective (it connects to
/// every peer and sets up staging slots). Calls are blocking and must be
/// made in the same order with matching arguments on every rank; a mismatch
/// is detected and reported (Error(Remote)) rather than corrupting data.
/// Buffers need no registration. In-place follows NCCL: allreduce, reduce,
/// broadcast and alltoall with sendbuf == recvbuf; allgather with
/// sendbuf == recvbuf + rank * count; reducescatter with
/// sendbuf + rank * count == recvbuf. Not thread-safe.
///
/// Settings: host_chunk_bytes (pipeline chunk), host_slots (chunks in
/// flight per peer), allreduce_small_bytes (below it: one-step algorithms),
/// allreduce_halving_bytes (up to it, on 4, 8, 16... ranks: recursive
/// halving and doubling).
class HostCollectives {
 public:
  /// Collective over comm, which must outlive this object.
  explicit HostCollectives(Communicator& comm);
  /// Closes in step with the peers (like NCCL's ncclCommDestroy, which
  /// finalizes first): waits until this rank's own operations have
  /// completed and every peer has finished its last call and is closing
  /// too, so that no peer still writes to this rank's slots after they are
  /// freed. The wait is bounded by the close_timeout setting (then it logs
  /// the peers it did not hear from and closes anyway); after an abort or a
  /// failed call it says "closing" but waits for nobody; it skips peers
  /// whose connection failed, and all of it where the bootstrap cannot
  /// poll. Destroy host collectives in the same order on every rank, or
  /// each close waits out its timeout.
  ~HostCollectives();
  HostCollectives(const HostCollectives&) = delete;
  HostCollectives& operator=(const HostCollectives&) = delete;

  /// recv[i] = op over ranks of send[i], count elements.
  void allReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op);
  /// recv = concatenation by rank of each rank's send (count elements each).
  void allGather(const void* send, void* recv, size_t count, DataType type);
  /// recv = block `rank` (count elements) of op over ranks of send (size() * count elements).
  void reduceScatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op);
  /// recv on every rank = send of root (send is read on root only).
  void broadcast(const void* send, void* recv, size_t count, DataType type, int root);
  /// recv on root = op over ranks of send (recv is written on root only).
  void reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root);
  /// Block j of send goes to rank j; block i of recv comes from rank i (count elements per block).
  void allToAll(const void* send, void* recv, size_t count, DataType type);
  /// Sends count elements to peer; pairs with the peer's recv (or sendRecv).
  void send(const void* buf, size_t count, DataType type, int peer);
  /// Receives count elements from peer.
  void recv(void* buf, size_t count, DataType type, int peer);
  /// Sends to one peer and receives from another at once (no deadlock when
  /// two ranks exchange). The buffers may overlap (in place): what is sent
  /// is sendBuf as it was at the call.
  void sendRecv(const void* sendBuf, size_t sendCount, int sendPeer, void* recvBuf, size_t recvCount, int recvPeer,
                DataType type);

  /// The communicator.
  Communicator& communicator() const;
  /// Calls run by execution plans that the YAML `plans:` rules chose
  /// (docs/execution-plans.md, "Choosing plans from YAML") instead of the
  /// built-in algorithms.
  uint64_t callsServedByPlans() const;

  struct Impl;  ///< Private state (pimpl).

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace plugboard
