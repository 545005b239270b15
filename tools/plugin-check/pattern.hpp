// Test data: a hashed byte pattern, so a misplaced, repeated or missing
// chunk of any size shows up, and the comparisons that explain a mismatch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace plugboard::check {

/// Byte number index of the pattern with this seed.
inline uint8_t patternByte(uint64_t index, uint64_t seed) {
  uint64_t x = (index >> 3) * 0x9E3779B97F4A7C15ull + (seed + 1) * 0xD1B54A32D192ED03ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return uint8_t(x >> (8 * (index & 7)));
}

/// p[i] = patternByte(start + i, seed) for i in [0, n).
void fillPattern(uint8_t* p, size_t n, uint64_t start, uint64_t seed);

/// "" when p[0, n) holds pattern bytes start.. of seed; else the first bad
/// byte, as "byte <base + i> is 0x.., expected 0x..".
std::string comparePattern(const uint8_t* p, size_t n, uint64_t start, uint64_t seed, size_t base);

/// "" when p[0, n) are all fill; else the first other byte, numbered from base.
std::string compareFill(const uint8_t* p, size_t n, uint8_t fill, size_t base);

}  // namespace plugboard::check
