// libFuzzer target: an execution plan's text (a file a user may have edited
// or a hostile one). Loading must accept or throw Error(Config), never
// crash, hang or throw anything else (nlohmann's own exceptions included).
#include <cstddef>
#include <cstdint>
#include <string>

#include "plugboard/error.hpp"
#include "plugboard/plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    plugboard::parsePlan(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
  } catch (const plugboard::Error&) {
  }
  return 0;
}
