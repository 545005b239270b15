// What an ncclComm_t points to: a Plugboard communicator with its GPU
// collectives on one device, plus the stream ordering NCCL promises and
// GpuCollectives needs.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "plugboard/bootstrap.hpp"
#include "plugboard/communicator.hpp"
#include "plugboard/gpu/collectives.hpp"

/// The opaque type behind ncclComm_t (global namespace, as nccl.h declares it).
struct ncclComm {
  /// Joins rank of nranks on the current device (collective). Reads the
  /// settings as Communicator does (PLUGBOARD_CONFIG or defaults + env).
  ncclComm(int rank, int nranks, const plugboard::UniqueId& id);
  ~ncclComm();
  ncclComm(const ncclComm&) = delete;
  ncclComm& operator=(const ncclComm&) = delete;

  /// Orders a call on `stream` after every earlier call of this comm:
  /// GpuCollectives calls share device counters, so a call on another
  /// stream first waits (an event) for the stream of the one before.
  void enter(cudaStream_t stream);
  /// The stream of the last call (null before the first).
  cudaStream_t lastStream() const { return lastStream_; }
  /// Bounded wait for the last call's stream, then the recorded errors.
  void finalize();

  int rank() const { return comm->rank(); }
  int size() const { return comm->size(); }

  int device = 0;
  std::shared_ptr<plugboard::TcpBootstrap> bootstrap;
  std::unique_ptr<plugboard::Communicator> comm;
  std::unique_ptr<plugboard::GpuCollectives> gpu;

 private:
  cudaStream_t lastStream_ = nullptr;
  bool entered_ = false;
  cudaEvent_t order_ = nullptr;  // recorded on the previous stream when the stream changes
};
