#include "gate.hpp"

#include <cctype>
#include <cstdlib>

namespace plugboard::nvls {

namespace {

/// text without blanks around it, lower-cased.
std::string normalised(const char* text) {
  std::string s(text);
  const size_t first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  s = s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// True when s is an optionally signed decimal integer.
bool isInteger(const std::string& s) {
  size_t i = (s[0] == '+' || s[0] == '-') ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

/// The refusal for one switch named `name` holding `text`, or "".
std::string refusal(const std::string& name, const char* text) {
  switch (readSwitch(text)) {
    case SwitchValue::Off: return "disabled by " + name + "=" + text;
    case SwitchValue::Unreadable:
      return "disabled: " + name + "=" + text +
             " is not a boolean (0/1, true/false, yes/no, on/off), so multicast stays off";
    case SwitchValue::Unset:
    case SwitchValue::On: break;
  }
  return "";
}

}  // namespace

SwitchValue readSwitch(const char* text) {
  if (!text) return SwitchValue::Unset;
  const std::string s = normalised(text);
  if (s.empty()) return SwitchValue::Unset;
  if (s == "false" || s == "no" || s == "off") return SwitchValue::Off;
  if (s == "true" || s == "yes" || s == "on") return SwitchValue::On;
  if (!isInteger(s)) return SwitchValue::Unreadable;
  return s.find_first_not_of("+-0") == std::string::npos ? SwitchValue::Off : SwitchValue::On;
}

std::string disabledBy(const std::string& enableSetting) {
  for (const char* name : kGateVariables) {
    std::string why = refusal(name, std::getenv(name));
    if (!why.empty()) return why;
  }
  return refusal("nvls.enable", enableSetting.c_str());
}

}  // namespace plugboard::nvls
