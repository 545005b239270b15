// One cudaipc connection to a peer on this machine (the core's pb_conn*): a
// non-blocking CUDA stream on this rank's GPU that carries our writes
// (cudaMemcpyAsync into the peer's mapped memory) and signals (a one-thread
// atomic-add kernel), and one CUDA event per operation through which
// proxy_progress learns, in order, what has completed.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "context.hpp"
#include "memory.hpp"
#include "wire.hpp"

namespace plugboard::cudaipc {

/// A connection. The core serializes calls on one connection (transport.h),
/// so nothing here is locked; shared state lives in the Context.
class Connection {
 public:
  /// setup(): takes the GPU current on the calling thread (GPU 0 if none),
  /// creates the stream and writes our address blob into addr (*addrLen:
  /// room in, size used out). Throws Error.
  Connection(Context& ctx, const PeerInfo& peer, void* addr, size_t* addrLen);
  /// free(): waits for the operations in flight (GPU copies cannot be
  /// abandoned, and they always finish), releases keys the core left
  /// imported, destroys the stream and events. Never throws.
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// proxy_connect(): checks the peer's blob (magic, version, rank, same
  /// machine, GPUs that can reach each other). Never waits: true at once.
  /// Throws Error (PB_ERR_INVALID for a bad blob, PB_ERR_REMOTE for a peer
  /// that is not what the core said, PB_ERR_UNSUPPORTED for GPUs without
  /// peer access).
  bool connect(const void* peerAddr, size_t peerAddrLen);
  /// import_rkey(): maps the peer's region on this connection's GPU.
  RemoteRegion* importKey(const void* buf, size_t len);
  /// release_rkey(): waits for our operations in flight (they may target
  /// it), then drops the mapping's reference.
  void releaseKey(RemoteRegion* rkey);
  /// remote_pointer(): the local device address of the region's first byte.
  void* remotePointer(RemoteRegion* rkey) const;

  /// Posts a copy of size bytes; returns its sequence number. Throws Error
  /// (PB_ERR_INVALID for a bad range or handle, the connection's failure
  /// otherwise).
  uint64_t postWrite(const LocalRegion& src, size_t srcOffset, RemoteRegion& dst, size_t dstOffset, size_t size);
  /// Posts an atomic add of value to the u64 at dst + dstOffset, ordered
  /// after every earlier operation. As postWrite.
  uint64_t postSignal(RemoteRegion& dst, size_t dstOffset, uint64_t value);
  /// Posts a write then a signal as one operation (one sequence number).
  uint64_t postWriteSignal(const LocalRegion& src, size_t srcOffset, RemoteRegion& dst, size_t dstOffset,
                           size_t size, RemoteRegion& signalDst, size_t signalOffset, uint64_t value);
  /// Sets *completed to the last completed sequence number, then throws the
  /// connection's failure if any (final).
  void progress(uint64_t* completed);
  /// Everything is on the GPU as soon as it is posted: only checks that
  /// the connection is usable.
  void flush();
  /// The owning context.
  Context& context() { return ctx_; }

 private:
  /// A posted operation; event is null for one with no GPU work (a
  /// zero-byte write), which completes with its predecessors.
  struct InFlight {
    uint64_t seq;
    cudaEvent_t event;
  };
  /// A final error and the status it maps to.
  struct Failure {
    pb_status status;
    std::string reason;
  };

  /// "cudaipc: rank A -> rank N (host H)", the start of every message.
  std::string where() const;
  /// Throws the failure, or PB_ERR_INVALID before proxy_connect succeeded.
  void requireUsable() const;
  /// Throws PB_ERR_INVALID unless rkey was imported on this connection.
  void requireOwnKey(const RemoteRegion* rkey, const char* op) const;
  /// Throws PB_ERR_INVALID unless a write's ranges fit its regions.
  void checkWrite(const LocalRegion& src, size_t srcOffset, const RemoteRegion& dst, size_t dstOffset,
                  size_t size, const char* op) const;
  /// Throws PB_ERR_INVALID unless the target is an aligned u64 inside dst.
  void checkSignal(const RemoteRegion& dst, size_t dstOffset, const char* op) const;
  /// Queues the copy on the stream (nothing for size 0).
  void enqueueCopy(const LocalRegion& src, size_t srcOffset, RemoteRegion& dst, size_t dstOffset, size_t size);
  /// Queues the atomic add on the stream.
  void enqueueSignal(RemoteRegion& dst, size_t dstOffset, uint64_t value);
  /// Records the operation's event (if it queued GPU work) and numbers it.
  uint64_t finishPost(bool gpuWork);
  /// An event from the spare list, or a new one.
  cudaEvent_t takeEvent();
  /// Makes a CUDA failure final for the connection and throws it.
  [[noreturn]] void failCuda(cudaError_t error, const std::string& what);

  Context& ctx_;
  PeerInfo peer_;
  const DeviceInfo* dev_ = nullptr;
  cudaStream_t stream_ = nullptr;
  bool connected_ = false;
  std::string route_;  // "GPU 0 (bus) -> GPU 1 (bus)", for logs.

  std::deque<InFlight> inflight_;
  std::vector<cudaEvent_t> spareEvents_;
  uint64_t posted_ = 0;
  uint64_t completed_ = 0;
  std::optional<Failure> failure_;
  std::unordered_set<const RemoteRegion*> rkeys_;
};

}  // namespace plugboard::cudaipc
