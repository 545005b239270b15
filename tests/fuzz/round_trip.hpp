// For the wire-format fuzz targets: whatever a decoder accepts must encode
// back to the very bytes it came from, so nothing it did not check reaches
// the library behind it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace plugboard::fuzz {

/// Aborts (a finding) unless encoding `value` gives back in[0, len).
template <typename T>
void expectRoundTrip(const T& value, size_t encodedSize, const uint8_t* in, size_t len) {
  if (encodedSize != len) std::abort();
  std::vector<uint8_t> out(encodedSize);
  value.encode(out.data());
  if (std::memcmp(out.data(), in, len) != 0) std::abort();
}

}  // namespace plugboard::fuzz
