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

#include "buffer.hpp"
#include "plugboard/bootstrap.hpp"
#include "plugboard/communicator.hpp"
#include "plugboard/host_collectives.hpp"

namespace plugboard::python {

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
  /// Where a call of this rank stands, for the argument checks' messages.
  CallSite at(const char* call) const { return CallSite{call, rank(), size()}; }

  void allReduce(const Buffer& send, const Buffer& recv, ReduceOp op);
  void allGather(const Buffer& send, const Buffer& recv);
  void reduceScatter(const Buffer& send, const Buffer& recv, ReduceOp op);
  void broadcast(const Buffer& send, const Buffer& recv, int root);
  void reduce(const Buffer& send, const Buffer& recv, ReduceOp op, int root);
  void allToAll(const Buffer& send, const Buffer& recv);
  void send(const Buffer& buf, int peer);
  void recv(const Buffer& buf, int peer);
  /// Sends to one peer while receiving from another (pairwise exchanges
  /// without deadlock).
  void sendRecv(const Buffer& sendBuf, int sendPeer, const Buffer& recvBuf, int recvPeer);
  void barrier();

  /// Ends every blocked call with Error(Aborted); any thread.
  void abort() { comm_->abort(); }
  /// The error a background thread or abort left, if any; never blocks.
  std::optional<Error> asyncError() const { return comm_->asyncError(); }

 private:
  std::shared_ptr<Bootstrap> bootstrap_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<HostCollectives> host_;
};

}  // namespace plugboard::python
