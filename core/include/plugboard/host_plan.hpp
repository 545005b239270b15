/// @file host_plan.hpp
/// Runs execution plans (plan.hpp, docs/execution-plans.md) on host
/// buffers over the communicator's host connections, so a plan written
/// with plugboard_dsl runs for real without a GPU.
#pragma once

#include <functional>
#include <memory>

#include "plugboard/communicator.hpp"
#include "plugboard/datatype.hpp"
#include "plugboard/plan.hpp"

namespace plugboard {

/// One plan bound to a communicator. Construction is collective: it
/// connects every channel's pair, makes a semaphore per channel and
/// registers and exchanges this rank's input, output and scratch buffers
/// (sized for inputs of up to maxInputBytes). Memory and port channels
/// both travel over the pair's host connection.
class HostPlanExecutor {
 public:
  /// Throws Error(InvalidUsage) when the plan is for another rank count.
  HostPlanExecutor(Communicator& comm, Plan plan, size_t maxInputBytes);
  ~HostPlanExecutor();
  HostPlanExecutor(const HostPlanExecutor&) = delete;
  HostPlanExecutor& operator=(const HostPlanExecutor&) = delete;

  /// Runs the plan once (every rank calls it, with the same count, type and
  /// op): input holds count elements, cut into the plan's input chunks (count
  /// must divide evenly); every chunk of every buffer has that chunk's size,
  /// so output receives outputChunks chunks. In-place plans take input ==
  /// output. Starts with a handshake on every channel (no peer writes into
  /// this rank's buffers before it has taken its input) and ends once this
  /// rank's operations are done and its writes have landed. Throws
  /// Error(Timeout) naming the stuck thread blocks after the "timeout"
  /// setting, the connection's error when a peer fails, and a peer's
  /// reported failure (Communicator::peerFailure) when one comes. A run
  /// that fails (not by an abort) tells the peers, which wait in the same
  /// plan: see whenFailing.
  void run(const void* input, void* output, size_t count, DataType type, ReduceOp op);
  /// Called with the error a run fails with (an abort excepted) before
  /// run() throws it. Unset, a failed run calls Communicator::reportFailure,
  /// so every peer's waits on the communicator end naming this rank within
  /// milliseconds. HostCollectives passes one that does nothing (its calls
  /// send their own notices).
  void whenFailing(std::function<void(const Error&)> tell);
  /// Calls check, at most about once every 200 us, while a run waits with
  /// nothing to do; an exception it throws ends the run (the executor is
  /// then as after any failed run: only for destruction). HostCollectives
  /// passes one that throws a peer's failure notice, so a plan call ends
  /// when a peer's call failed, not at this rank's timeout. Empty: none.
  void whileWaiting(std::function<void()> check);

  /// The plan.
  const Plan& plan() const;

  struct Impl;  ///< Private state (pimpl).

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace plugboard
