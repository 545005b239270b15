// One-shot LL16 kernels for small messages: every rank writes a payload
// of `bytes` as LL16 packets (8 payload bytes + 2 flags per 16 bytes) into
// every peer's LL area, then takes the packets it received with its own
// payload, in rank order. The payload and what is done with it depend on
// the collective:
//  - allreduce, reduce, broadcast: the whole input goes to every peer;
//    reduced with the op (allreduce everywhere, reduce stored at the root
//    only) or the root's payload taken as is (broadcast);
//  - reducescatter: input block p (of `bytes`) goes to peer p; the packets
//    received and the own block are reduced into the output;
//  - allgather: the input goes to every peer; alltoall: input block p to
//    peer p; what arrives from rank q is stored as output block q.
// No semaphore: a packet is there when its flags match.
//
// Invariants:
//  - Every pair of the communicator is mapped (c.remote[p] non-null): with
//    any PortChannel pair, dispatch uses the pipelined kernels, and the
//    layout has no LL area.
//  - The flag of a call comes from device counters (state LL entries, one
//    per block of gpu_blocks, all equal between calls) that the kernel
//    advances itself, so replays of a captured graph use new flags. Block b
//    reads and advances entry b; block 0 also advances the entries of the
//    blocks this call's grid does not run (no block of the call reads them).
//    The next call starts after this one (stream order).
//  - Call k uses LL buffer parity k % 2. A rank can reach call k + 2 (same
//    parity) only after reading every peer's packets of call k + 1, which a
//    peer writes only after it finished reading call k: no packet is
//    overwritten unread. So every LL call is all-to-all: in a reduce the
//    non-roots read and drop the packets, in a broadcast the non-roots send
//    zero packets that every rank reads and drops.
//  - Thread t sends packet i of every block and later writes output packet
//    i of every block itself, so an in-place call reads each input byte
//    before overwriting it (in-place allgather: its own block, already in
//    place, is not stored again).
//  - The grid is sized to the packets (one per thread, at most G blocks):
//    a few-byte call runs one block.
//  - A PreMulSum (LLArgs::preMul, Sum kernels) scales this rank's input as
//    each packet of it is loaded: what goes to peers and the own operand.
#include "gpu/collectives/kernels.hpp"
#include "gpu/collectives/ll_packet.cuh"
#include "gpu/collectives/pipe_device.cuh"
#include "gpu/collectives/type_dispatch.cuh"
#include "gpu/cuda_check.hpp"

namespace plugboard::gpucoll {
namespace {

/// The LL kernel's arguments: allreduce (root unused), reduce, broadcast,
/// reducescatter, allgather or alltoall.
struct LLArgs {
  const char* send;  ///< Null for a broadcast's non-roots (they send zeros).
  char* recv;        ///< Null for a reduce's non-roots (nothing stored).
  uint64_t bytes;    ///< Payload per peer: the whole call, or one rank block.
  Coll coll;
  int root;
  uint32_t divisor;  ///< Results are divided by it (avg: the rank count; else 1).
  PreMulArgs preMul;  ///< Sum only: the input is scaled first (PreMulSum).

  /// Peer p gets input block p (else the whole input).
  __device__ bool blocked() const { return coll == Coll::ReduceScatter || coll == Coll::AllToAll; }
  /// What arrives from rank q is stored as output block q (nothing reduced).
  __device__ bool gathers() const { return coll == Coll::AllGather || coll == Coll::AllToAll; }
};

template <typename T, typename Op>
__global__ void __launch_bounds__(kMaxBlockThreads, 1) llKernel(DeviceCtx c, LLArgs a) {
  using A = typename Acc<T>::type;
  constexpr int kPer = 8 / sizeof(T);
  uint64_t* calls = c.state + 4ull * c.nranks * c.blocks;
  const uint64_t call = calls[blockIdx.x] + 1;
  const uint32_t flag = llFlag(call);
  const uint64_t parity = call & 1, packets = (a.bytes + 7) / 8;
  const uint64_t gtid = blockIdx.x * blockDim.x + threadIdx.x, gsize = gridDim.x * blockDim.x;
  const ScratchLayout& L = c.layout;
  const uint64_t mine = L.ll + (2ull * c.rank + parity) * L.llHalf;  // my area in every peer
  const bool pick = a.coll == Coll::Broadcast, blocked = a.blocked(), gathers = a.gathers();
  T scale{};
  const bool scaled = preMulScalar<T, Op>(a.preMul, &scale);
  // Packet i of the payload for rank p (zeros without an input), scaled for a PreMulSum.
  auto payload = [&](int p, uint64_t i) {
    if (!a.send) return make_uint2(0, 0);
    uint2 v = loadPayload(a.send + (blocked ? static_cast<uint64_t>(p) * a.bytes : 0), i, a.bytes);
    if (scaled) {
      T* e = reinterpret_cast<T*>(&v);
#pragma unroll
      for (int j = 0; j < kPer; ++j) e[j] = preMul(e[j], scale);
    }
    return v;
  };
  auto own = [&](uint64_t i) { return payload(c.rank, i); };
  for (uint64_t i = gtid; i < packets; i += gsize) {
    if (blocked) {
      for (int p = 0; p < c.nranks; ++p)
        if (p != c.rank) storePacket(c.remote[p] + mine + 16 * i, payload(p, i), flag);
      continue;
    }
    const uint2 v = own(i);
    for (int p = 0; p < c.nranks; ++p)
      if (p != c.rank) storePacket(c.remote[p] + mine + 16 * i, v, flag);
  }
  bool ok = true;
  for (uint64_t i = gtid; ok && i < packets; i += gsize) {
    A acc[kPer];
    uint2 picked = make_uint2(0, 0);
    for (int q = 0; q < c.nranks && ok; ++q) {
      uint2 v;
      if (q == c.rank) v = own(i);
      else ok = pollPacket(c, c.local + L.ll + (2ull * q + parity) * L.llHalf + 16 * i, flag, q, a.coll, v);
      if (gathers) {
        char* block = a.recv + static_cast<uint64_t>(q) * a.bytes;
        const char* from = a.send + (blocked ? static_cast<uint64_t>(q) * a.bytes : 0);
        if (ok && (q != c.rank || block != from)) storeResult(block, i, a.bytes, v);
        continue;
      }
      if (pick) {
        if (q == a.root) picked = v;
        continue;
      }
      const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
      for (int j = 0; j < kPer; ++j) acc[j] = q == 0 ? Acc<T>::in(e[j]) : Op::template apply<T, A>(acc[j], Acc<T>::in(e[j]));
    }
    if (!ok) break;
    if (!a.recv || gathers) continue;
    uint2 out = picked;
    if (!pick) {
      T* o = reinterpret_cast<T*>(&out);
#pragma unroll
      for (int j = 0; j < kPer; ++j) o[j] = finish<T>(acc[j], a.divisor);
    }
    storeResult(a.recv, i, a.bytes, out);
  }
  __syncthreads();  // every thread of the block read calls[blockIdx.x]
  if (threadIdx.x == 0) calls[blockIdx.x] = call;
  if (blockIdx.x == 0)
    for (uint32_t b = gridDim.x + threadIdx.x; b < static_cast<uint32_t>(c.blocks); b += blockDim.x) calls[b] = call;
}

/// Grid of an LL call: one packet per thread, at most G blocks.
uint32_t llGrid(const DeviceCtx& c, uint64_t bytes, uint32_t threads) {
  const uint64_t needed = ((bytes + 7) / 8 + threads - 1) / threads;
  return static_cast<uint32_t>(needed < static_cast<uint64_t>(c.blocks) ? needed : c.blocks);
}

}  // namespace

void launchLL(const DeviceCtx& c, Coll coll, const void* send, void* recv, uint64_t count, DataType type,
              ReduceOp op, int root, uint32_t threads, cudaStream_t stream, const PreMulArgs& preMul) {
  const uint64_t bytes = count * dataTypeSize(type);
  const LLArgs a{static_cast<const char*>(send), static_cast<char*>(recv), bytes, coll, root,
                 resultDivisor(op, c.nranks), preMul};
  const uint32_t grid = llGrid(c, bytes, threads);
  if (coll == Coll::Broadcast || coll == Coll::AllGather || coll == Coll::AllToAll) {
    // bytes moved as they are: one instance serves every type
    llKernel<uint8_t, OpSum><<<grid, threads, 0, stream>>>(c, a);
  } else {
    dispatchTypeOp(type, op, [&](auto t, auto o) {
      llKernel<decltype(t), decltype(o)><<<grid, threads, 0, stream>>>(c, a);
    });
  }
  PB_CUDA_CHECK(cudaGetLastError());
}

void preloadLLKernels(uint32_t threads, uint32_t* perSM) {
  for (DataType t : kAllTypes)
    for (ReduceOp op : kKernelOps)
      dispatchTypeOp(t, op, [&](auto tv, auto ov) {
        loadKernel(reinterpret_cast<const void*>(llKernel<decltype(tv), decltype(ov)>), threads, 0, perSM);
      });
}

}  // namespace plugboard::gpucoll
