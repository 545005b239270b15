// Which kernel path a GPU collective call takes. Pure functions of the
// call's bytes, the communicator's shape and the settings, so every rank
// of a call picks the same path (the kernels' message counts depend on it).
#pragma once

#include <cstdint>

namespace plugboard {

struct GpuCollSettings;

namespace gpucoll {

/// Path of an allreduce or reduce.
enum class ReducePath {
  LL,       ///< One-shot LL16 packets straight into every peer (every pair mapped).
  OneShot,  ///< The pipeline, whole buffer to every receiver: one hop.
  TwoShot,  ///< The pipeline, reduce-scatter then all-gather: two hops, fewer bytes.
};

/// Shape of the communicator the choice depends on.
struct CommShape {
  int nranks;      ///< >= 2 (a single rank copies).
  bool portPairs;  ///< Some pair of the communicator is unmapped (no LL there).
};

/// Allreduce / reduce of `bytes`: LL below gpu_allreduce_small_bytes,
/// one-shot below gpu_allreduce_oneshot_bytes, two-shot above; both
/// thresholds compare bytes x (nranks - 1), what one-shot sends per rank.
ReducePath reducePath(const GpuCollSettings& s, CommShape shape, uint64_t bytes);

/// Broadcast of `bytes` takes the LL kernel (else the moving pipeline):
/// bytes x (nranks - 1) below gpu_broadcast_small_bytes, every pair mapped.
bool broadcastUsesLL(const GpuCollSettings& s, CommShape shape, uint64_t bytes);

/// Allgather, alltoall or reducescatter with `blockBytes` per rank block
/// takes the LL kernel (else its pipeline): blockBytes x (nranks - 1) below
/// gpu_blocks_small_bytes, every pair mapped.
bool blocksUseLL(const GpuCollSettings& s, CommShape shape, uint64_t blockBytes);

/// One direction of a send, recv or sendRecv of `bytes` (> 0) takes the
/// point-to-point LL kernel (else the pipeline): bytes below
/// gpu_p2p_small_bytes, every pair mapped. Sender and receiver decide alike.
bool p2pUsesLL(const GpuCollSettings& s, CommShape shape, uint64_t bytes);

/// Largest payload (bytes) one rank sends a peer in any LL call (a whole
/// allreduce / broadcast, or one rank block): what the LL area holds.
uint64_t largestLLBytes(const GpuCollSettings& s, int nranks);

}  // namespace gpucoll
}  // namespace plugboard
