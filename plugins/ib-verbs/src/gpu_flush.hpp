// Which GPUDirect flush reads a signal waits for. An RDMA write into a
// peer's GPU memory is complete for the HCA once the peer's HCA has sent
// its data over PCIe, not once the GPU can see it; a signal that lands in
// host memory (or in another device) by another PCIe path may overtake it,
// and a kernel that sees the signal would read stale data. NCCL's IB
// transport reads back from GPU memory after its last write (its "GDR
// flush"): PCIe does not let a read pass the writes before it on its path.
// Here the writer does it, since the peer's CPU sees no completion of a
// one-sided write: after writes into a peer's GPU region it posts one
// 1-byte RDMA read of that region per queue pair that carried them, and
// the signal goes only once those reads returned (a fence on queue pair 0,
// the drain on the others: post_queues.hpp). Device-free, so tested in CI
// (IbGpuFlush.*).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace plugboard::ibverbs {

/// One flush read: a byte of a peer's GPU region read back on a queue pair.
struct FlushRead {
  size_t qp = 0;
  uint64_t remoteAddr = 0;  ///< A byte the last write into the region on this queue pair covered.
  uint32_t rkey = 0;
};

/// Remembers, per queue pair, the peer GPU regions written since the last signal.
class GpuFlushTracker {
 public:
  explicit GpuFlushTracker(size_t qps) : pending_(qps) {}

  /// A write of length bytes on queue pair qp into the peer's region
  /// (region id, rkey) at remoteAddr. Only writes into GPU memory with
  /// bytes in them count; the read covers the last such write's last byte.
  void wrote(size_t qp, bool gpuMemory, uint64_t region, uint32_t rkey, uint64_t remoteAddr, uint64_t length);

  /// The reads a signal waits for, one per (queue pair, region) written
  /// since the last take(), in queue-pair order; forgets them.
  std::vector<FlushRead> take();

  /// True when no write waits for a flush.
  bool empty() const;

 private:
  struct Written {
    uint64_t region;
    FlushRead read;
  };
  std::vector<std::vector<Written>> pending_;  // per queue pair, a region at most once
};

}  // namespace plugboard::ibverbs
