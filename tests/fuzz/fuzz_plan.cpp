// libFuzzer target: an execution plan's text (a file a user may have edited
// or a hostile one). Loading must accept or throw Error(Config), never
// crash, hang or throw anything else (nlohmann's own exceptions included);
// the analyses both executors run on a loaded plan (plans/call_overlap.hpp)
// must then answer without crashing or hanging.
#include <cstddef>
#include <cstdint>
#include <string>

#include "plans/call_overlap.hpp"
#include "plugboard/error.hpp"
#include "plugboard/plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  plugboard::Plan plan;
  try {
    plan = plugboard::parsePlan(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
  } catch (const plugboard::Error&) {
    return 0;
  }
  plugboard::callsNeedNoHandshake(plan);
  plugboard::putsHearFromTheirTarget(plan);
  plugboard::accessesStayInsideTheOwnersCall(plan);
  plugboard::channelsStayInOneBlock(plan);
  if (plan.nranks > 0) plugboard::happensAfterRank(plan, plan.nranks - 1);
  return 0;
}
