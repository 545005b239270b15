// Which kernel path a GPU collective call takes. Pure functions of the
// call's bytes, the communicator's shape and the settings, so every rank
// of a call picks the same path (the kernels' message counts depend on it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace plugboard {

struct GpuCollSettings;

namespace gpucoll {

/// Path of an allreduce or reduce.
enum class ReducePath {
  LL,       ///< One-shot LL16 packets straight into every peer (every pair mapped).
  OneShot,  ///< The pipeline, whole buffer to every receiver: one hop.
  TwoShot,  ///< The pipeline, reduce-scatter then all-gather: two hops, fewer bytes.
  Relay,    ///< The host runs it (HostRelay): some pair unmapped, bytes <= gpu_host_relay_bytes.
};

/// Shape of the communicator the choice depends on.
struct CommShape {
  int nranks;      ///< >= 2 (a single rank copies).
  bool portPairs;  ///< Some pair of the communicator is unmapped (no LL there).
};

/// One-shot sends (n - 1)(n - 2) / n x bytes more per rank than two-shot:
/// it is taken only while that is below this (4 x H200: two-shot is ahead
/// from 1-2 MiB on 4 ranks; docs/perf/2026-11-26-collectives-4xh200.md).
constexpr uint64_t kOneShotMaxExtraBytes = 1 << 20;

/// Allreduce / reduce of `bytes`: with some pair unmapped, the host relay
/// up to gpu_host_relay_bytes (0: never); else LL below gpu_allreduce_small_bytes,
/// one-shot below gpu_allreduce_oneshot_bytes (and kOneShotMaxExtraBytes
/// above two-shot's bytes), two-shot above; both thresholds compare
/// bytes x (nranks - 1), what one-shot sends per rank.
ReducePath reducePath(const GpuCollSettings& s, CommShape shape, uint64_t bytes);

/// A call whose relay area (the larger of its input and output bytes on a
/// rank) is `areaBytes` goes through the host relay: some pair unmapped and
/// 0 < areaBytes <= gpu_host_relay_bytes, or any areaBytes > 0 with relayAll.
bool usesRelay(const GpuCollSettings& s, CommShape shape, uint64_t areaBytes);
/// Relayed calls above gpu_host_relay_bytes go in pieces (relay_pieces.hpp).
bool relaysInPieces(const GpuCollSettings& s, uint64_t areaBytes);
/// Send, recv and sendrecv go through the host relay (in pieces): relayAll
/// on a communicator with an unmapped pair.
bool p2pUsesRelay(const GpuCollSettings& s, CommShape shape);

/// The relay's data area when every call is relayed: a call moves through
/// the host in pieces of this many bytes (the larger, the fewer host calls;
/// pinned memory of this size per rank).
inline constexpr uint64_t kRelayPieceBytes = 4 << 20;

/// Largest chunk a pipeline block sends each peer per step when a step
/// sends to `fanout` peers: gpu_chunk_bytes with one peer or any unmapped
/// pair (each chunk a network message); over mappings gpu_chunk_bytes /
/// fanout rounded down to a power of two (at least 1 KiB), so a step moves
/// about one slot in all and a block keeps several steps in flight
/// (4 x H200, allreduce 256 MiB: 128 KiB chunks 281 GB/s busbw, 512 KiB 224).
uint64_t pipelineChunkCap(const GpuCollSettings& s, CommShape shape, int fanout);

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

/// One rank's GPU as the block cap sees it.
struct GpuSeat {
  std::string gpu;          ///< Host and PCI bus id: equal for ranks sharing a GPU.
  uint64_t residentBlocks;  ///< Blocks of the collective kernels the GPU keeps resident at once.
};

/// Largest grid every rank may launch so that every block of every rank
/// sharing a GPU (CUDA MPS) is resident at once: the pipelined kernels
/// spin on other ranks' blocks, so a block left waiting for an SM behind
/// spinning blocks would never run (3 ranks x 128 blocks on one H100 hung).
/// The minimum over ranks of residentBlocks / ranks on that GPU, at least 1.
/// The same on every rank given the same seats.
uint32_t sharedGpuBlockCap(const std::vector<GpuSeat>& seats);

/// Largest payload (bytes) one rank sends a peer in any LL call (a whole
/// allreduce / broadcast, or one rank block): what the LL area holds.
uint64_t largestLLBytes(const GpuCollSettings& s, int nranks);

}  // namespace gpucoll
}  // namespace plugboard
