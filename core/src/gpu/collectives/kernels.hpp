// Host entry points of the collective kernels (one .cu per family). Each
// launch only enqueues on the stream (graph-capturable) and throws
// Error(System) when the launch itself fails.
#pragma once

#include <cuda_runtime.h>

#include "gpu/collectives/device_ctx.hpp"
#include "gpu/collectives/relay_words.hpp"
#include "plugboard/datatype.hpp"
#include "plugboard/gpu/switch_channel_device.hpp"

namespace plugboard::gpucoll {

/// Dynamic shared memory of the pipe kernels (seq counters, pointers, 4 flag words: BlockPipes).
inline size_t pipesSharedBytes(int nranks) { return 32 * static_cast<size_t>(nranks) + 16; }

/// One-shot LL16 call of count elements per peer (< the LL area), every
/// pair mapped: allreduce, reduce (recv null on non-roots), broadcast (send
/// null on non-roots; type and op unused), reducescatter (count: elements
/// per rank block), allgather or alltoall (count per block; op unused); a
/// grid sized to the packets. preMul: a reducing Sum's PreMulSum scalar.
void launchLL(const DeviceCtx& c, Coll coll, const void* send, void* recv, uint64_t count, DataType type,
              ReduceOp op, int root, uint32_t threads, cudaStream_t stream, const PreMulArgs& preMul = {});
/// Pipelined reducing collective (two-shot allreduce, reducescatter, reduce).
void launchReduce(const DeviceCtx& c, const ReduceArgs& a, DataType type, ReduceOp op, uint32_t threads,
                  cudaStream_t stream);
/// Pipelined byte-moving collective.
void launchMove(const DeviceCtx& c, const MoveArgs& a, uint32_t threads, cudaStream_t stream);
/// Both directions of a sendRecv in one kernel (at least one has bytes).
void launchSendRecv(const DeviceCtx& c, const SendRecvArgs& a, uint32_t threads, cudaStream_t stream);

/// Point-to-point LL16 call (every pair mapped; each direction's bytes below
/// the p2p area, either may be 0); a grid sized to the larger direction.
void launchP2PLL(const DeviceCtx& c, const P2PLLArgs& a, uint32_t threads, cudaStream_t stream);

/// SwitchChannel allreduce (SwitchChannel::supports(type, op)) and
/// allgather: rounds through the group buffer, c.blocks blocks (at most
/// kSwitchBarrierSlots), every rank of the communicator in the group.
void launchSwitchAllReduce(const DeviceCtx& c, const SwitchChannelDeviceHandle& sw, const SwitchCallArgs& a,
                           DataType type, ReduceOp op, uint32_t threads, cudaStream_t stream);
void launchSwitchAllGather(const DeviceCtx& c, const SwitchChannelDeviceHandle& sw, const SwitchCallArgs& a,
                           uint32_t threads, cudaStream_t stream);

/// A call relayed through the host (HostRelay): one block of `threads`.
void launchRelay(const DeviceCtx& c, const RelayDevice& r, const RelayArgs& a, uint32_t threads, cudaStream_t stream);

/// Loads every kernel of a family now (lazy module loading would otherwise
/// load it at first launch, possibly behind a kernel spinning on a peer)
/// and lowers *perSM to how many blocks of `threads` threads of the
/// family's most demanding kernel one SM holds at once (the pipelined
/// kernels spin on other ranks' blocks: see gpucoll::sharedGpuBlockCap).
/// `shared`: the dynamic shared memory the family launches with.
void preloadLLKernels(uint32_t threads, uint32_t* perSM);
void preloadReduceKernels(uint32_t threads, size_t shared, uint32_t* perSM);
void preloadMoveKernels(uint32_t threads, size_t shared, uint32_t* perSM);
void preloadP2PLLKernel(uint32_t threads, uint32_t* perSM);
void preloadSwitchKernels(uint32_t threads, uint32_t* perSM);
/// The relay kernel (one block: it spins on the host, never on other ranks' blocks).
void preloadRelayKernel(uint32_t threads);

/// Loads kernel `fn` and lowers *perSM to its resident blocks per SM.
void loadKernel(const void* fn, uint32_t threads, size_t shared, uint32_t* perSM);

/// True for a value of the DataType enum (every type has GPU kernels).
bool supportedType(DataType type);
/// True for a value of the ReduceOp enum (every op has GPU kernels).
bool supportedOp(ReduceOp op);

/// Divisor of a reduction's results: the rank count for avg, else 1.
inline uint32_t resultDivisor(ReduceOp op, int nranks) { return op == ReduceOp::Avg ? static_cast<uint32_t>(nranks) : 1; }

}  // namespace plugboard::gpucoll
