#include "plugboard/config.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "config/core_settings.hpp"
#include "config/value_parse.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

extern char** environ;

namespace plugboard {

const char* settingSourceName(SettingSource source) {
  switch (source) {
    case SettingSource::Default: return "default";
    case SettingSource::Yaml: return "yaml";
    case SettingSource::Env: return "env";
    case SettingSource::Program: return "program";
  }
  return "?";
}

Config::Config() = default;

void Config::declareCore() {
  for (const auto& d : coreSettingDecls()) declare(d);
}

Config Config::fromEnvironment() {
  const char* path = std::getenv("PLUGBOARD_CONFIG");
  if (path && *path) return fromYamlFile(path);
  Config c;
  c.declareCore();
  return c;
}

Config Config::fromYamlFile(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw Error(ErrorCode::Config, "cannot read config file '" + path + "' (from PLUGBOARD_CONFIG or the program)");
  std::stringstream text;
  text << in.rdbuf();
  return fromYamlText(text.str(), path);
}

Config Config::fromYamlText(const std::string& text, const std::string& name) {
  Config c;
  c.loadYaml(text, name);
  c.declareCore();
  c.checkRulesAgainst(c.getList("transports"));
  return c;
}

std::string Config::envName(const std::string& settingName) {
  std::string out = "PLUGBOARD_";
  for (char ch : settingName) {
    if (ch == '.' || ch == '-') out += '_';
    else out += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  }
  return out;
}

void Config::resolve(Setting& s) {
  const std::string& name = s.decl.name;
  s.value = s.decl.defaultValue;
  s.source = SettingSource::Default;
  s.origin.clear();
  if (auto it = yaml_.find(name); it != yaml_.end()) {
    if (!it->second.isScalar)
      throw Error(ErrorCode::Config, it->second.origin + ": '" + name + "' needs a single value or a list of names");
    s.value = it->second.text;
    s.source = SettingSource::Yaml;
    s.origin = it->second.origin;
  }
  std::string env = envName(name);
  if (const char* v = std::getenv(env.c_str())) {
    s.value = v;
    s.source = SettingSource::Env;
    s.origin = env;
  }
  checkValueType(s);
}

void Config::declare(const SettingDecl& decl) {
  if (settings_.count(decl.name))
    throw Error(ErrorCode::Config, "setting '" + decl.name + "' is declared twice");
  Setting s;
  s.decl = decl;
  checkValueType(Setting{decl, decl.defaultValue, SettingSource::Default, "default of " + decl.name});
  resolve(s);
  settings_[decl.name] = s;
}

void Config::set(const std::string& name, const std::string& value) {
  auto it = settings_.find(name);
  if (it == settings_.end())
    throw Error(ErrorCode::InvalidUsage, "cannot set unknown setting '" + name + "'");
  Setting s = it->second;
  s.value = value;
  s.source = SettingSource::Program;
  s.origin = "program";
  checkValueType(s);
  it->second = s;
}

bool Config::has(const std::string& name) const { return settings_.count(name) > 0; }

const Setting& Config::get(const std::string& name) const {
  auto it = settings_.find(name);
  if (it == settings_.end()) throw Error(ErrorCode::InvalidUsage, "setting '" + name + "' is not declared");
  return it->second;
}

const std::string& Config::getString(const std::string& name) const { return get(name).value; }
int64_t Config::getInt(const std::string& name) const { return parseIntValue(get(name).value); }
bool Config::getBool(const std::string& name) const { return parseBoolValue(get(name).value); }
double Config::getDouble(const std::string& name) const { return parseDoubleValue(get(name).value); }

std::vector<std::string> Config::getList(const std::string& name) const {
  return splitList(get(name).value, ",");
}

std::vector<Setting> Config::all() const {
  std::vector<Setting> out;
  for (const auto& kv : settings_) out.push_back(kv.second);
  return out;
}

std::vector<std::string> Config::pluginSections() const {
  std::vector<std::string> out;
  for (const auto& kv : yamlSections_) out.push_back(kv.first);
  return out;
}

std::vector<std::string> Config::yamlPluginPath() const {
  auto it = yaml_.find("plugin_path");
  return it == yaml_.end() ? std::vector<std::string>{} : splitList(it->second.text, ":,");
}

void Config::logOverrides() const {
  for (const auto& kv : settings_) {
    const Setting& s = kv.second;
    if (s.source == SettingSource::Default) continue;
    PB_LOG(Info, "CONFIG", "setting " << s.decl.name << " = '" << s.value << "' (from "
                                      << settingSourceName(s.source) << " " << s.origin << ")");
  }
}

std::string Config::sharedSettingsText() const {
  std::ostringstream out;
  for (const auto& kv : settings_)
    if (!kv.second.decl.rankLocal) out << kv.first << "=" << kv.second.value << "\n";
  for (size_t i = 0; i < rules_.size(); ++i) {
    out << "rules[" << i << "]=" << rules_[i].peers.describe() << " use ";
    for (const auto& u : rules_[i].use) out << u << " ";
    out << "\n";
  }
  for (size_t i = 0; i < planRules_.size(); ++i) {
    const PlanRule& p = planRules_[i];
    out << "plans[" << i << "]=" << p.collective << " " << p.minBytes << "-" << p.maxBytes << " ranks " << p.ranks
        << " mem " << p.mem << " " << p.file << "\n";
  }
  return out.str();
}

std::vector<std::string> Config::unknownEnvironmentVariables() const {
  std::vector<std::string> known = launchVariables();
  for (const auto& kv : settings_) known.push_back(envName(kv.first));
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('='));
    if (name.rfind("PLUGBOARD_", 0) != 0) continue;
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::string hint = closestMatch(name, known);
    out.push_back(name + (hint.empty() ? "" : " (did you mean " + hint + "?)"));
  }
  return out;
}

}  // namespace plugboard
