// The ib-verbs transport's settings (ib-verbs.*, PLUGBOARD_IB_VERBS_*), their
// declarations for the core's registry and their parsed, range-checked
// values. Defaults follow NCCL's IB transport where it has one. The core
// names a plugin's setting "<plugin>.<key>" after the plugin's name
// ("ib-verbs"), so messages do too.
#pragma once

#include <infiniband/verbs.h>
#include <plugboard/transport.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hca_filter.hpp"

namespace plugboard::ibverbs {

/// Parsed ib-verbs.* settings.
struct IbSettings {
  HcaFilter hca;                 ///< ib-verbs.hca
  int gidIndex = -1;             ///< ib-verbs.gid_index; -1: automatic (gid.hpp)
  uint8_t trafficClass = 0;      ///< ib-verbs.traffic_class (RoCE GRH)
  uint8_t serviceLevel = 0;      ///< ib-verbs.service_level (0-15)
  ibv_mtu mtu = IBV_MTU_4096;    ///< ib-verbs.mtu, capped later by both ports' active MTU
  uint8_t timeout = 20;          ///< ib-verbs.timeout: 4.096 us * 2^timeout per retry (1-31)
  uint8_t retryCount = 7;        ///< ib-verbs.retry_count (0-7)
  int qpsPerConnection = 1;      ///< ib-verbs.qps_per_connection (1-16)
  uint64_t stripeMinBytes = 128 << 10;  ///< ib-verbs.stripe_min_bytes
  uint32_t inlineBytes = 64;     ///< ib-verbs.inline_bytes: sends this small go inline (0-1024)
  bool gdrFlush = true;          ///< ib-verbs.gdr_flush: read back from peer GPU memory before a signal (gpu_flush.hpp)
};

/// One declaration per setting: key (without "ib-verbs."), default, doc.
struct SettingSpec {
  const char* key;
  const char* defaultValue;
  const char* doc;
};

/// Every setting the plugin declares, in plugboard-info's order.
const std::vector<SettingSpec>& settingSpecs();

/// Reads a setting's text by key; empty when unset (the default applies).
using SettingLookup = std::function<std::optional<std::string>(const std::string& key)>;

/// Reads an environment variable; nullopt when it is unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

/// The process's environment (std::getenv), parseSettings' default.
std::optional<std::string> processEnvironment(const std::string& name);

/// "ib-verbs.<key>": the setting's name in the core's registry.
std::string settingName(const std::string& key);

/// "PLUGBOARD_IB_VERBS_<KEY>": the environment variable the core reads it from.
std::string settingEnvName(const std::string& key);

/// The setting and where its text came from, for errors: "ib-verbs.hca
/// from PLUGBOARD_IB_VERBS_HCA" when the environment holds exactly that
/// text, else "ib-verbs.hca from the YAML config (ib-verbs: {hca: ...}) or
/// the program". The ABI's get_setting returns only the value; the core
/// lets the environment override YAML, so an equal variable is its source.
std::string settingSource(const std::string& key, const std::string& text, const EnvLookup& env);

/// Parses every setting through lookup; env tells where a bad value came
/// from. Throws Error(PB_ERR_INVALID) naming the setting, its source, its
/// value and the accepted range.
IbSettings parseSettings(const SettingLookup& lookup, const EnvLookup& env = processEnvironment);

}  // namespace plugboard::ibverbs
