// The GPU side of plugboard-perf: one interface for "a library that runs a
// collective on device buffers, ordered on a stream", implemented by
// Plugboard's GpuCollectives and by NCCL, so one sweep times both alike.
// Built only with CUDA (PLUGBOARD_HAVE_CUDA).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "collective_ops.hpp"

namespace plugboard::perf {

/// Throws Error(System) "CUDA <what>: <error string>" unless err is cudaSuccess.
void checkCuda(cudaError_t err, const std::string& what);

/// The bytes of 1 in type: the scalar of `-o premulsum` (a PreMulSum that
/// keeps Sum's results, so the usual check holds). Error(InvalidUsage) for
/// the 8-bit floats, which have no PreMulSum.
std::array<uint8_t, 8> preMulOne(DataType type);

/// Device memory for the largest row of a sweep: one send and one receive
/// buffer. Subclasses allocate and free them.
class DeviceBuffers {
 public:
  virtual ~DeviceBuffers() = default;
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;
  char* send() const { return send_; }  ///< Send buffer (in-place results land here).
  char* recv() const { return recv_; }  ///< Receive buffer.

 protected:
  DeviceBuffers() = default;
  char* send_ = nullptr;
  char* recv_ = nullptr;
};

/// A collective library on device buffers. run() only enqueues work on the
/// stream (no host synchronisation), so it can be captured in a CUDA graph.
class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  /// Name for the output and for messages: "plugboard" or "nccl".
  virtual std::string name() const = 0;
  /// Enqueues `call` once on stream; `ptr` holds device pointers from callPointers().
  virtual void run(const Call& call, const CallPointers& ptr, cudaStream_t stream) = 0;
  /// Buffers this library's calls must use, of at least these sizes; null
  /// (the default) means the sweep's shared cudaMalloc buffers. Collective:
  /// every rank calls it at the same point of the sweep.
  virtual std::unique_ptr<DeviceBuffers> ownBuffers(size_t sendBytes, size_t recvBytes) {
    (void)sendBytes;
    (void)recvBytes;
    return nullptr;
  }
  /// Throws the first asynchronous error the library recorded; call after the stream is synchronised.
  virtual void checkErrors() {}
  /// Enqueues a one-element collective of the library's own on stream, a
  /// barrier through it once the stream is synchronised, and returns true;
  /// false (the default) where the sweep should use the bootstrap instead.
  virtual bool syncRanks(cudaStream_t stream) {
    (void)stream;
    return false;
  }
  /// Rounds a row's shape to what this library can run (a plan cuts its
  /// input into equal chunks); the default leaves it.
  virtual void fitShape(Collective c, Shape& s) const {
    (void)c;
    (void)s;
  }
};

/// Plugboard's GpuCollectives over comm (collective: every rank constructs it;
/// throws as its constructor does, e.g. for a pair without a peer mapping).
std::unique_ptr<GpuBackend> makePlugboardBackend(Communicator& comm);
/// GpuPlanExecutor running the plan at path (collective; throws
/// Error(InvalidUsage) when the plan computes another collective than c).
/// *describe gets a line for the output.
std::unique_ptr<GpuBackend> makePlanBackend(Communicator& comm, const std::string& path, Collective c,
                                            size_t maxInputBytes, std::string* describe);

}  // namespace plugboard::perf
