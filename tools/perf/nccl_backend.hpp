// GpuBackend over NCCL, loaded with dlopen (nccl_library.hpp). Built only
// with CUDA (PLUGBOARD_HAVE_CUDA).
#pragma once

#include <map>
#include <memory>

#include "gpu_backend.hpp"
#include "nccl_library.hpp"
#include "plugboard/bootstrap.hpp"

namespace plugboard::perf {

/// NCCL's type for t; throws Error(InvalidUsage) for a type NCCL lacks.
int ncclTypeOf(DataType t);
/// NCCL's op for op.
int ncclOpOf(ReduceOp op);

/// An NCCL communicator over the ranks of a Plugboard bootstrap, on the CUDA
/// device current at construction. Alltoall is a group of send/recv pairs,
/// sendrecv a group of one send and one receive (ring neighbours).
class NcclBackend : public GpuBackend {
 public:
  /// Collective over boot: rank 0 makes the unique id, the bootstrap hands
  /// it to every rank, each calls ncclCommInitRank. Throws Error(Remote)
  /// with NCCL's error string on failure.
  /// With `symmetric`, ownBuffers() gives buffers from ncclMemAlloc
  /// registered as symmetric windows (lib must have them: hasWindows()).
  NcclBackend(std::shared_ptr<NcclLibrary> lib, Bootstrap& boot, bool symmetric);
  /// ncclCommDestroy (errors ignored: destructors do not throw).
  ~NcclBackend() override;
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  /// "nccl".
  std::string name() const override { return "nccl"; }
  /// With `symmetric`: NcclWindowBuffers; else null (the shared buffers).
  std::unique_ptr<DeviceBuffers> ownBuffers(size_t sendBytes, size_t recvBytes) override;
  /// Enqueues the call through NCCL.
  void run(const Call& call, const CallPointers& ptr, cudaStream_t stream) override;

 private:
  void allToAll(const Call& c, const CallPointers& p, cudaStream_t s);
  /// The PreMulSum op of scalar 1 for type (-o premulsum), made on first use.
  int preMulOp(DataType type);
  void sendRecv(const Call& c, const CallPointers& p, cudaStream_t s);

  std::shared_ptr<NcclLibrary> lib_;
  nccl::Comm comm_ = nullptr;
  bool symmetric_ = false;
  std::map<DataType, int> preMulOps_;  ///< Destroyed with the communicator.
};

/// Two buffers from ncclMemAlloc, each registered on comm as a symmetric
/// window (ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC), so NCCL
/// 2.27+ may run its symmetric-memory kernels on them. Registration and
/// deregistration are collective: every rank constructs and destroys these
/// at the same point. Deregistered and freed on destruction.
class NcclWindowBuffers : public DeviceBuffers {
 public:
  /// Throws Error(Remote) with NCCL's error string; frees what it took first.
  NcclWindowBuffers(std::shared_ptr<NcclLibrary> lib, nccl::Comm comm, size_t sendBytes, size_t recvBytes);
  ~NcclWindowBuffers() override;

 private:
  /// ncclMemAlloc + register one buffer into ptr/win; throws.
  void take(char*& ptr, nccl::Window& win, size_t bytes, const char* which);
  void release() noexcept;

  std::shared_ptr<NcclLibrary> lib_;
  nccl::Comm comm_;
  nccl::Window sendWin_ = nullptr, recvWin_ = nullptr;
};

}  // namespace plugboard::perf
