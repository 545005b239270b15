#include "config/value_parse.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "plugboard/error.hpp"

namespace plugboard {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

const char* typeName(SettingType t) {
  switch (t) {
    case SettingType::String: return "text";
    case SettingType::Int: return "an integer";
    case SettingType::Bool: return "a boolean (true/false)";
    case SettingType::Double: return "a number";
  }
  return "?";
}

}  // namespace

int64_t parseIntValue(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE)
    throw Error(ErrorCode::Config, "'" + text + "' is not an integer");
  return v;
}

bool parseBoolValue(const std::string& text) {
  std::string t = lower(text);
  if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
  if (t == "0" || t == "false" || t == "no" || t == "off") return false;
  throw Error(ErrorCode::Config, "'" + text + "' is not a boolean (true/false, 1/0, yes/no, on/off)");
}

double parseDoubleValue(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE)
    throw Error(ErrorCode::Config, "'" + text + "' is not a number");
  return v;
}

void checkValueType(const Setting& s) {
  try {
    switch (s.decl.type) {
      case SettingType::String: return;
      case SettingType::Int: parseIntValue(s.value); return;
      case SettingType::Bool: parseBoolValue(s.value); return;
      case SettingType::Double: parseDoubleValue(s.value); return;
    }
  } catch (const Error&) {
    std::string where = s.origin.empty() ? "default" : s.origin;
    throw Error(ErrorCode::Config, where + ": setting '" + s.decl.name + "' must be " +
                                       typeName(s.decl.type) + ", got '" + s.value + "'");
  }
}

std::vector<std::string> splitList(const std::string& text, const std::string& separators) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find_first_of(separators, start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
    start = end + 1;
  }
  return out;
}

}  // namespace plugboard
