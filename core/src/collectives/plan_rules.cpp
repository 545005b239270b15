#include "collectives/plan_rules.hpp"

#include "plugboard/error.hpp"

namespace plugboard {

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

std::vector<RulePlan> rulesFor(const Config& config, int nranks, const std::string& mem) {
  std::vector<RulePlan> out;
  for (const PlanRule& rule : config.planRules()) {
    if (rule.mem != "any" && rule.mem != mem) continue;
    if (rule.ranks && rule.ranks != nranks) continue;
    Plan plan = loadRulePlan(rule);
    if (mem == "host" && plan.hasSwitches())
      throw Error(ErrorCode::Config, rule.origin + ": plan " + rule.file + " has switch channels, which run on GPU "
                                                 "buffers only; this rule also serves host buffers (give it mem: gpu)");
    if (plan.nranks == nranks) out.push_back(RulePlan{rule, std::move(plan)});
  }
  return out;
}

bool ruleServes(const PlanRule& rule, const std::string& collective, size_t bytes) {
  return rule.collective == collective && bytes >= rule.minBytes && bytes <= rule.maxBytes;
}

}  // namespace plugboard
