#include "settings.hpp"

#include <cerrno>
#include <cstdlib>

#include "error.hpp"

namespace plugboard::ibverbs {
namespace {

int64_t parseInt(const std::string& key, const std::string& text, int64_t lo, int64_t hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  const bool ok = !text.empty() && end && *end == '\0' && errno == 0 && v >= lo && v <= hi;
  IBV_CHECK(ok, PB_ERR_INVALID,
            "ib_verbs." + key + " = '" + text + "': expected an integer from " + std::to_string(lo) + " to " +
                std::to_string(hi));
  return v;
}

ibv_mtu parseMtu(const std::string& text) {
  const int64_t bytes = parseInt("mtu", text, 256, 4096);
  switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    case 4096: return IBV_MTU_4096;
    default: break;
  }
  throw Error(PB_ERR_INVALID, "ib_verbs.mtu = '" + text + "': expected 256, 512, 1024, 2048 or 4096");
}

}  // namespace

const std::vector<SettingSpec>& settingSpecs() {
  static const std::vector<SettingSpec> specs = {
      {"hca", "", "HCAs and ports to use, NCCL_IB_HCA syntax: mlx5_0:1,mlx5_1; ^ excludes, = exact names"},
      {"gid_index", "-1", "RoCE GID index; -1: the first RoCE v2 IPv4-mapped GID, else v2 IPv6, else v1"},
      {"traffic_class", "0", "RoCE traffic class (GRH), 0-255"},
      {"service_level", "0", "InfiniBand service level, 0-15"},
      {"mtu", "4096", "Largest path MTU in bytes (256-4096), capped by both ports' active MTU"},
      {"timeout", "20", "Ack timeout exponent: 4.096 us * 2^timeout per retry, 1-31"},
      {"retry_count", "7", "Transport retries before a write fails, 0-7"},
      {"qps_per_connection", "1", "Queue pairs per connection, writes striped over them, 1-16"},
      {"stripe_min_bytes", "131072", "Smallest stripe of a write over several queue pairs"},
      {"inline_bytes", "64", "Writes up to this many bytes are sent inline, 0-1024"},
      {"gdr_flush", "1", "1: a signal after writes into a peer's GPU memory waits for a read back from it, so the "
                         "GPU sees the data before the signal (NCCL's GDR flush); 0: off"},
  };
  return specs;
}

IbSettings parseSettings(const SettingLookup& lookup) {
  auto get = [&](const std::string& key) -> std::string {
    if (auto v = lookup(key); v && !v->empty()) return *v;
    for (const SettingSpec& s : settingSpecs())
      if (key == s.key) return s.defaultValue;
    throw Error(PB_ERR_INTERNAL, "ib_verbs." + key + " is not declared");
  };
  IbSettings s;
  s.hca = HcaFilter::parse(get("hca"), "ib_verbs.hca");
  s.gidIndex = static_cast<int>(parseInt("gid_index", get("gid_index"), -1, 255));
  s.trafficClass = static_cast<uint8_t>(parseInt("traffic_class", get("traffic_class"), 0, 255));
  s.serviceLevel = static_cast<uint8_t>(parseInt("service_level", get("service_level"), 0, 15));
  s.mtu = parseMtu(get("mtu"));
  s.timeout = static_cast<uint8_t>(parseInt("timeout", get("timeout"), 1, 31));
  s.retryCount = static_cast<uint8_t>(parseInt("retry_count", get("retry_count"), 0, 7));
  s.qpsPerConnection = static_cast<int>(parseInt("qps_per_connection", get("qps_per_connection"), 1, 16));
  s.stripeMinBytes =
      static_cast<uint64_t>(parseInt("stripe_min_bytes", get("stripe_min_bytes"), 4096, int64_t(1) << 40));
  s.inlineBytes = static_cast<uint32_t>(parseInt("inline_bytes", get("inline_bytes"), 0, 1024));
  s.gdrFlush = parseInt("gdr_flush", get("gdr_flush"), 0, 1) == 1;
  return s;
}

}  // namespace plugboard::ibverbs
