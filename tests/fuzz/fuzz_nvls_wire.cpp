// libFuzzer target: the record every rank of an nvls group_create sends
// the others through the core's all_gather (plugins/nvls/src/wire.hpp).
// A record from a confused or hostile rank must be refused with the
// plugin's Error or read into a Report, never crash; and a Report read
// once packs and reads back to itself (nothing unchecked survives a trip).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "wire.hpp"
#include "error.hpp"

using plugboard::nvls::Report;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size != Report::kSize) return 0;  // the core's all_gather moves whole records
  Report first;
  try {
    first = Report::unpack(data);
  } catch (const plugboard::nvls::Error&) {
    return 0;  // refused with a reason: what a wrong magic or version gets
  }
  (void)plugboard::nvls::phaseName(first.phase);  // any phase number has a name
  std::vector<uint8_t> once(Report::kSize), twice(Report::kSize);
  first.pack(once.data());
  Report::unpack(once.data()).pack(twice.data());  // a packed Report is always accepted
  if (std::memcmp(once.data(), twice.data(), Report::kSize) != 0) std::abort();
  return 0;
}
