/// @file py_gpu_collectives.hpp
/// What the Python module holds for GPU collectives on a communicator:
/// GpuCollectives on CUDA pointers the Python layer found in CUDA tensors,
/// `__cuda_array_interface__` objects or (pointer, count, type) triples.
/// Built only where the core has CUDA (PLUGBOARD_HAVE_CUDA).
#pragma once

#include <cstdint>
#include <memory>

#include "buffer.hpp"
#include "plugboard/gpu/collectives.hpp"
#include "py_communicator.hpp"

namespace plugboard::python {

/// GpuCollectives over a PyCommunicator's communicator, on the CUDA device
/// current at construction (collective: every rank makes one). Calls
/// enqueue on the stream given as a handle (0: the legacy default stream)
/// and return; synchronize() waits, bounded, and names a failed peer.
class PyGpuCollectives {
 public:
  explicit PyGpuCollectives(PyCommunicator& comm);

  void allReduce(const Buffer& send, const Buffer& recv, ReduceOp op, uintptr_t stream);
  void allGather(const Buffer& send, const Buffer& recv, uintptr_t stream);
  void reduceScatter(const Buffer& send, const Buffer& recv, ReduceOp op, uintptr_t stream);
  void broadcast(const Buffer& send, const Buffer& recv, int root, uintptr_t stream);
  void reduce(const Buffer& send, const Buffer& recv, ReduceOp op, int root, uintptr_t stream);
  void allToAll(const Buffer& send, const Buffer& recv, uintptr_t stream);
  void send(const Buffer& buf, int peer, uintptr_t stream);
  void recv(const Buffer& buf, int peer, uintptr_t stream);
  /// Waits for the stream (bounded) and throws the first device failure.
  void synchronize(uintptr_t stream);
  /// Throws the first recorded device failure, without waiting.
  void checkErrors() const { gpu_->checkErrors(); }

 private:
  CallSite at(const char* call) const { return comm_.at(call); }
  static cudaStream_t streamOf(uintptr_t handle) { return reinterpret_cast<cudaStream_t>(handle); }

  PyCommunicator& comm_;
  std::unique_ptr<GpuCollectives> gpu_;
};

}  // namespace plugboard::python
