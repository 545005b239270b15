// Plan selection for host collectives (YAML `plans:`, PlanRule in
// config.hpp): a call whose collective and size match a rule written for
// this communicator's rank count runs that rule's execution plan on a
// HostPlanExecutor instead of the built-in algorithm.
//
// Invariants: every rank holds the same rules (they are part of the
// settings every rank must agree on) and sees the same calls, so every
// rank picks the same plan, or none, for every call without talking; an
// executor is built (collectively) at a plan's first call and rebuilt, larger,
// when a call outgrows it, which again happens on every rank at once.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plugboard/communicator.hpp"
#include "plugboard/host_plan.hpp"

namespace plugboard {

class HostPlanSelection {
 public:
  /// Loads and checks the plan of every rule written for comm's rank count
  /// (rules for other counts are skipped). Throws Error(Config) naming the
  /// rule's file:line for a plan that does not load, is for another
  /// collective or rank count than the rule says, or is in place for
  /// anything but allreduce.
  explicit HostPlanSelection(Communicator& comm);
  ~HostPlanSelection();

  /// Runs the first matching plan for a call of `collective` whose size is
  /// `bytes` (config.hpp's PlanRule) and whose input is inputCount elements;
  /// false (nothing done) when no rule matches or the input does not cut
  /// into the plan's input chunks. In-place plans (allreduce) get the input
  /// copied into output first.
  bool run(const std::string& collective, size_t bytes, const void* input, void* output, size_t inputCount,
           DataType type, ReduceOp op);

  /// Calls served by plans so far.
  uint64_t callsServed() const { return served_; }
  /// Every executor's HostPlanExecutor::whileWaiting check, from its next
  /// build (call before the first run).
  void whileWaiting(std::function<void()> check) { waitCheck_ = std::move(check); }

 private:
  struct Entry {
    PlanRule rule;
    Plan plan;
    std::unique_ptr<HostPlanExecutor> executor;  // built at the first call
    size_t capacity = 0;                         // input bytes the executor takes
  };
  Communicator& comm_;
  std::vector<Entry> entries_;  // rules for this rank count, in order
  uint64_t served_ = 0;
  std::function<void()> waitCheck_;
};

}  // namespace plugboard
