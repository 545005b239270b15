#include "gpu/plans/plan_selection.hpp"

#include <algorithm>

#include "collectives/plan_rules.hpp"
#include "gpu/cuda_check.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {

GpuPlanSelection::GpuPlanSelection(Communicator& comm, size_t maxInputBytes, std::function<void(const Error&)> tell) {
  for (RulePlan& r : rulesFor(comm.config(), comm.size(), "gpu")) {
    const size_t capacity = static_cast<size_t>(std::min<uint64_t>(r.rule.maxBytes, maxInputBytes));
    PB_LOG(Info, "COLL", "plan rule " << r.rule.origin << ": GPU " << r.rule.collective << " of " << r.rule.minBytes
                                      << "-" << r.rule.maxBytes << " bytes runs plan " << r.plan.name << " ("
                                      << r.rule.file << "), inputs up to " << capacity << " bytes");
    auto executor = std::make_unique<GpuPlanExecutor>(comm, std::move(r.plan), capacity);
    executor->whenFailing(tell);
    entries_.push_back(Entry{std::move(r.rule), std::move(executor), capacity});
  }
}

GpuPlanSelection::~GpuPlanSelection() = default;

bool GpuPlanSelection::run(const std::string& collective, size_t bytes, const void* input, void* output,
                           size_t inputCount, DataType type, ReduceOp op, cudaStream_t stream) {
  if (inputCount == 0) return false;
  const size_t inputBytes = inputCount * dataTypeSize(type);
  for (Entry& e : entries_) {
    const Plan& plan = e.executor->plan();
    if (!ruleServes(e.rule, collective, bytes) || inputBytes > e.capacity || !e.executor->takes(inputCount, type, op))
      continue;
    if (plan.inPlace) {
      if (input != output) PB_CUDA_CHECK(cudaMemcpyAsync(output, input, inputBytes, cudaMemcpyDeviceToDevice, stream));
      e.executor->run(output, output, inputCount, type, op, stream);
    } else {
      e.executor->run(input, output, inputCount, type, op, stream);
    }
    ++served_;
    return true;
  }
  return false;
}

void GpuPlanSelection::checkErrors() const {
  for (const Entry& e : entries_) e.executor->checkErrors();
}

void GpuPlanSelection::abortWaits() const noexcept {
  for (const Entry& e : entries_) e.executor->abortWaits();
}

}  // namespace plugboard
