#include "settings.hpp"

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "error.hpp"

namespace plugboard::ibverbs {
namespace {

/// A setting's text and, for errors, the setting and its source (settingSource).
struct Value {
  std::string text;
  std::string where;
};

int64_t parseInt(const Value& v, int64_t lo, int64_t hi) {
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v.text.c_str(), &end, 10);
  const bool ok = !v.text.empty() && end && *end == '\0' && errno == 0 && n >= lo && n <= hi;
  IBV_CHECK(ok, PB_ERR_INVALID,
            v.where + ": '" + v.text + "' is not an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  return n;
}

ibv_mtu parseMtu(const Value& v) {
  switch (parseInt(v, 256, 4096)) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    case 4096: return IBV_MTU_4096;
    default: break;
  }
  throw Error(PB_ERR_INVALID, v.where + ": '" + v.text + "' is not 256, 512, 1024, 2048 or 4096");
}

}  // namespace

std::optional<std::string> processEnvironment(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (!v) return std::nullopt;
  return std::string(v);
}

std::string settingName(const std::string& key) { return "ib-verbs." + key; }

std::string settingEnvName(const std::string& key) {
  std::string out = "PLUGBOARD_IB_VERBS_";
  for (char c : key) out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string settingSource(const std::string& key, const std::string& text, const EnvLookup& env) {
  const std::string var = settingEnvName(key);
  if (env(var) == text) return settingName(key) + " from " + var;
  return settingName(key) + " from the YAML config (ib-verbs: {" + key + ": ...}) or the program";
}

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

IbSettings parseSettings(const SettingLookup& lookup, const EnvLookup& env) {
  auto get = [&](const std::string& key) -> Value {
    if (auto v = lookup(key); v && !v->empty()) return {*v, settingSource(key, *v, env)};
    for (const SettingSpec& s : settingSpecs())
      if (key == s.key) return {s.defaultValue, "the default of " + settingName(key)};
    throw Error(PB_ERR_INTERNAL, settingName(key) + " is not declared");
  };
  IbSettings s;
  const Value hca = get("hca");
  s.hca = HcaFilter::parse(hca.text, hca.where);
  s.gidIndex = static_cast<int>(parseInt(get("gid_index"), -1, 255));
  s.trafficClass = static_cast<uint8_t>(parseInt(get("traffic_class"), 0, 255));
  s.serviceLevel = static_cast<uint8_t>(parseInt(get("service_level"), 0, 15));
  s.mtu = parseMtu(get("mtu"));
  s.timeout = static_cast<uint8_t>(parseInt(get("timeout"), 1, 31));
  s.retryCount = static_cast<uint8_t>(parseInt(get("retry_count"), 0, 7));
  s.qpsPerConnection = static_cast<int>(parseInt(get("qps_per_connection"), 1, 16));
  s.stripeMinBytes = static_cast<uint64_t>(parseInt(get("stripe_min_bytes"), 4096, int64_t(1) << 40));
  s.inlineBytes = static_cast<uint32_t>(parseInt(get("inline_bytes"), 0, 1024));
  s.gdrFlush = parseInt(get("gdr_flush"), 0, 1) == 1;
  return s;
}

}  // namespace plugboard::ibverbs
