// GpuBackend over NCCL, loaded with dlopen (nccl_library.hpp). Built only
// with CUDA (PLUGBOARD_HAVE_CUDA).
#pragma once

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
  NcclBackend(std::shared_ptr<NcclLibrary> lib, Bootstrap& boot);
  /// ncclCommDestroy (errors ignored: destructors do not throw).
  ~NcclBackend() override;
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  /// "nccl".
  std::string name() const override { return "nccl"; }
  /// Enqueues the call through NCCL.
  void run(const Call& call, const CallPointers& ptr, cudaStream_t stream) override;

 private:
  void allToAll(const Call& c, const CallPointers& p, cudaStream_t s);
  void sendRecv(const Call& c, const CallPointers& p, cudaStream_t s);

  std::shared_ptr<NcclLibrary> lib_;
  nccl::Comm comm_ = nullptr;
};

}  // namespace plugboard::perf
