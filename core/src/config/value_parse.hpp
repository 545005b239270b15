// Parsing and type-checking of setting values given as text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plugboard/config.hpp"

namespace plugboard {

/// Parses a whole-string integer; throws Error(Config) otherwise.
int64_t parseIntValue(const std::string& text);
/// Parses 0/1, true/false, yes/no, on/off (any case).
bool parseBoolValue(const std::string& text);
/// Parses a whole-string floating-point number.
double parseDoubleValue(const std::string& text);
/// Throws Error(Config) naming s.origin when s.value does not fit s.decl.type.
void checkValueType(const Setting& s);
/// Splits on any of the separator characters; trims; drops empty items.
std::vector<std::string> splitList(const std::string& text, const std::string& separators);

}  // namespace plugboard
