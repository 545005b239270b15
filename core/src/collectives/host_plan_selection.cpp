#include "collectives/host_plan_selection.hpp"

#include <cstring>

#include "collectives/plan_rules.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {
namespace {

/// Smallest power of two >= bytes (at least 4 KiB): executors grow in steps.
size_t roundCapacity(size_t bytes) {
  size_t c = 4096;
  while (c < bytes) c <<= 1;
  return c;
}

}  // namespace

HostPlanSelection::HostPlanSelection(Communicator& comm) : comm_(comm) {
  for (RulePlan& r : rulesFor(comm.config(), comm.size(), "host")) {
    PB_LOG(Info, "COLL", "plan rule " << r.rule.origin << ": host " << r.rule.collective << " of " << r.rule.minBytes
                                      << "-" << r.rule.maxBytes << " bytes runs plan " << r.plan.name << " ("
                                      << r.rule.file << ")");
    entries_.push_back(Entry{std::move(r.rule), std::move(r.plan), nullptr, 0});
  }
}

HostPlanSelection::~HostPlanSelection() = default;

bool HostPlanSelection::run(const std::string& collective, size_t bytes, const void* input, void* output,
                            size_t inputCount, DataType type, ReduceOp op) {
  if (inputCount == 0) return false;
  for (Entry& e : entries_) {
    if (!ruleServes(e.rule, collective, bytes)) continue;
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
      e.executor->whileWaiting(waitCheck_);
      e.executor->whenFailing([](const Error&) {});  // HostCollectives' failCall tells the peers
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
