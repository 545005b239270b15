// The ib-verbs transport's settings (ib_verbs.*, PLUGBOARD_IB_VERBS_*), their
// declarations for the core's registry and their parsed, range-checked
// values. Defaults follow NCCL's IB transport where it has one.
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

/// Parsed ib_verbs.* settings.
struct IbSettings {
  HcaFilter hca;                 ///< ib_verbs.hca
  int gidIndex = -1;             ///< ib_verbs.gid_index; -1: automatic (gid.hpp)
  uint8_t trafficClass = 0;      ///< ib_verbs.traffic_class (RoCE GRH)
  uint8_t serviceLevel = 0;      ///< ib_verbs.service_level (0-15)
  ibv_mtu mtu = IBV_MTU_4096;    ///< ib_verbs.mtu, capped later by both ports' active MTU
  uint8_t timeout = 20;          ///< ib_verbs.timeout: 4.096 us * 2^timeout per retry (1-31)
  uint8_t retryCount = 7;        ///< ib_verbs.retry_count (0-7)
  int qpsPerConnection = 1;      ///< ib_verbs.qps_per_connection (1-16)
  uint64_t stripeMinBytes = 128 << 10;  ///< ib_verbs.stripe_min_bytes
  uint32_t inlineBytes = 64;     ///< ib_verbs.inline_bytes: sends this small go inline (0-1024)
  bool gdrFlush = true;          ///< ib_verbs.gdr_flush: read back from peer GPU memory before a signal (gpu_flush.hpp)
};

/// One declaration per setting: key (without "ib_verbs."), default, doc.
struct SettingSpec {
  const char* key;
  const char* defaultValue;
  const char* doc;
};

/// Every setting the plugin declares, in plugboard-info's order.
const std::vector<SettingSpec>& settingSpecs();

/// Reads a setting's text by key; empty when unset (the default applies).
using SettingLookup = std::function<std::optional<std::string>(const std::string& key)>;

/// Parses every setting through lookup. Throws Error(PB_ERR_INVALID)
/// naming the setting, its value and the accepted range.
IbSettings parseSettings(const SettingLookup& lookup);

}  // namespace plugboard::ibverbs
