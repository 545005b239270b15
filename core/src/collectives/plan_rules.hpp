// The YAML `plans:` rules (PlanRule, config.hpp) as the collectives use
// them: each rule's plan loaded and checked against the rule, and which
// rule serves a call. Host (host_plan_selection.hpp) and GPU
// (gpu/plans/plan_selection.hpp) selection share these.
#pragma once

#include <string>
#include <vector>

#include "plugboard/config.hpp"
#include "plugboard/plan.hpp"

namespace plugboard {

/// A rule with its plan.
struct RulePlan {
  PlanRule rule;
  Plan plan;
};

/// The rule's plan, checked against it; Error(Config) naming the rule's
/// file:line for a plan that does not load, is for another collective or
/// rank count than the rule says, or is in place for anything but
/// allreduce.
Plan loadRulePlan(const PlanRule& rule);

/// Every rule of config for memory `mem` ("host" or "gpu") whose plan is
/// for nranks ranks, in order, plans loaded (loadRulePlan's errors).
std::vector<RulePlan> rulesFor(const Config& config, int nranks, const std::string& mem);

/// True when rule serves a call of collective whose size is bytes.
bool ruleServes(const PlanRule& rule, const std::string& collective, size_t bytes);

}  // namespace plugboard
