#include "collectives/host_plan_selection.hpp"

#include <cstring>

#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {
namespace {

/// The rule's plan, checked against the rule; Error(Config) naming the rule.
Plan loadRulePlan(const PlanRule& rule) {
  Plan plan;
  try {
    plan = loadPlan(rule.file);
  } catch (const Error& e) {
    throw Error(ErrorCode::Config, rule.origin + ": plan rule: " + e.what());
  }
  const std::string about = rule.origin + ": plan rule for " + rule.collective + " names " + rule.file + ", ";
  if (plan.collective != rule.collective)
    throw Error(ErrorCode::Config, about + "a plan for " + plan.collective);
  if (rule.ranks && rule.ranks != plan.nranks)
    throw Error(ErrorCode::Config, about + "a plan for " + std::to_string(plan.nranks) + " ranks, not " +
                                       std::to_string(rule.ranks));
  if (plan.inPlace && rule.collective != "allreduce")
    throw Error(ErrorCode::Config, about + "an in-place plan (only allreduce plans may be in place)");
  return plan;
}

/// Smallest power of two >= bytes (at least 4 KiB): executors grow in steps.
size_t roundCapacity(size_t bytes) {
  size_t c = 4096;
  while (c < bytes) c <<= 1;
  return c;
}

}  // namespace

HostPlanSelection::HostPlanSelection(Communicator& comm) : comm_(comm) {
  for (const PlanRule& rule : comm.config().planRules()) {
    if (rule.ranks && rule.ranks != comm.size()) continue;
    Plan plan = loadRulePlan(rule);
    if (plan.nranks != comm.size()) continue;
    PB_LOG(Info, "COLL", "plan rule " << rule.origin << ": " << rule.collective << " of " << rule.minBytes << "-"
                                      << rule.maxBytes << " bytes runs plan " << plan.name << " (" << rule.file << ")");
    entries_.push_back(Entry{rule, std::move(plan), nullptr, 0});
  }
}

HostPlanSelection::~HostPlanSelection() = default;

bool HostPlanSelection::run(const std::string& collective, size_t bytes, const void* input, void* output,
                            size_t inputCount, DataType type, ReduceOp op) {
  if (inputCount == 0) return false;
  for (Entry& e : entries_) {
    if (e.rule.collective != collective || bytes < e.rule.minBytes || bytes > e.rule.maxBytes) continue;
    if (inputCount % e.plan.inputChunks) {
      PB_LOG(Trace, "COLL", "plan " << e.plan.name << " skipped: " << inputCount << " elements do not cut into "
                                    << e.plan.inputChunks << " chunks");
      continue;
    }
    const size_t inputBytes = inputCount * dataTypeSize(type);
    if (!e.executor || e.capacity < inputBytes) {
      e.executor.reset();  // the old one's registrations go first
      e.capacity = roundCapacity(inputBytes);
      e.executor = std::make_unique<HostPlanExecutor>(comm_, e.plan, e.capacity);
    }
    if (e.plan.inPlace) {
      if (input != output) std::memmove(output, input, inputBytes);
      e.executor->run(output, output, inputCount, type, op);
    } else {
      e.executor->run(input, output, inputCount, type, op);
    }
    ++served_;
    return true;
  }
  return false;
}

}  // namespace plugboard
