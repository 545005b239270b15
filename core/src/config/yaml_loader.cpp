// Reading the YAML file into the registry: core keys, plugin sections and
// transport rules, each checked with its file:line.
#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "config/core_settings.hpp"
#include "config/value_parse.hpp"
#include "plugboard/config.hpp"
#include "plugboard/error.hpp"

namespace plugboard {
namespace {

std::string where(const std::string& file, const YAML::Node& node) {
  return file + ":" + std::to_string(node.Mark().line + 1);
}

[[noreturn]] void fail(const std::string& at, const std::string& what) {
  throw Error(ErrorCode::Config, at + ": " + what);
}

/// The text of a scalar node (a key, or a value that must be one); what
/// names it in the error otherwise, e.g. "a key".
std::string scalarText(const YAML::Node& node, const std::string& file, const std::string& what) {
  if (!node.IsScalar()) fail(where(file, node), what + " must be a plain value, not a list, a map or nothing");
  return node.as<std::string>();
}

/// A scalar, or a sequence of scalars joined with ','.
std::string scalarOrList(const YAML::Node& node, const std::string& at, const std::string& key) {
  if (node.IsScalar()) return node.as<std::string>();
  if (node.IsNull()) return "";
  if (!node.IsSequence()) fail(at, "'" + key + "' must be a value or a list of values");
  std::string out;
  for (const auto& item : node) {
    if (!item.IsScalar()) fail(at, "'" + key + "' must be a list of plain values");
    out += (out.empty() ? "" : ",") + item.as<std::string>();
  }
  return out;
}

std::vector<std::string> coreNames() {
  std::vector<std::string> names{"rules", "plans"};
  for (const auto& d : coreSettingDecls()) names.push_back(d.name);
  return names;
}

PeerMatch parsePeers(const YAML::Node& node, const std::string& file) {
  std::string at = where(file, node);
  PeerMatch m;
  if (node.IsScalar()) {
    std::string v = node.as<std::string>();
    if (v == "any") m.kind = PeerMatch::Kind::Any;
    else if (v == "same-host") m.kind = PeerMatch::Kind::SameHost;
    else if (v == "different-host") m.kind = PeerMatch::Kind::DifferentHost;
    else fail(at, "peers: '" + v + "' is not any, same-host, different-host, {from, to} or {hosts}");
    return m;
  }
  if (!node.IsMap()) fail(at, "peers: expected any, same-host, different-host, {from, to} or {hosts}");
  for (const auto& kv : node) {
    std::string key = scalarText(kv.first, file, "a key of 'peers'");
    if (key != "from" && key != "to" && key != "hosts")
      fail(where(file, kv.first), "peers: unknown key '" + key + "' (expected from/to or hosts)");
  }
  if (node["hosts"]) {
    if (node["from"] || node["to"]) fail(at, "peers: use either {from, to} or {hosts}, not both");
    m.kind = PeerMatch::Kind::Hosts;
    m.hosts = splitList(scalarOrList(node["hosts"], at, "hosts"), ",");
    if (m.hosts.empty()) fail(at, "peers: hosts list is empty");
    return m;
  }
  if (!node["from"] || !node["to"]) fail(at, "peers: a rank rule needs both 'from' and 'to'");
  m.kind = PeerMatch::Kind::Ranks;
  m.from = RankSet::parse(scalarText(node["from"], file, "peers: 'from'"), where(file, node["from"]));
  m.to = RankSet::parse(scalarText(node["to"], file, "peers: 'to'"), where(file, node["to"]));
  return m;
}

Rule parseRule(const YAML::Node& node, const std::string& file) {
  std::string at = where(file, node);
  if (!node.IsMap()) fail(at, "each rule must be a map with 'peers' and 'use'");
  for (const auto& kv : node) {
    std::string key = scalarText(kv.first, file, "a key of a rule");
    if (key != "peers" && key != "use")
      fail(where(file, kv.first), "unknown key '" + key + "' in rule (expected peers, use)");
  }
  if (!node["peers"] || !node["use"]) fail(at, "a rule needs both 'peers' and 'use'");
  Rule r;
  r.origin = at;
  r.peers = parsePeers(node["peers"], file);
  r.use = splitList(scalarOrList(node["use"], at, "use"), ",");
  if (r.use.empty()) fail(at, "rule 'use' list is empty");
  return r;
}

/// "65536", "64K", "1M", "2G" (powers of 1024) as bytes.
uint64_t parseSize(const YAML::Node& node, const std::string& file, const std::string& key) {
  const std::string text = scalarText(node, file, "'" + key + "'");
  size_t used = 0;
  unsigned long long n = 0;
  try {
    n = std::stoull(text, &used);
  } catch (const std::exception&) {
    fail(where(file, node), "'" + key + "': '" + text + "' is not a size (bytes, or a number with K, M or G)");
  }
  const std::string unit = text.substr(used);
  const int shift = unit.empty() ? 0 : unit == "K" ? 10 : unit == "M" ? 20 : unit == "G" ? 30 : -1;
  if (shift < 0 || text[0] == '-' || (shift && n > (UINT64_MAX >> shift)))
    fail(where(file, node), "'" + key + "': '" + text + "' is not a size (bytes, or a number with K, M or G)");
  return static_cast<uint64_t>(n) << shift;
}

/// The directory part of a file name, with its '/', or "".
std::string directoryOf(const std::string& file) {
  const size_t slash = file.rfind('/');
  return slash == std::string::npos ? "" : file.substr(0, slash + 1);
}

PlanRule parsePlanRule(const YAML::Node& node, const std::string& file) {
  const std::string at = where(file, node);
  if (!node.IsMap()) fail(at, "each plan rule must be a map with 'collective' and 'file'");
  for (const auto& kv : node) {
    const std::string key = scalarText(kv.first, file, "a key of a plan rule");
    if (key != "collective" && key != "file" && key != "min_bytes" && key != "max_bytes" && key != "ranks" &&
        key != "mem")
      fail(where(file, kv.first),
           "unknown key '" + key + "' in plan rule (expected collective, file, min_bytes, max_bytes, ranks, mem)");
  }
  if (!node["collective"] || !node["file"]) fail(at, "a plan rule needs both 'collective' and 'file'");
  PlanRule r;
  r.origin = at;
  r.collective = scalarText(node["collective"], file, "'collective'");
  static const std::vector<std::string> kinds{"allreduce", "allgather", "reducescatter", "alltoall"};
  if (std::find(kinds.begin(), kinds.end(), r.collective) == kinds.end())
    fail(where(file, node["collective"]), "plan rule: collective '" + r.collective +
                                              "' cannot be served by a plan (allreduce, allgather, reducescatter, "
                                              "alltoall)");
  r.file = scalarText(node["file"], file, "'file'");
  if (r.file.empty()) fail(where(file, node["file"]), "plan rule: 'file' is empty");
  if (r.file[0] != '/') r.file = directoryOf(file) + r.file;
  if (node["min_bytes"]) r.minBytes = parseSize(node["min_bytes"], file, "min_bytes");
  if (node["max_bytes"]) r.maxBytes = parseSize(node["max_bytes"], file, "max_bytes");
  if (r.minBytes > r.maxBytes) fail(at, "plan rule: min_bytes is above max_bytes");
  if (node["mem"]) {
    r.mem = scalarText(node["mem"], file, "'mem'");
    if (r.mem != "host" && r.mem != "gpu" && r.mem != "any")
      fail(where(file, node["mem"]), "plan rule: mem '" + r.mem + "' is not host, gpu or any");
  }
  if (node["ranks"]) {
    const std::string text = scalarText(node["ranks"], file, "'ranks'");
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 6 ||
        std::stoi(text) < 1)
      fail(where(file, node["ranks"]), "plan rule: ranks '" + text + "' is not a rank count");
    r.ranks = std::stoi(text);
  }
  return r;
}

}  // namespace

void Config::loadYaml(const std::string& text, const std::string& file) {
  yamlName_ = file;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail(file + ":" + std::to_string(e.mark.line + 1), "YAML syntax error: " + e.msg);
  }
  try {
    if (root.IsNull()) return;
    if (!root.IsMap()) fail(file + ":1", "the config file must be a map of settings");
    for (const auto& kv : root) {
      std::string key = scalarText(kv.first, file, "a setting's name");
      std::string at = where(file, kv.first);
      const YAML::Node& value = kv.second;
      if (key == "rules") {
        if (!value.IsSequence()) fail(at, "'rules' must be a list");
        for (const auto& r : value) rules_.push_back(parseRule(r, file));
      } else if (key == "plans") {
        if (!value.IsSequence()) fail(at, "'plans' must be a list");
        for (const auto& r : value) planRules_.push_back(parsePlanRule(r, file));
      } else if (value.IsMap()) {
        std::vector<std::string> names = coreNames();
        if (std::find(names.begin(), names.end(), key) != names.end())
          fail(at, "'" + key + "' must be a value, not a map");
        yamlSections_[key] = at;
        for (const auto& pk : value) {
          std::string pkey = scalarText(pk.first, file, "a key of section '" + key + "'");
          yaml_[key + "." + pkey] = YamlValue{scalarOrList(pk.second, where(file, pk.first), pkey),
                                              where(file, pk.first), true};
        }
      } else {
        std::vector<std::string> names = coreNames();
        if (std::find(names.begin(), names.end(), key) == names.end()) {
          std::string hint = closestMatch(key, names);
          fail(at, "unknown setting '" + key + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
        }
        yaml_[key] = YamlValue{scalarOrList(value, at, key), at, true};
      }
    }
  } catch (const YAML::Exception& e) {  // a shape the checks did not foresee: still a config error
    fail(file + ":" + std::to_string(e.mark.line + 1), "unexpected YAML structure: " + e.msg);
  }
}

void Config::checkPluginSectionsUsed(const std::vector<std::string>& loaded) const {
  for (const auto& section : yamlSections_) {
    if (std::find(loaded.begin(), loaded.end(), section.first) == loaded.end()) {
      std::string hint = closestMatch(section.first, loaded);
      fail(section.second, "settings for transport '" + section.first + "', which is not loaded" +
                               (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
    }
  }
  for (const auto& kv : yaml_) {
    size_t dot = kv.first.find('.');
    if (dot == std::string::npos || settings_.count(kv.first)) continue;
    std::string plugin = kv.first.substr(0, dot);
    std::vector<std::string> keys;
    for (const auto& s : settings_)
      if (s.first.rfind(plugin + ".", 0) == 0) keys.push_back(s.first.substr(dot + 1));
    std::string key = kv.first.substr(dot + 1);
    std::string hint = closestMatch(key, keys);
    fail(kv.second.origin, "transport '" + plugin + "' has no setting '" + key + "'" +
                               (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
  }
}

void Config::checkRulesAgainst(const std::vector<std::string>& transports) const {
  if (transports.size() == 1 && transports[0] == "auto") return;
  for (const auto& rule : rules_) {
    for (const auto& name : rule.use) {
      if (std::find(transports.begin(), transports.end(), name) != transports.end()) continue;
      std::string list;
      for (const auto& t : transports) list += (list.empty() ? "" : ", ") + t;
      std::string hint = closestMatch(name, transports);
      fail(rule.origin, "rule uses transport '" + name + "', which is not in transports [" + list + "]" +
                            (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
    }
  }
}

}  // namespace plugboard
