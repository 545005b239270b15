// Staged signals to counters in device memory, applied on the staging
// receive stream after the copies before them, without a kernel.
//
// A kernel for each add (the old way) needs a free SM slot. When the
// kernels waiting for the signal fill the GPU (two ranks' 128-block
// collectives under CUDA MPS, say), the add can never run and both ranks
// wait until their timeout. cuStreamWriteValue64 is done by the GPU's
// front end instead, and its default flags fence the stream's earlier
// copies before the write (like __threadfence_system).
//
// A memory operation can write, not add, so the value is kept on the host:
// per region and offset, the counter's value as last written (read from
// the device at the first signal). Invariant this relies on: a device
// counter reached by staged signals has no other writer (the staged
// connection is the one pair that signals it; its waiters only read it).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "communicator/communicator_impl.hpp"

namespace plugboard {

/// Adds to device counters through stream memory operations where the
/// device has them (CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS),
/// else through a one-thread kernel (logged once: it can deadlock as above).
class StagedCounterWriter {
 public:
  /// For the current device. Throws Error(System) for a CUDA failure.
  StagedCounterWriter();
  /// True when adds use stream memory operations.
  bool usesMemOps() const { return write_ != nullptr; }
  /// Enqueues region[offset] (a uint64 in device memory) += value on stream.
  void add(RegisteredMemoryImpl& region, uint64_t offset, uint64_t value, cudaStream_t stream);

 private:
  using WriteValue64 = int (*)(cudaStream_t, unsigned long long, unsigned long long, unsigned int);
  WriteValue64 write_ = nullptr;
};

}  // namespace plugboard
