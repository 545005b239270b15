/// @file py_communicator.hpp
/// What the Python module holds for one communicator: the bootstrap, the
/// Communicator and its HostCollectives, created and destroyed together.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "plugboard/bootstrap.hpp"
#include "plugboard/communicator.hpp"
#include "plugboard/host_collectives.hpp"

namespace plugboard::python {

/// One host buffer as the Python layer hands it over: its address, its
/// element count and type. The Python layer has checked that it is
/// contiguous, host memory, and writable where it is written.
struct HostBuffer {
  uintptr_t address = 0;  ///< First element.
  size_t count = 0;       ///< Elements.
  DataType type = DataType::Uint8;

  void* data() const { return reinterpret_cast<void*>(address); }
};

/// A communicator with its host collectives. Every blocking call releases
/// the GIL (the caller does that; this class knows nothing of Python).
/// Not thread-safe, like HostCollectives; abort() and asyncError() may be
/// called from any thread.
class PyCommunicator {
 public:
  /// Joins the job at id as rank of nranks; settings beat YAML and
  /// environment (CommunicatorOptions::overrides). Collective.
  PyCommunicator(int rank, int nranks, const UniqueId& id, std::chrono::milliseconds timeout,
                 const std::map<std::string, std::string>& settings);
  ~PyCommunicator();

  int rank() const { return comm_->rank(); }
  int size() const { return comm_->size(); }
  Communicator& communicator() const { return *comm_; }

  void allReduce(const HostBuffer& send, const HostBuffer& recv, ReduceOp op);
  void allGather(const HostBuffer& send, const HostBuffer& recv);
  void reduceScatter(const HostBuffer& send, const HostBuffer& recv, ReduceOp op);
  void broadcast(const HostBuffer& send, const HostBuffer& recv, int root);
  void reduce(const HostBuffer& send, const HostBuffer& recv, ReduceOp op, int root);
  void allToAll(const HostBuffer& send, const HostBuffer& recv);
  void send(const HostBuffer& buf, int peer);
  void recv(const HostBuffer& buf, int peer);
  /// Sends to one peer while receiving from another (pairwise exchanges
  /// without deadlock).
  void sendRecv(const HostBuffer& sendBuf, int sendPeer, const HostBuffer& recvBuf, int recvPeer);
  void barrier();

  /// Ends every blocked call with Error(Aborted); any thread.
  void abort() { comm_->abort(); }
  /// The error a background thread or abort left, if any; never blocks.
  std::optional<Error> asyncError() const { return comm_->asyncError(); }

 private:
  /// Throws Error(InvalidUsage) naming the call unless the types match.
  void requireSameType(const char* call, const HostBuffer& send, const HostBuffer& recv) const;
  /// Throws Error(InvalidUsage) naming the call and the buffer when its
  /// count is not the expected one.
  void requireCount(const char* call, const char* which, const HostBuffer& buf, size_t expected) const;
  void requirePeer(const char* call, const char* what, int peer) const;

  std::shared_ptr<Bootstrap> bootstrap_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<HostCollectives> host_;
};

}  // namespace plugboard::python
