// Shared pieces of the entry points: the export attribute and the argument
// checks NCCL makes, with NCCL's result codes.
#pragma once

#include <string>

#include "nccl.h"
#include "nccl_comm.hpp"
#include "nccl_error.hpp"
#include "nccl_types.hpp"

/// Marks an nccl.h function as exported (the library builds with hidden visibility).
#define PB_NCCL_API extern "C" __attribute__((visibility("default")))

namespace plugboard::ncclapi {

/// comm must not be NULL, and its set-up must be done: a non-blocking
/// init still running is ncclInvalidArgument (as NCCL answers), a failed
/// one its own code and message.
inline void requireComm(const ncclComm* comm) {
  if (!comm) throw ApiFailure(Result::InvalidArgument, "comm is NULL");
  switch (comm->initState()) {
    case ncclComm::InitState::Ready: return;
    case ncclComm::InitState::InProgress:
      throw ApiFailure(Result::InvalidArgument,
                       "the communicator's non-blocking init (config.blocking = 0) is still running: poll "
                       "ncclCommGetAsyncError until it returns ncclSuccess before using it");
    case ncclComm::InitState::Failed:
      throw ApiFailure(static_cast<Result>(comm->initResult()),
                       "the communicator's non-blocking init failed: " + comm->initError());
  }
}

/// The checked arguments of one call, in Plugboard's terms.
struct CallArgs {
  DataType type = DataType::Uint8;
  ReduceOp op = ReduceOp::Sum;
  size_t bytes = 0;  ///< count x element size (per rank block where the call has blocks)
  /// A PreMulSum op's scaling (then op is Sum).
  std::optional<PreMulSum> preMul;
};

/// Checks type, op (when reducing), count overflow and root/peer (when
/// given, >= 0 means "check this rank"); NCCL's codes: ncclInvalidArgument.
CallArgs checkCall(const ncclComm* comm, size_t count, int ncclType, const int* ncclOp, int rootOrPeer,
                   const char* rootName);
/// A buffer that must be given when count > 0.
void requireBuffer(const void* p, const char* name, size_t count);
/// checkCall without root, then both buffers required: the calls whose
/// send and recv both hold `count` elements per rank block (allreduce,
/// allgather, reducescatter, alltoall).
CallArgs checkSymmetric(const ncclComm* comm, size_t count, int ncclType, const int* ncclOp, const void* send,
                        const void* recv);
/// An argument (an output pointer, a handle) that must not be NULL.
inline void requireArg(const void* p, const char* name) {
  if (!p) throw ApiFailure(Result::InvalidArgument, std::string(name) + " is NULL");
}

}  // namespace plugboard::ncclapi
