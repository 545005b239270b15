// libFuzzer target: the memory descriptor a peer sends with sendMemory
// (decoded before anything else looks at it). Decoding must accept or throw
// Error, never crash; an accepted descriptor re-encodes to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "communicator/memory_descriptor.hpp"
#include "plugboard/error.hpp"

using namespace plugboard;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<char> blob(reinterpret_cast<const char*>(data), reinterpret_cast<const char*>(data) + size);
  try {
    const MemoryDescriptor d = decodeMemoryDescriptor(blob, "rank 1");
    if (encodeMemoryDescriptor(d) != blob) std::abort();  // a descriptor has one encoding
  } catch (const Error&) {
  }
  return 0;
}
