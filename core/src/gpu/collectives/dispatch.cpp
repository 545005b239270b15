// GpuCollectives calls: check arguments (before anything is enqueued),
// pick the algorithm and chunk size from the call's arguments and the
// settings only (so every rank picks the same), and enqueue one kernel.
#include <cstring>
#include <string>

#include "gpu/collectives/algorithm.hpp"
#include "gpu/collectives/collectives_impl.hpp"
#include "gpu/collectives/kernels.hpp"
#include "gpu/collectives/relay_pieces.hpp"
#include "gpu/cuda_check.hpp"

namespace plugboard {
namespace gpucoll {

bool supportedType(DataType type) {
  return static_cast<int>(type) >= static_cast<int>(DataType::Int8) &&
         static_cast<int>(type) <= static_cast<int>(DataType::Float8E5M2);
}

void loadKernel(const void* fn, uint32_t threads, size_t shared, uint32_t* perSM) {
  cudaFuncAttributes attr;
  PB_CUDA_CHECK(cudaFuncGetAttributes(&attr, fn));
  int blocks = 0;
  PB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, static_cast<int>(threads), shared));
  const uint32_t resident = blocks > 0 ? static_cast<uint32_t>(blocks) : 1;
  if (resident < *perSM) *perSM = resident;
}

bool supportedOp(ReduceOp op) {
  return static_cast<int>(op) >= static_cast<int>(ReduceOp::Sum) && static_cast<int>(op) <= static_cast<int>(ReduceOp::Avg);
}

}  // namespace gpucoll

namespace {

using gpucoll::Coll;

/// Argument checks of one call; every failure is Error(InvalidUsage) naming rank and call.
struct CallCheck {
  int rank, nranks;
  const char* what;

  [[noreturn]] void fail(const std::string& why) const {
    throw Error(ErrorCode::InvalidUsage, "rank " + std::to_string(rank) + ": GPU " + what + ": " + why);
  }
  void type(DataType t) const {
    if (!gpucoll::supportedType(t)) fail("data type " + std::to_string(static_cast<int>(t)) + " is not a DataType");
  }
  void op(ReduceOp o) const {
    if (!gpucoll::supportedOp(o)) fail("reduce op " + std::to_string(static_cast<int>(o)) + " is not a ReduceOp");
  }
  void buffer(const void* p, const char* name, size_t count, DataType t) const {
    if (count == 0) return;
    if (!p) fail(std::string(name) + " is null with count " + std::to_string(count));
    if (reinterpret_cast<uintptr_t>(p) % dataTypeSize(t))
      fail(std::string(name) + " is not aligned to its " + std::to_string(dataTypeSize(t)) + "-byte elements");
  }
  void rankArg(int r, const char* name, bool selfAllowed) const {
    if (r < 0 || r >= nranks) fail(std::string(name) + " " + std::to_string(r) + " is out of range [0, " + std::to_string(nranks) + ")");
    if (!selfAllowed && r == rank) fail(std::string(name) + " is this rank");
  }
};

uint64_t roundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

}  // namespace

/// Smallest chunk when some pair goes through the proxy: each chunk is a
/// network message, so a small call stays on one block (one message per
/// peer) rather than being split into messages of a few KiB.
static constexpr uint64_t kPortMinChunk = 64 << 10;

/// Chunk for `bytes` per peer of a pipeline whose steps send to `fanout`
/// peers: spread over the call's blocks, within [1 KiB (kPortMinChunk over
/// the proxy), pipelineChunkCap].
static uint64_t chunkFor(const GpuCollectives::Impl& m, uint64_t bytes, int fanout) {
  uint64_t c = roundUp((bytes + m.blocks - 1) / m.blocks, 16);
  const uint64_t least = m.portPairs ? kPortMinChunk : 1024;
  const uint64_t cap = gpucoll::pipelineChunkCap(m.settings, {m.nranks, m.portPairs}, fanout);
  if (c < least) c = least;
  return c < cap ? c : cap;
}

/// Same-rank copy for a single-rank communicator (or a local block).
static void copyAsync(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (dst != src && bytes) PB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
}

/// The communicator's shape as the path choice sees it.
static gpucoll::CommShape shapeOf(const GpuCollectives::Impl& m) { return {m.nranks, m.portPairs}; }

/// Launches the reducing pipeline kernel for a call already checked
/// (oneShot: allreduce / reduce on the one-shot path).
static void reducePipeline(GpuCollectives::Impl& m, const void* send, void* recv, size_t count, DataType type,
                           ReduceOp op, Coll coll, int root, bool oneShot, cudaStream_t stream,
                           const gpucoll::PreMulArgs& preMul = {}) {
  const uint64_t E = dataTypeSize(type), unit = 16 / E;
  uint64_t longest = count;
  if (coll != Coll::ReduceScatter && !oneShot) longest = (roundUp(count, unit) / unit + m.nranks - 1) / m.nranks * unit;
  if (longest > count) longest = count;
  gpucoll::ReduceArgs a{static_cast<const char*>(send), static_cast<char*>(recv), count,
                        chunkFor(m, longest * E, m.nranks - 1) / E, unit, coll, root, oneShot,
                        gpucoll::resultDivisor(op, m.nranks), preMul};
  gpucoll::launchReduce(m.ctx, a, type, op, m.settings.threads, stream);
}

/// Launches the relay kernel for `a`; announces it to the host thread
/// after the launch (a failed launch posts nothing), not while capturing:
/// the graph's replays may come much later (the idle poll finds them).
static void launchRelayKernel(GpuCollectives::Impl& m, const gpucoll::RelayArgs& a, cudaStream_t stream) {
  gpucoll::launchRelay(m.ctx, m.relay->device(), a, m.settings.threads, stream);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) == cudaSuccess && capture == cudaStreamCaptureStatusNone)
    m.relay->expectCall();
}

/// Enqueues a relayed piece's copy into the relay's data area (the copy
/// engine; rows at their pitches).
static void copyRowsIn(const gpucoll::RelayCopy& c, const char* user, char* area, cudaStream_t stream) {
  if (c.empty()) return;
  const size_t userPitch = c.rows > 1 ? c.userPitch : c.bytes, areaPitch = c.rows > 1 ? c.areaPitch : c.bytes;
  PB_CUDA_CHECK(cudaMemcpy2DAsync(area + c.areaOffset, areaPitch, user + c.userOffset, userPitch, c.bytes, c.rows,
                                  cudaMemcpyDefault, stream));
}

/// The same out of the data area into the caller's buffer.
static void copyRowsOut(const gpucoll::RelayCopy& c, char* user, const char* area, cudaStream_t stream) {
  if (c.empty()) return;
  const size_t userPitch = c.rows > 1 ? c.userPitch : c.bytes, areaPitch = c.rows > 1 ? c.areaPitch : c.bytes;
  PB_CUDA_CHECK(cudaMemcpy2DAsync(user + c.userOffset, userPitch, area + c.areaOffset, areaPitch, c.bytes, c.rows,
                                  cudaMemcpyDefault, stream));
}

/// A relayed call larger than gpu_host_relay_bytes (with `failover`): in
/// pieces of the relay's area, each copied in, run by the host and copied
/// out on the stream in turn.
static void launchRelayedPieces(GpuCollectives::Impl& m, const gpucoll::RelayCallShape& shape, const void* send,
                                void* recv, cudaStream_t stream) {
  char* area = m.relay->device().data;
  for (const gpucoll::RelayPiece& p : gpucoll::relayPieces(shape, m.relay->capacity())) {
    copyRowsIn(p.in, static_cast<const char*>(send), area, stream);
    launchRelayKernel(m, {nullptr, nullptr, 0, 0, 0, 0, p.call, true}, stream);
    copyRowsOut(p.out, static_cast<char*>(recv), area, stream);
  }
}

/// A call through the host relay. The data area holds the host
/// collective's in-place layout: allgather sends into this rank's block,
/// reducescatter's result is this rank's block, the rest start at 0; a
/// reduce's non-roots copy nothing back, a broadcast's non-roots nothing in.
static void launchRelayed(GpuCollectives::Impl& m, Coll coll, const void* send, void* recv, size_t count,
                          DataType type, ReduceOp op, int root, cudaStream_t stream) {
  const uint64_t bytes = count * dataTypeSize(type), all = bytes * static_cast<uint64_t>(m.nranks);
  const uint64_t mine = bytes * static_cast<uint64_t>(m.rank);
  const bool blocked = coll == Coll::AllGather || coll == Coll::ReduceScatter || coll == Coll::AllToAll;
  if (gpucoll::relaysInPieces(m.settings, blocked ? all : bytes)) {
    gpucoll::RelayCallShape shape{coll, count, 0, static_cast<uint32_t>(type), static_cast<uint32_t>(op),
                                  static_cast<uint32_t>(dataTypeSize(type)), m.rank, m.nranks, root, -1};
    return launchRelayedPieces(m, shape, send, recv, stream);
  }
  gpucoll::RelayArgs a{static_cast<const char*>(send), static_cast<char*>(recv), bytes, 0, bytes, 0,
                       {count, static_cast<uint32_t>(type), static_cast<uint32_t>(op), static_cast<uint32_t>(coll), root}};
  switch (coll) {
    case Coll::Reduce: a.outBytes = m.rank == root ? bytes : 0; break;
    case Coll::Broadcast: a.inBytes = m.rank == root ? bytes : 0; break;
    case Coll::AllGather: a.inOffset = mine; a.outBytes = all; break;
    case Coll::ReduceScatter: a.inBytes = all; a.outOffset = mine; break;
    case Coll::AllToAll: a.inBytes = a.outBytes = all; break;
    default: break;  // allreduce
  }
  launchRelayKernel(m, a, stream);
}

/// Send, recv or sendrecv through the host relay (p2pUsesRelay), in pieces
/// cut alike at both ends of each message.
static void relayPointToPoint(GpuCollectives::Impl& m, Coll coll, const void* send, uint64_t sendCount, int sendPeer,
                              void* recv, uint64_t recvCount, int recvPeer, DataType type, cudaStream_t stream) {
  gpucoll::RelayCallShape shape{coll, coll == Coll::Recv ? recvCount : sendCount, recvCount,
                                static_cast<uint32_t>(type), 0, static_cast<uint32_t>(dataTypeSize(type)),
                                m.rank, m.nranks, coll == Coll::Recv ? recvPeer : sendPeer, recvPeer};
  launchRelayedPieces(m, shape, send, recv, stream);
}

/// Allreduce or reduce of a checked call on more than one rank, on the path
/// reducePath picks (a reduce's non-roots pass a null recv to LL).
static void launchReducing(GpuCollectives::Impl& m, const void* send, void* recv, size_t count, DataType type,
                           ReduceOp op, Coll coll, int root, cudaStream_t stream) {
  const gpucoll::ReducePath path = gpucoll::reducePath(m.settings, shapeOf(m), count * dataTypeSize(type));
  if (path == gpucoll::ReducePath::Relay) return launchRelayed(m, coll, send, recv, count, type, op, root, stream);
  if (path == gpucoll::ReducePath::LL)
    return gpucoll::launchLL(m.ctx, coll, send, coll == Coll::Reduce && m.rank != root ? nullptr : recv, count, type,
                             op, root, m.settings.threads, stream);
  reducePipeline(m, send, recv, count, type, op, coll, root, path == gpucoll::ReducePath::OneShot, stream);
}

/// After the argument checks of a call: rethrows a recorded failure, says
/// whether there is work (count > 0), and checks the current device.
static bool startCall(GpuCollectives::Impl& m, size_t count) {
  m.throwIfFailed();
  if (count == 0) return false;
  m.checkDevice();
  return true;
}

static void movePipeline(GpuCollectives::Impl& m, const void* src, void* dst, uint64_t bytes, Coll coll, int peer,
                         cudaStream_t stream) {
  // Allgather, alltoall and a broadcast's root send to every peer per step; send / recv to one.
  const int fanout = coll == Coll::Send || coll == Coll::Recv ? 1 : m.nranks - 1;
  gpucoll::MoveArgs a{static_cast<const char*>(src), static_cast<char*>(dst), bytes, chunkFor(m, bytes, fanout), coll,
                      peer};
  gpucoll::launchMove(m.ctx, a, m.settings.threads, stream);
}

namespace {

/// allreduce and reducescatter: the checks of a call with send and recv of
/// count elements, then startCall.
bool startSymmetricReducing(GpuCollectives::Impl& m, const char* name, const void* send, const void* recv,
                            size_t count, DataType type, ReduceOp op) {
  CallCheck k{m.rank, m.nranks, name};
  k.type(type);
  k.op(op);
  k.buffer(send, "send buffer", count, type);
  k.buffer(recv, "recv buffer", count, type);
  return startCall(m, count);
}

/// A reduce's argument checks (recv only on the root), then startCall.
bool startReduce(GpuCollectives::Impl& m, const void* send, const void* recv, size_t count, DataType type,
                 ReduceOp op, int root) {
  CallCheck k{m.rank, m.nranks, "reduce"};
  k.type(type);
  k.op(op);
  k.rankArg(root, "root", true);
  k.buffer(send, "send buffer", count, type);
  if (m.rank == root) k.buffer(recv, "recv buffer", count, type);
  return startCall(m, count);
}

}  // namespace

void GpuCollectives::allReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                               cudaStream_t stream) {
  Impl& m = *impl_;
  if (!startSymmetricReducing(m, "allreduce", send, recv, count, type, op)) return;
  if (m.nranks == 1) return copyAsync(recv, send, count * dataTypeSize(type), stream);
  const uint64_t bytes = count * dataTypeSize(type);
  if (m.plans && m.plans->run("allreduce", bytes, send, recv, count, type, op, stream)) return;
  if (m.switchChannel && SwitchChannel::supports(type, op) &&
      gpucoll::reducePath(m.settings, shapeOf(m), bytes) != gpucoll::ReducePath::LL)
    return gpucoll::launchSwitchAllReduce(m.ctx, m.switchHandle, {static_cast<const char*>(send),
                                          static_cast<char*>(recv), bytes, m.switchCellBytes,
                                          Coll::AllReduce}, type, op,
                                          m.settings.threads, stream);
  launchReducing(m, send, recv, count, type, op, Coll::AllReduce, 0, stream);
}

void GpuCollectives::reduceScatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                                   cudaStream_t stream) {
  Impl& m = *impl_;
  if (!startSymmetricReducing(m, "reducescatter", send, recv, count, type, op)) return;
  if (m.nranks == 1) return copyAsync(recv, send, count * dataTypeSize(type), stream);
  const size_t planInput = count * m.nranks;
  if (m.plans && m.plans->run("reducescatter", planInput * dataTypeSize(type), send, recv, planInput, type, op, stream))
    return;
  if (gpucoll::usesRelay(m.settings, shapeOf(m), planInput * dataTypeSize(type)))
    return launchRelayed(m, Coll::ReduceScatter, send, recv, count, type, op, 0, stream);
  if (gpucoll::blocksUseLL(m.settings, shapeOf(m), count * dataTypeSize(type)))
    return gpucoll::launchLL(m.ctx, Coll::ReduceScatter, send, recv, count, type, op, 0, m.settings.threads, stream);
  reducePipeline(m, send, recv, count, type, op, Coll::ReduceScatter, 0, false, stream);
}

void GpuCollectives::reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root,
                            cudaStream_t stream) {
  Impl& m = *impl_;
  if (!startReduce(m, send, recv, count, type, op, root)) return;
  if (m.nranks == 1) return copyAsync(recv, send, count * dataTypeSize(type), stream);
  launchReducing(m, send, recv, count, type, op, Coll::Reduce, root, stream);
}

namespace {

/// A PreMulSum scalar as the kernels take it.
gpucoll::PreMulArgs preMulArgs(const PreMulScalar& scalar) {
  gpucoll::PreMulArgs a;
  a.on = true;
  a.device = scalar.device;
  std::memcpy(&a.hostBits, scalar.hostValue.data(), sizeof(a.hostBits));
  return a;
}

void requirePreMulType(const GpuCollectives::Impl& m, const char* name, DataType type) {
  if (type == DataType::Float8E4M3 || type == DataType::Float8E5M2)
    throw Error(ErrorCode::InvalidUsage, "rank " + std::to_string(m.rank) + ": " + name +
                                             ": PreMulSum takes no 8-bit float type (got " + dataTypeName(type) + ")");
}

/// body(scaled), scaled = a stream-ordered scratch copy of count elements
/// of send times the scalar, freed after body's work on the stream.
template <typename Body>
void withScaledCopy(const void* send, size_t count, DataType type, const PreMulScalar& scalar, cudaStream_t stream,
                    Body&& body) {
  const size_t bytes = count * dataTypeSize(type);
  void* scaled = nullptr;
  PB_CUDA_CHECK(cudaMallocAsync(&scaled, bytes ? bytes : 1, stream));
  try {
    preMulScale(scaled, send, count, type, scalar, stream);
    body(static_cast<const void*>(scaled));
  } catch (...) {
    cudaFreeAsync(scaled, stream);
    throw;
  }
  PB_CUDA_CHECK(cudaFreeAsync(scaled, stream));
}

}  // namespace

void GpuCollectives::allReduce(const void* send, void* recv, size_t count, DataType type, const PreMulScalar& scalar,
                               cudaStream_t stream) {
  Impl& m = *impl_;
  requirePreMulType(m, "allreduce", type);
  if (!startSymmetricReducing(m, "allreduce", send, recv, count, type, ReduceOp::Sum)) return;
  if (m.nranks == 1) return preMulScale(recv, send, count, type, scalar, stream);
  const gpucoll::ReducePath path = gpucoll::reducePath(m.settings, shapeOf(m), count * dataTypeSize(type));
  if (path == gpucoll::ReducePath::LL)
    return gpucoll::launchLL(m.ctx, Coll::AllReduce, send, recv, count, type, ReduceOp::Sum, 0, m.settings.threads,
                             stream, preMulArgs(scalar));
  if (path == gpucoll::ReducePath::TwoShot || path == gpucoll::ReducePath::OneShot)
    return reducePipeline(m, send, recv, count, type, ReduceOp::Sum, Coll::AllReduce, 0,
                          path == gpucoll::ReducePath::OneShot, stream, preMulArgs(scalar));
  preMulScale(recv, send, count, type, scalar, stream);  // recv holds count elements too: no scratch
  allReduce(recv, recv, count, type, ReduceOp::Sum, stream);
}

void GpuCollectives::reduceScatter(const void* send, void* recv, size_t count, DataType type,
                                   const PreMulScalar& scalar, cudaStream_t stream) {
  Impl& m = *impl_;
  requirePreMulType(m, "reducescatter", type);
  if (!startSymmetricReducing(m, "reducescatter", send, recv, count, type, ReduceOp::Sum)) return;
  if (m.nranks == 1) return preMulScale(recv, send, count, type, scalar, stream);
  const uint64_t input = count * m.nranks * dataTypeSize(type);
  if (!gpucoll::usesRelay(m.settings, shapeOf(m), input)) {
    if (gpucoll::blocksUseLL(m.settings, shapeOf(m), count * dataTypeSize(type)))
      return gpucoll::launchLL(m.ctx, Coll::ReduceScatter, send, recv, count, type, ReduceOp::Sum, 0,
                               m.settings.threads, stream, preMulArgs(scalar));
    return reducePipeline(m, send, recv, count, type, ReduceOp::Sum, Coll::ReduceScatter, 0, false, stream,
                          preMulArgs(scalar));
  }
  withScaledCopy(send, count * m.nranks, type, scalar, stream,
                 [&](const void* scaled) { reduceScatter(scaled, recv, count, type, ReduceOp::Sum, stream); });
}

void GpuCollectives::reduce(const void* send, void* recv, size_t count, DataType type, const PreMulScalar& scalar,
                            int root, cudaStream_t stream) {
  Impl& m = *impl_;
  requirePreMulType(m, "reduce", type);
  if (!startReduce(m, send, recv, count, type, ReduceOp::Sum, root)) return;
  if (m.nranks == 1) return preMulScale(recv, send, count, type, scalar, stream);
  const gpucoll::ReducePath path = gpucoll::reducePath(m.settings, shapeOf(m), count * dataTypeSize(type));
  if (path == gpucoll::ReducePath::LL)  // a non-root stores nothing: no recv
    return gpucoll::launchLL(m.ctx, Coll::Reduce, send, m.rank != root ? nullptr : recv, count, type, ReduceOp::Sum,
                             root, m.settings.threads, stream, preMulArgs(scalar));
  if (path == gpucoll::ReducePath::TwoShot || path == gpucoll::ReducePath::OneShot)
    return reducePipeline(m, send, recv, count, type, ReduceOp::Sum, Coll::Reduce, root,
                          path == gpucoll::ReducePath::OneShot, stream, preMulArgs(scalar));
  withScaledCopy(send, count, type, scalar, stream,
                 [&](const void* scaled) { reduce(scaled, recv, count, type, ReduceOp::Sum, root, stream); });
}

namespace {

/// allgather and alltoall: count elements per rank block in both buffers,
/// no root; they differ only in which block goes where (the kernel's coll).
void symmetricMove(GpuCollectives::Impl& m, const char* name, Coll coll, const void* send, void* recv, size_t count,
                   DataType type, cudaStream_t stream) {
  CallCheck k{m.rank, m.nranks, name};
  k.type(type);
  k.buffer(send, "send buffer", count, type);
  k.buffer(recv, "recv buffer", count, type);
  if (!startCall(m, count)) return;
  const uint64_t bytes = count * dataTypeSize(type);
  if (m.nranks == 1) return copyAsync(recv, send, bytes, stream);
  // A plan's input: allgather this rank's block, alltoall every block.
  const size_t planInput = coll == Coll::AllGather ? count : count * m.nranks;
  if (m.plans && m.plans->run(name, bytes * m.nranks, send, recv, planInput, type, ReduceOp::Sum, stream)) return;
  if (gpucoll::usesRelay(m.settings, shapeOf(m), bytes * m.nranks))
    return launchRelayed(m, coll, send, recv, count, type, ReduceOp::Sum, 0, stream);
  if (gpucoll::blocksUseLL(m.settings, shapeOf(m), bytes))
    return gpucoll::launchLL(m.ctx, coll, send, recv, count, type, ReduceOp::Sum, 0, m.settings.threads, stream);
  if (coll == Coll::AllGather && m.switchChannel)
    return gpucoll::launchSwitchAllGather(m.ctx, m.switchHandle, {static_cast<const char*>(send),
                                          static_cast<char*>(recv), bytes, m.switchCellBytes,
                                          Coll::AllGather}, m.settings.threads,
                                          stream);
  movePipeline(m, send, recv, bytes, coll, 0, stream);
}

}  // namespace

void GpuCollectives::allGather(const void* send, void* recv, size_t count, DataType type, cudaStream_t stream) {
  symmetricMove(*impl_, "allgather", Coll::AllGather, send, recv, count, type, stream);
}

void GpuCollectives::broadcast(const void* send, void* recv, size_t count, DataType type, int root,
                               cudaStream_t stream) {
  Impl& m = *impl_;
  CallCheck k{m.rank, m.nranks, "broadcast"};
  k.type(type);
  k.rankArg(root, "root", true);
  if (m.rank == root) k.buffer(send, "send buffer", count, type);
  k.buffer(recv, "recv buffer", count, type);
  if (!startCall(m, count)) return;
  const uint64_t bytes = count * dataTypeSize(type);
  if (m.nranks == 1) return copyAsync(recv, send, bytes, stream);
  if (gpucoll::usesRelay(m.settings, shapeOf(m), bytes))
    return launchRelayed(m, Coll::Broadcast, send, recv, count, type, ReduceOp::Sum, root, stream);
  if (gpucoll::broadcastUsesLL(m.settings, shapeOf(m), bytes))
    return gpucoll::launchLL(m.ctx, Coll::Broadcast, m.rank == root ? send : nullptr, recv, count, type,
                             ReduceOp::Sum, root, m.settings.threads, stream);
  movePipeline(m, send, recv, bytes, Coll::Broadcast, root, stream);
}

void GpuCollectives::allToAll(const void* send, void* recv, size_t count, DataType type, cudaStream_t stream) {
  symmetricMove(*impl_, "alltoall", Coll::AllToAll, send, recv, count, type, stream);
}

void GpuCollectives::send(const void* buf, size_t count, DataType type, int peer, cudaStream_t stream) {
  Impl& m = *impl_;
  CallCheck k{m.rank, m.nranks, "send"};
  k.type(type);
  k.rankArg(peer, "peer", false);
  k.buffer(buf, "buffer", count, type);
  if (!startCall(m, count)) return;
  if (gpucoll::p2pUsesRelay(m.settings, shapeOf(m)))
    return relayPointToPoint(m, Coll::Send, buf, count, peer, nullptr, 0, -1, type, stream);
  const uint64_t bytes = count * dataTypeSize(type);
  if (gpucoll::p2pUsesLL(m.settings, shapeOf(m), bytes))
    return gpucoll::launchP2PLL(m.ctx, {static_cast<const char*>(buf), nullptr, bytes, 0, peer, peer, Coll::Send},
                                m.settings.threads, stream);
  movePipeline(m, buf, nullptr, bytes, Coll::Send, peer, stream);
}

void GpuCollectives::recv(void* buf, size_t count, DataType type, int peer, cudaStream_t stream) {
  Impl& m = *impl_;
  CallCheck k{m.rank, m.nranks, "recv"};
  k.type(type);
  k.rankArg(peer, "peer", false);
  k.buffer(buf, "buffer", count, type);
  if (!startCall(m, count)) return;
  if (gpucoll::p2pUsesRelay(m.settings, shapeOf(m)))
    return relayPointToPoint(m, Coll::Recv, nullptr, 0, -1, buf, count, peer, type, stream);
  const uint64_t bytes = count * dataTypeSize(type);
  if (gpucoll::p2pUsesLL(m.settings, shapeOf(m), bytes))
    return gpucoll::launchP2PLL(m.ctx, {nullptr, static_cast<char*>(buf), 0, bytes, peer, peer, Coll::Recv},
                                m.settings.threads, stream);
  movePipeline(m, nullptr, buf, bytes, Coll::Recv, peer, stream);
}

void GpuCollectives::sendRecv(const void* sendBuf, size_t sendCount, int sendPeer, void* recvBuf, size_t recvCount,
                              int recvPeer, DataType type, cudaStream_t stream) {
  Impl& m = *impl_;
  CallCheck k{m.rank, m.nranks, "sendrecv"};
  k.type(type);
  k.rankArg(sendPeer, "send peer", false);
  k.rankArg(recvPeer, "recv peer", false);
  k.buffer(sendBuf, "send buffer", sendCount, type);
  k.buffer(recvBuf, "recv buffer", recvCount, type);
  if (!startCall(m, sendCount + recvCount)) return;
  if (gpucoll::p2pUsesRelay(m.settings, shapeOf(m)))
    return relayPointToPoint(m, Coll::SendRecv, sendBuf, sendCount, sendPeer, recvBuf, recvCount, recvPeer, type,
                             stream);
  // Each direction takes the path and chunking of a plain send / recv of
  // its bytes (p2pUsesLL, chunkFor of those bytes only), so the peer's end
  // agrees whether it calls sendRecv, send or recv. With one direction LL
  // and the other pipelined: the LL send first (it waits for no part of
  // the peer's current call), the LL receive last (the peer may send it
  // after its pipelined part), so no order of the peer's calls deadlocks.
  const uint64_t E = dataTypeSize(type), sendBytes = sendCount * E, recvBytes = recvCount * E;
  const bool sendLL = gpucoll::p2pUsesLL(m.settings, shapeOf(m), sendBytes);
  const bool recvLL = gpucoll::p2pUsesLL(m.settings, shapeOf(m), recvBytes);
  const char* src = static_cast<const char*>(sendBuf);
  char* dst = static_cast<char*>(recvBuf);
  const uint32_t threads = m.settings.threads;
  if ((sendLL || !sendBytes) && (recvLL || !recvBytes))
    return gpucoll::launchP2PLL(m.ctx, {src, dst, sendBytes, recvBytes, sendPeer, recvPeer, Coll::SendRecv}, threads,
                                stream);
  if (sendLL) gpucoll::launchP2PLL(m.ctx, {src, nullptr, sendBytes, 0, sendPeer, recvPeer, Coll::SendRecv}, threads, stream);
  const uint64_t pipeSend = sendLL ? 0 : sendBytes, pipeRecv = recvLL ? 0 : recvBytes;
  gpucoll::SendRecvArgs a{src, dst, pipeSend, chunkFor(m, pipeSend, 1), pipeRecv, chunkFor(m, pipeRecv, 1), sendPeer, recvPeer};
  gpucoll::launchSendRecv(m.ctx, a, threads, stream);
  if (recvLL) gpucoll::launchP2PLL(m.ctx, {nullptr, dst, 0, recvBytes, sendPeer, recvPeer, Coll::SendRecv}, threads, stream);
}

}  // namespace plugboard
