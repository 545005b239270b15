/// @file plan_executor.hpp
/// Runs execution plans (plan.hpp, docs/execution-plans.md) on CUDA device
/// buffers: one kernel launch per call walks this rank's operation lists.
/// Requires CUDA.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <memory>

#include "plugboard/communicator.hpp"
#include "plugboard/datatype.hpp"
#include "plugboard/plan.hpp"

namespace plugboard {

/// One plan bound to a communicator on the CUDA device current at
/// construction. Construction is collective: it connects every pair the
/// plan's channels join for CUDA memory, allocates this rank's device
/// storage (output and scratch chunks for inputs of up to maxInputBytes,
/// the same on every rank) and exchanges it. Memory channels need a pair
/// whose transport maps peer memory (cudaipc); port channels go through a
/// proxy thread over whatever transport the pair selected. Where that
/// transport does not map peer memory (ethernet, libfabric, ucx) the
/// storage is pinned host memory mapped into the device (the transport
/// reads and writes it itself), so such plans cannot also use memory
/// channels, and their kernels reach their buffers over PCIe.
///
/// Each plan thread block runs as `slices` CUDA blocks, each moving one
/// slice of every chunk with semaphores of its own (plan_device.hpp says
/// why that is the same plan): the "gpu_plan_slices" setting, or the
/// constructor's argument when positive. Calls only enqueue work on the
/// stream (no host synchronisation), so they can be captured in a CUDA
/// graph; calls on one executor must be ordered (one stream, or events).
class GpuPlanExecutor {
 public:
  /// Throws Error(InvalidUsage) when the plan is for another rank count,
  /// a memory channel joins a pair that is not peer-mapped, or maxInputBytes
  /// differs between ranks; Error(Config) for a bad slice count.
  GpuPlanExecutor(Communicator& comm, Plan plan, size_t maxInputBytes, int slices = 0);
  /// Collective: waits for the device, then for every rank, before freeing
  /// the storage the peers map.
  ~GpuPlanExecutor();
  GpuPlanExecutor(const GpuPlanExecutor&) = delete;
  GpuPlanExecutor& operator=(const GpuPlanExecutor&) = delete;

  /// Enqueues the plan once on stream (every rank calls it with the same
  /// count, type and op): input holds count elements cut into the plan's
  /// input chunks (count must divide evenly); output receives outputChunks
  /// chunks. Input and output may be the same buffer (results land in this
  /// executor's storage and are copied out after the kernel): with an
  /// in-place plan they must be. Output chunks that peers write or read
  /// land in the storage and are copied out after the kernel; an
  /// out-of-place simple plan computes the others in output itself, when
  /// input and output do not overlap. Passing outputBuffer() as output
  /// skips every copy. Avg divides once at the end. Throws Error(InvalidUsage) for
  /// bad arguments (and calls takes() refuses, naming why) and the first
  /// recorded device failure (checkErrors()).
  void run(const void* input, void* output, size_t count, DataType type, ReduceOp op, cudaStream_t stream);
  /// False when run() would refuse these arguments for the plan's sake:
  /// count does not cut into the input chunks, or the plan's switch
  /// channels cannot reduce type and op (they reduce float32 sum, float16
  /// and bfloat16 sum, min and max; avg as sum) or move its chunks (4-byte
  /// words: chunk bytes a multiple of 4). Same answer on every rank for
  /// the same arguments, so selection can fall back alike.
  bool takes(size_t count, DataType type, ReduceOp op) const;

  /// The buffer where outputs land (outputChunks chunks of the largest
  /// input; a device address, of mapped host memory for port plans over
  /// host-only transports); valid until destruction.
  void* outputBuffer() const;
  /// Throws Error(Timeout/Remote) naming rank, plan, thread block,
  /// operation, channel and peer for the first device wait that gave up,
  /// and the proxy's error for port channels; such a failure of this
  /// rank's is told to the peers once (see whenFailing). Throws a peer's
  /// reported failure (Communicator::reportFailure) once one came: the
  /// communicator's watcher thread ends this executor's device waits within
  /// about 10 ms of its arrival, also while the caller sits in
  /// cudaStreamSynchronize. Does not synchronise.
  void checkErrors() const;
  /// Called once with the first failure of this rank's that checkErrors()
  /// finds (an abort excepted), before it throws. Unset, the failure goes
  /// to Communicator::reportFailure, so every peer's waits on the
  /// communicator (their GPU plans and collectives included) end naming
  /// this rank. GpuCollectives passes one that sends its own notice.
  void whenFailing(std::function<void(const Error&)> tell);
  /// The plan.
  const Plan& plan() const;
  /// CUDA blocks per plan thread block.
  int slices() const;

  struct Impl;  ///< Private state (pimpl).

 private:
  friend class GpuPlanSelection;  // ends its executors' waits on its GPU collectives' notices
  /// Ends this executor's device waits (as Communicator::abort does).
  void abortWaits() const noexcept;
  std::unique_ptr<Impl> impl_;
};

}  // namespace plugboard
