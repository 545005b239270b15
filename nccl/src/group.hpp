// ncclGroupStart / ncclGroupEnd: this thread's open group and what its
// calls deferred. Collectives outside a group are issued at once; sends and
// receives always go through a group (a lone one is a group of one), since
// their order comes from p2p_schedule.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <vector>

#include "nccl.h"
#include "nccl_library.hpp"
#include "plugboard/bootstrap.hpp"

namespace plugboard::ncclapi {

/// A communicator init deferred to the group's end (several inits from one
/// thread must run at once: each waits for the others' ranks).
struct PendingInit {
  ncclComm_t* out;
  int nranks;
  UniqueId id;
  int rank;
  int device;  ///< The device current at the call.
  bool nonBlocking = false;  ///< config.blocking = 0: set up in the background from the group's end.
};

/// A send or receive recorded by the group.
struct PendingP2P {
  ncclComm* comm;
  bool isSend;
  void* buf;
  size_t bytes;
  int peer;
  cudaStream_t stream;
};

/// This thread's group.
struct Group {
  int depth = 0;
  std::vector<PendingInit> inits;
  std::vector<std::function<void()>> collectives;  ///< In call order; each enters its comm and issues.
  std::vector<PendingP2P> p2p;
  /// Set when a call recorded here goes to the real NCCL: issue() then runs
  /// inside one real ncclGroupStart/End, so the real NCCL groups them too.
  const NcclApi* realApi = nullptr;

  /// The calling thread's group.
  static Group& current();
  bool open() const { return depth > 0; }
  /// Issues everything recorded (inits, then collectives, then each comm's
  /// sends and receives) and clears it, also when something throws. True
  /// when a non-blocking init is still setting up (ncclGroupEnd answers
  /// ncclInProgress).
  bool issue();
};

/// Issues one communicator's sends and receives: to the real NCCL when it
/// serves sendrecv on comm (in one real group), else in p2p_schedule's order.
void issueP2P(ncclComm* comm, const std::vector<PendingP2P>& ops);

}  // namespace plugboard::ncclapi
