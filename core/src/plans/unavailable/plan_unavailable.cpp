// Built instead of the plan loader when nlohmann_json was not found at
// configure time: loading a plan says what the build lacks.
#include "plugboard/error.hpp"
#include "plugboard/plan.hpp"

namespace plugboard {

Plan parsePlan(const std::string&, const std::string& source) {
  throw Error(ErrorCode::Config, "plan " + source + ": this Plugboard was built without nlohmann_json, so it cannot "
                                 "load execution plans (install nlohmann-json3-dev and rebuild)");
}

Plan loadPlan(const std::string& path) { return parsePlan("", path); }

}  // namespace plugboard
