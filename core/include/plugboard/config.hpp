/// @file config.hpp
/// The one typed registry of settings, for the core and every plugin.
///
/// Precedence: environment (PLUGBOARD_<KEY>, PLUGBOARD_<PLUGIN>_<KEY>)
/// beats the YAML file (PLUGBOARD_CONFIG or a path given by the program)
/// beats the default. Every value is parsed and type-checked when resolved;
/// errors name the file and line or the environment variable.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace plugboard {

/// Type of a setting's value.
enum class SettingType { String, Int, Bool, Double };

/// Where a setting's value came from.
enum class SettingSource { Default, Yaml, Env, Program };

/// Returns "default", "yaml", "env" or "program".
const char* settingSourceName(SettingSource source);

/// Declaration of one setting: its name, type, default and documentation.
struct SettingDecl {
  std::string name;          ///< "timeout" for the core, "ethernet.ifname" for a plugin.
  SettingType type = SettingType::String;
  std::string defaultValue;  ///< As text; parsed like any other value.
  std::string doc;           ///< One line for plugboard-info.
  bool rankLocal = false;    ///< May differ between ranks (excluded from the cross-rank check).
};

/// A declared setting with its resolved value.
struct Setting {
  SettingDecl decl;
  std::string value;                           ///< Resolved value, as text.
  SettingSource source = SettingSource::Default;
  std::string origin;                          ///< "file.yaml:12", "PLUGBOARD_TIMEOUT" or "".
};

/// A set of ranks written as "0-7,12,14-15".
class RankSet {
 public:
  /// Parses text; throws Error(Config) with `where` on a bad range.
  static RankSet parse(const std::string& text, const std::string& where);
  /// True when rank is in the set.
  bool contains(int rank) const;
  /// The text it was parsed from.
  const std::string& text() const { return text_; }

 private:
  std::vector<std::pair<int, int>> ranges_;
  std::string text_;
};

/// Which peer pairs a rule applies to.
struct PeerMatch {
  /// The kinds of match.
  enum class Kind { Any, SameHost, DifferentHost, Ranks, Hosts };
  Kind kind = Kind::Any;
  RankSet from, to;                ///< Kind::Ranks: one end in from, the other in to.
  std::vector<std::string> hosts;  ///< Kind::Hosts: both ends on one of these hosts.
  /// Human-readable form for logs, e.g. "same-host" or "{from: 0-7, to: 8-15}".
  std::string describe() const;
};

/// One transport rule: the first rule whose peers match a pair decides the
/// transports that pair may use, in preference order.
struct Rule {
  PeerMatch peers;
  std::vector<std::string> use;  ///< Transport names in preference order.
  std::string origin;            ///< "file.yaml:7" for messages.
};

/// One plan rule (YAML `plans:`): collective calls of `collective`
/// whose size lies in [minBytes, maxBytes] on a communicator of the plan's
/// rank count run the execution plan in `file` instead of the built-in
/// algorithm. The first matching rule wins. Size is the call's largest
/// buffer, as plugboard-perf reports it (allgather: the gathered output;
/// reducescatter: the input).
struct PlanRule {
  std::string collective;       ///< allreduce, allgather, reducescatter or alltoall.
  std::string file;             ///< The plan, relative paths taken from the YAML file's directory.
  uint64_t minBytes = 0;        ///< Smallest call it serves.
  uint64_t maxBytes = UINT64_MAX;  ///< Largest call it serves.
  int ranks = 0;                ///< As written (0: not given); must be the plan's rank count.
  std::string mem = "any";      ///< host, gpu or any: which collectives (host or GPU buffers) it serves.
  std::string origin;           ///< "file.yaml:7" for messages.
};

/// The settings registry. Copyable; not thread-safe for writes.
class Config {
 public:
  /// Core settings only, defaults plus the environment; reads the YAML file
  /// named by PLUGBOARD_CONFIG if set.
  static Config fromEnvironment();
  /// Core settings, the YAML file at path, then the environment.
  static Config fromYamlFile(const std::string& path);
  /// Core settings, YAML text (name is used in messages), then the environment.
  static Config fromYamlText(const std::string& text, const std::string& name);

  /// Declares a setting (core or plugin) and resolves its value from the
  /// YAML and the environment. Throws Error(Config) for a duplicate name or
  /// a value of the wrong type.
  void declare(const SettingDecl& decl);
  /// Sets a value from the program (beats everything else).
  void set(const std::string& name, const std::string& value);

  /// True if name was declared.
  bool has(const std::string& name) const;
  /// The resolved value as text. Throws Error(InvalidUsage) for an undeclared name.
  const std::string& getString(const std::string& name) const;
  /// The resolved value as an integer.
  int64_t getInt(const std::string& name) const;
  /// The resolved value as a boolean.
  bool getBool(const std::string& name) const;
  /// The resolved value as a double.
  double getDouble(const std::string& name) const;
  /// A comma-separated value split into trimmed, non-empty items.
  std::vector<std::string> getList(const std::string& name) const;
  /// The full record of a setting.
  const Setting& get(const std::string& name) const;
  /// Every setting, sorted by name.
  std::vector<Setting> all() const;

  /// The transport rules from the YAML file, in order.
  const std::vector<Rule>& rules() const { return rules_; }
  /// The plan rules from the YAML file, in order (first match wins).
  const std::vector<PlanRule>& planRules() const { return planRules_; }
  /// Names of YAML sections that hold settings of a plugin (e.g. "ethernet").
  std::vector<std::string> pluginSections() const;
  /// The directories of plugin_path given in YAML only (searched before the env's).
  std::vector<std::string> yamlPluginPath() const;
  /// The YAML file's name, or "" when there is none.
  const std::string& yamlName() const { return yamlName_; }

  /// Fails (Error(Config), file:line) for YAML keys of plugin sections that
  /// no loaded plugin declared, and for sections of plugins not loaded.
  void checkPluginSectionsUsed(const std::vector<std::string>& loadedPlugins) const;
  /// Fails for rules naming transports outside `transports` (when explicit).
  void checkRulesAgainst(const std::vector<std::string>& transports) const;
  /// Logs at INFO each value that does not come from its default.
  void logOverrides() const;
  /// Environment variables that start with PLUGBOARD_ but match no setting
  /// nor a launch variable, each with a "did you mean" suggestion if close.
  std::vector<std::string> unknownEnvironmentVariables() const;

  /// "name=value" lines, sorted, of every setting not marked rankLocal: what
  /// every rank must agree on.
  std::string sharedSettingsText() const;

  /// The environment variable of a setting: "ethernet.ifname" ->
  /// "PLUGBOARD_ETHERNET_IFNAME".
  static std::string envName(const std::string& settingName);

 private:
  struct YamlValue {
    std::string text;
    std::string origin;
    bool isScalar = true;
  };
  Config();
  void loadYaml(const std::string& text, const std::string& name);
  void resolve(Setting& s);
  void declareCore();

  std::map<std::string, Setting> settings_;
  std::map<std::string, YamlValue> yaml_;  // "key" or "plugin.key" -> value
  std::map<std::string, std::string> yamlSections_;  // plugin section -> origin
  std::vector<Rule> rules_;
  std::vector<PlanRule> planRules_;
  std::string yamlName_;
};

/// Edit distance between two strings (for "did you mean" suggestions).
size_t editDistance(const std::string& a, const std::string& b);

/// The candidate closest to word if it is close enough to be a likely typo, else "".
std::string closestMatch(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace plugboard
