// Plan selection for GPU collectives (YAML `plans:` rules with mem gpu or
// any; collectives/plan_rules.hpp): a call whose collective and size match
// a rule for this communicator's rank count runs the rule's plan on a
// GpuPlanExecutor instead of the built-in kernels.
//
// Invariants: every executor is made when GpuCollectives is (collective,
// in rule order on every rank), never during a call, so calls stay
// capturable in CUDA graphs; its capacity is min(rule max_bytes,
// gpu_plan_max_bytes) of input, the same on every rank, so every rank
// takes the plan or the built-in path alike for every call.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "plugboard/communicator.hpp"
#include "plugboard/gpu/plan_executor.hpp"

namespace plugboard {

class GpuPlanSelection {
 public:
  /// Loads every GPU rule's plan for comm's rank count (Error(Config)
  /// naming the rule) and makes its executor (collective); an executor's
  /// failure goes to tell (GpuPlanExecutor::whenFailing).
  GpuPlanSelection(Communicator& comm, size_t maxInputBytes, std::function<void(const Error&)> tell);
  ~GpuPlanSelection();

  /// True when it enqueued the call on stream: the first rule serving
  /// (collective, bytes) whose plan cuts inputCount elements into its
  /// chunks and whose executor holds them. bytes: the call's size as rules
  /// count it. In-place plans get the input copied into output first.
  bool run(const std::string& collective, size_t bytes, const void* input, void* output, size_t inputCount,
           DataType type, ReduceOp op, cudaStream_t stream);
  /// Throws the first device failure any plan executor recorded.
  void checkErrors() const;
  /// Ends every executor's device waits (a peer's GPU collectives failed);
  /// thread-safe, never throws.
  void abortWaits() const noexcept;
  /// Calls served by plans so far.
  uint64_t callsServed() const { return served_; }

 private:
  struct Entry {
    PlanRule rule;
    std::unique_ptr<GpuPlanExecutor> executor;
    size_t capacity = 0;  // input bytes
  };
  std::vector<Entry> entries_;
  uint64_t served_ = 0;
};

}  // namespace plugboard
