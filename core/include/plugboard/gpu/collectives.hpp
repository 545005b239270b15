/// @file collectives.hpp
/// Collectives on CUDA device buffers, launched on a user stream and
/// capturable in a CUDA graph. Ranks whose pair selected a transport that
/// maps peer memory (cudaipc) talk through MemoryChannels; the others
/// through PortChannels over whatever transport the pair selected.
/// Requires CUDA.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "plugboard/communicator.hpp"
#include "plugboard/datatype.hpp"

namespace plugboard {

/// The scalar of a PreMulSum call, of the call's type: in device memory,
/// read when the call's kernels run (a graph replay reads it anew), or its
/// bytes, taken at the call.
struct PreMulScalar {
  const void* device = nullptr;         ///< Where the scalar is; null: hostValue.
  std::array<uint8_t, 8> hostValue{};  ///< The scalar's bytes (the type's first bytes).
};

/// dst = scalar x src, count elements of type (not the 8-bit floats:
/// Error(InvalidUsage)), enqueued on stream: integers wrap in their width,
/// floats multiply in float (double for Float64) and round once. The scale
/// that PreMulSum calls apply.
void preMulScale(void* dst, const void* src, size_t count, DataType type, const PreMulScalar& scalar,
                 cudaStream_t stream);

/// Collectives on device memory. Construction is collective: it connects
/// every pair for CUDA memory, allocates and exchanges scratch buffers and
/// builds the channels, on the CUDA device current at construction.
///
/// Calls only enqueue work on `stream` (no host synchronisation, no host
/// allocation), so they may be captured in a CUDA graph and replayed. They
/// must be made in the same order with matching arguments on every rank.
/// Buffers need no registration. In-place follows NCCL: allreduce, reduce,
/// broadcast and alltoall with send == recv; allgather with
/// send == recv + rank * count; reducescatter with send + rank * count == recv.
///
/// Every DataType (the integers, Float16, BFloat16, Float32, Float64, the
/// OCP 8-bit floats) and every ReduceOp. Reductions combine in a wider type
/// (float for the 16- and 8-bit floats) and round once, in rank order;
/// integers wrap; Avg is the sum divided by the rank count once at the end
/// (truncated toward zero for the integers).
///
/// Settings (registry, PLUGBOARD_<NAME> in the environment):
///   gpu_allreduce_small_bytes  below it, the one-shot LL-packet allreduce
///   gpu_scratch_bytes          scratch per peer for the pipelined algorithms
///   gpu_blocks, gpu_threads    launch shape of the collective kernels
///   gpu_chunk_bytes            pipeline chunk of the large-message kernels
///   gpu_wait_timeout           seconds before a device wait records a timeout (30)
///   gpu_switch, gpu_switch_bytes, gpu_switch_chunk_bytes  SwitchChannel allreduce / allgather (below)
///
/// Calls on one object must be ordered (one stream, or streams ordered by
/// events): they share device-side sequence counters. Destruction is
/// collective (every rank must destroy its object) and waits for the
/// device and for the proxy's outstanding requests.
///
/// Pairs whose transport does not map peer memory (ethernet and the other
/// host-only transports, whose CUDA memory the core stages; ranks on other
/// hosts) go through PortChannels served by one proxy thread per object.
/// When any pair of the communicator is such a pair, every allreduce uses
/// the pipelined two-shot kernel (the one-shot LL kernel needs direct
/// stores) and the scratch doubles (an outbox per peer); it must then stay
/// below 4 GiB (Error(Config) otherwise). Mapped pairs keep direct stores.
///
/// A device wait that times out (gpu_wait_timeout, 30 s by default, on the
/// GPU's clock) or is aborted is recorded and ends the kernel; checkErrors()
/// (and the next call) throws Error(Timeout/Remote) naming rank, peer, hosts
/// and transport, or the proxy's error when a PortChannel request failed.
/// The rank whose GPU collectives fail first tells every peer through the
/// bootstrap; a peer that hears it while it waits in synchronize(), or in
/// checkErrors() or a call (each looks at most once a millisecond), ends
/// its device waits at once and throws Error(Remote) naming that rank and
/// its reason, instead of waiting out its own gpu_wait_timeout. (One
/// GpuCollectives per communicator at a time hears them.)
/// SwitchChannel algorithms (NCCL's NVLS allreduce and allgather, on a
/// SwitchChannel of gpu_switch_bytes per rank): with gpu_switch=auto they
/// are taken when the nvls transport can create a multicast group of every
/// rank (never while NCCL_NVLS_ENABLE=0 or PLUGBOARD_NVLS_ENABLE=0);
/// gpu_switch=peers runs them over cudaipc mappings instead (for tests and
/// comparison); off never. Where taken: allreduce of Float32 sum and
/// Float16 / BFloat16 sum, min and max, and every allgather, at sizes the
/// LL kernels do not take; with every pair on one host.
class GpuCollectives {
 public:
  /// Collective over comm, which must outlive this object.
  explicit GpuCollectives(Communicator& comm);
  ~GpuCollectives();
  GpuCollectives(const GpuCollectives&) = delete;
  GpuCollectives& operator=(const GpuCollectives&) = delete;

  /// recv[i] = op over ranks of send[i], count elements.
  void allReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, cudaStream_t stream);
  /// recv = concatenation by rank of each rank's send (count elements each).
  void allGather(const void* send, void* recv, size_t count, DataType type, cudaStream_t stream);
  /// recv = block `rank` (count elements) of op over ranks of send (size() * count elements).
  void reduceScatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op, cudaStream_t stream);
  /// recv on every rank = send of root (send is read on root only).
  void broadcast(const void* send, void* recv, size_t count, DataType type, int root, cudaStream_t stream);
  /// recv on root = op over ranks of send (recv is written on root only).
  void reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root, cudaStream_t stream);
  /// allReduce, reduceScatter and reduce as PreMulSums (NCCL's
  /// ncclRedOpCreatePreMulSum): each rank's send times its own scalar,
  /// summed over ranks. The LL and pipelined kernels scale as they read;
  /// the relay sizes and a single rank reduce a scaled copy: in recv for
  /// allreduce, else in stream-ordered scratch (cudaMallocAsync, so graphs
  /// capture it). Not for
  /// the 8-bit floats (Error(InvalidUsage)). YAML plans and the switch
  /// algorithms do not take them.
  void allReduce(const void* send, void* recv, size_t count, DataType type, const PreMulScalar& scalar,
                 cudaStream_t stream);
  void reduceScatter(const void* send, void* recv, size_t count, DataType type, const PreMulScalar& scalar,
                     cudaStream_t stream);
  void reduce(const void* send, void* recv, size_t count, DataType type, const PreMulScalar& scalar, int root,
              cudaStream_t stream);
  /// Block j of send goes to rank j; block i of recv comes from rank i (count elements per block).
  void allToAll(const void* send, void* recv, size_t count, DataType type, cudaStream_t stream);
  /// Sends count elements to peer; pairs with the peer's recv (or the
  /// receiving side of its sendRecv).
  void send(const void* buf, size_t count, DataType type, int peer, cudaStream_t stream);
  /// Receives count elements from peer; pairs with the peer's send (or the
  /// sending side of its sendRecv).
  void recv(void* buf, size_t count, DataType type, int peer, cudaStream_t stream);
  /// Sends sendCount elements to sendPeer and receives recvCount elements
  /// from recvPeer in one kernel, both directions at once (a ring exchange
  /// or a swap with one peer, sendPeer == recvPeer, cannot deadlock). Each
  /// direction pairs with the matching side of the peer's sendRecv, or with
  /// its plain recv / send of the same count. Either count may be 0 (that
  /// direction is skipped; its peer and buffer are still checked). The
  /// buffers must not overlap, except sendBuf == recvBuf with equal counts.
  void sendRecv(const void* sendBuf, size_t sendCount, int sendPeer, void* recvBuf, size_t recvCount, int recvPeer,
                DataType type, cudaStream_t stream);

  /// Throws the first error a device wait or the proxy recorded, naming
  /// rank, peer and transport, or a peer's failure notice (see above). Does
  /// not synchronise the stream.
  void checkErrors() const;
  /// Waits until the work enqueued on stream so far has finished (or a
  /// peer's failure notice ends it), then checkErrors(). Unlike
  /// cudaStreamSynchronize it is bounded: every device
  /// wait ends after gpu_wait_timeout, so a stream still busy after twice
  /// that is not being scheduled (Error(Timeout) naming the rank).
  void synchronize(cudaStream_t stream) const;
  /// The communicator.
  Communicator& communicator() const;
  /// "multicast" or "peers": the SwitchChannel backend of the switch
  /// algorithms (gpu_switch); "" when they are off.
  std::string switchBackend() const;
  /// Calls run by execution plans that the YAML `plans:` rules chose
  /// (docs/execution-plans.md, "Choosing plans from YAML") instead of the
  /// built-in kernels.
  uint64_t callsServedByPlans() const;

  struct Impl;  ///< Private state (pimpl).

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace plugboard
