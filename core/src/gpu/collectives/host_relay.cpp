#include "gpu/collectives/host_relay.hpp"

#include <cstring>

#include <cuda_runtime.h>

#include "gpu/collectives/device_ctx.hpp"
#include "gpu/cuda_check.hpp"
#include "plugboard/error.hpp"
#include "plugboard/gpu/semaphore_device.hpp"
#include "plugboard/logger.hpp"

namespace plugboard::gpucoll {

HostRelay::Pinned::~Pinned() {
  if (host) cudaFreeHost(host);
}

HostRelay::DeviceWord::~DeviceWord() {
  if (ptr) cudaFree(ptr);
}

namespace {

/// Runs call c on the data area in the host collectives' in-place forms
/// (a sendrecv receives over what it sends: the host sends a copy).
void runInPlace(HostCollectives& host, int rank, const RelayCall& c, char* data) {
  const auto type = static_cast<DataType>(c.type);
  const auto op = static_cast<ReduceOp>(c.op);
  char* mine = data + static_cast<uint64_t>(rank) * c.count * dataTypeSize(type);
  switch (static_cast<Coll>(c.coll)) {
    case Coll::AllReduce: return host.allReduce(data, data, c.count, type, op);
    case Coll::Reduce: return host.reduce(data, data, c.count, type, op, c.root);
    case Coll::Broadcast: return host.broadcast(data, data, c.count, type, c.root);
    case Coll::AllGather: return host.allGather(mine, data, c.count, type);
    case Coll::ReduceScatter: return host.reduceScatter(data, mine, c.count, type, op);
    case Coll::AllToAll: return host.allToAll(data, data, c.count, type);
    case Coll::Send: return host.send(data, c.count, type, c.root);
    case Coll::Recv: return host.recv(data, c.count, type, c.root);
    case Coll::SendRecv: return host.sendRecv(data, c.count, c.root, data, c.recvCount, c.recvPeer, type);
    default: throw Error(ErrorCode::Internal, "collective " + std::to_string(c.coll) + " is not relayed");
  }
}

}  // namespace

HostRelay::HostRelay(Communicator& comm, uint64_t capacity) : comm_(comm) {
  // words | data (capacity) | in-packets | out-packets; packets start on a 64-byte line, zeroed (no flag).
  const uint64_t packets = (kRelayDataOffset + capacity + 63) / 64 * 64;
  PB_CUDA_CHECK(cudaHostAlloc(&area_.host, packets + kRelayPacketAreaBytes, cudaHostAllocMapped));
  std::memset(area_.host, 0, kRelayDataOffset);
  std::memset(area_.host + packets, 0, kRelayPacketAreaBytes);
  char* dev = nullptr;
  PB_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev), area_.host, 0));
  PB_CUDA_CHECK(cudaMalloc(&calls_.ptr, sizeof(uint64_t)));
  PB_CUDA_CHECK(cudaMemset(calls_.ptr, 0, sizeof(uint64_t)));
  PB_CUDA_CHECK(cudaDeviceSynchronize());
  auto at = [packets](char* base, uint64_t packet) { return reinterpret_cast<uint64_t*>(base + packets) + packet; };
  device_ = {reinterpret_cast<RelayWords*>(dev), dev + kRelayDataOffset, capacity, calls_.ptr, at(dev, 0),
             at(dev, kRelayInPackets)};
  host_ = std::make_unique<HostCollectives>(comm);
  const std::string who = "rank " + std::to_string(comm.rank()) + " (" + comm.hostOf(comm.rank()) +
                          "): GPU collectives' host relay";
  HostCollectives* host = host_.get();
  const int rank = comm.rank();
  const RelayArea shared{reinterpret_cast<RelayWords*>(area_.host), area_.host + kRelayDataOffset, capacity,
                         at(area_.host, 0), at(area_.host, kRelayInPackets)};
  server_ = std::make_unique<RelayServer>(
      shared, comm.size(),
      [host, rank](const RelayCall& c, char* data) { runInPlace(*host, rank, c, data); }, who);
  PB_LOG(Info, "COLL", who << ": GPU collectives of up to " << capacity << " bytes run on the host");
}

HostRelay::~HostRelay() {
  server_.reset();
  host_.reset();
}

void HostRelay::throwIfFailed(const std::string& timeout) const {
  if (server_->failed())
    throw Error(server_->failureCode(),
                server_->failure() + ". The GPU collectives of this communicator cannot be used any more.");
  const auto* words = reinterpret_cast<const RelayWords*>(area_.host);
  const uint32_t why = __atomic_load_n(&words->deviceError, __ATOMIC_ACQUIRE);
  if (why == kSemaphoreOk) return;
  const char* coll = collName(words->deviceErrorColl);
  std::string msg = "rank " + std::to_string(comm_.rank()) + " (" + comm_.hostOf(comm_.rank()) +
                    "): device wait for the host relay ";
  if (why == kSemaphoreWaitTimeout)
    msg += std::string("timed out in ") + coll + " (call " + std::to_string(words->deviceErrorCall) +
           ", gpu_wait_timeout=" + timeout + "; the host has served " + std::to_string(server_->served()) +
           " calls): did every rank make the same calls in the same order?";
  else
    msg += std::string("was aborted in ") + coll;
  msg += " The GPU collectives of this communicator cannot be used any more.";
  throw Error(why == kSemaphoreWaitTimeout ? ErrorCode::Timeout : ErrorCode::Aborted, msg);
}

}  // namespace plugboard::gpucoll
