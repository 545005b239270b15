#include "pattern.hpp"

#include <cstdio>

namespace plugboard::check {
namespace {

/// "byte N is 0xAA, expected 0xBB".
std::string mismatch(size_t at, uint8_t got, uint8_t want) {
  char text[96];
  std::snprintf(text, sizeof(text), "byte %zu is 0x%02x, expected 0x%02x", at, got, want);
  return text;
}

}  // namespace

void fillPattern(uint8_t* p, size_t n, uint64_t start, uint64_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = patternByte(start + i, seed);
}

std::string comparePattern(const uint8_t* p, size_t n, uint64_t start, uint64_t seed, size_t base) {
  for (size_t i = 0; i < n; ++i) {
    uint8_t want = patternByte(start + i, seed);
    if (p[i] != want) return mismatch(base + i, p[i], want);
  }
  return "";
}

std::string compareFill(const uint8_t* p, size_t n, uint8_t fill, size_t base) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != fill) return mismatch(base + i, p[i], fill);
  return "";
}

}  // namespace plugboard::check
