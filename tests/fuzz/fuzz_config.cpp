// libFuzzer target: YAML configuration text. Any input must load or fail
// with plugboard::Error (a clear message); any other exception, a crash or
// a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "plugboard/config.hpp"
#include "plugboard/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    plugboard::Config c = plugboard::Config::fromYamlText(text, "fuzz.yaml");
    (void)c.getString("transports");
  } catch (const plugboard::Error&) {
  }
  return 0;
}
