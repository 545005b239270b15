#include "context.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "error.hpp"

namespace plugboard::ethernet {

namespace {

/// Setting keys, plugin-relative (the core prefixes "ethernet.").
constexpr const char* kIfname = "ifname";
constexpr const char* kSocketBuffer = "socket_buffer_bytes";

/// "eth0, lo" from every interface name, each once.
std::string interfaceNames(const std::vector<net::Interface>& all) {
  std::string out;
  std::vector<std::string> seen;
  for (const auto& i : all) {
    if (std::find(seen.begin(), seen.end(), i.name) != seen.end()) continue;
    seen.push_back(i.name);
    out += (out.empty() ? "" : ", ") + i.name;
  }
  return out.empty() ? "none" : out;
}

/// Calls a host service. The ABI is C, but should the host let a C++
/// exception out (e.g. a badly typed env value), report it as the user error
/// it is rather than as an internal one.
template <typename Call>
pb_status hostCall(const std::string& what, Call&& call) {
  try {
    return call();
  } catch (const std::exception& e) {
    throw Error(PB_ERR_INVALID, what + ": " + e.what());
  }
}

}  // namespace

PeerInfo PeerInfo::from(const pb_peer_info_v1* peer) {
  ETH_CHECK(peer, PB_ERR_INVALID, "peer info must not be NULL");
  ETH_CHECK(PB_HAS_FIELD(peer, pb_peer_info_v1, same_host), PB_ERR_INVALID,
            "pb_peer_info_v1 of " + std::to_string(peer->struct_size) + " bytes is too short");
  PeerInfo info;
  info.rank = peer->peer_rank;
  info.host = peer->peer_host ? peer->peer_host : "?";
  info.sameHost = peer->same_host != 0;
  return info;
}

std::string PeerInfo::describe() const { return "rank " + std::to_string(rank) + " (host " + host + ")"; }

Context::Context(const pb_host_services_v1* host) {
  ETH_CHECK(host, PB_ERR_INVALID, "ethernet: init needs the host services table");
  ETH_CHECK(host->abi_major == PB_TRANSPORT_ABI_MAJOR, PB_ERR_VERSION,
            "ethernet: the core speaks transport ABI " + std::to_string(host->abi_major) + "." +
                std::to_string(host->abi_minor) + ", this plugin speaks " +
                std::to_string(PB_TRANSPORT_ABI_MAJOR) + "." + std::to_string(PB_TRANSPORT_ABI_MINOR));
  ETH_CHECK(PB_HAS_FIELD(host, pb_host_services_v1, hostname), PB_ERR_INVALID,
            "ethernet: pb_host_services_v1 of " + std::to_string(host->struct_size) + " bytes is too short");
  // An older core's table may be shorter than ours: copy what it has.
  std::memcpy(&host_, host, std::min(sizeof(host_), host->struct_size));
  hasSignalLanded_ = PB_HAS_FIELD(host, pb_host_services_v1, signal_landed) && host->signal_landed != nullptr;
  rank_ = host->rank;
  hostname_ = host->hostname ? host->hostname : "?";
  declareSettings();
  settings();  // Fail at init, not at the first connection, on a bad value.
}

void Context::declareSettings() const {
  if (!host_.declare_setting) return;
  const pb_setting_decl_v1 decls[] = {
      {sizeof(pb_setting_decl_v1), kIfname, PB_SETTING_STRING, "",
       "Interfaces for ethernet connections, NCCL_SOCKET_IFNAME syntax (^ excludes, = exact, "
       "else prefix); empty: loopback to same-host peers, else the first non-loopback interface",
       1},
      {sizeof(pb_setting_decl_v1), kSocketBuffer, PB_SETTING_INT, "0",
       "SO_SNDBUF/SO_RCVBUF of ethernet sockets in bytes; 0 keeps the system default", 1},
  };
  for (const auto& d : decls) {
    std::string what = std::string("ethernet: declaring setting '") + d.key + "'";
    pb_status st = hostCall(what, [&] { return host_.declare_setting(host_.core, &d); });
    ETH_CHECK(st == PB_OK, st, what + ": the core refused it (status " + std::to_string(st) + ")");
  }
}

std::string Context::readSetting(const char* key) const {
  if (!host_.get_setting) return "";
  std::vector<char> buf(256);
  for (int attempt = 0; attempt < 3; ++attempt) {
    size_t needed = 0;
    pb_status st = hostCall(std::string("ethernet: reading setting '") + key + "'",
                            [&] { return host_.get_setting(host_.core, key, buf.data(), buf.size(), &needed); });
    if (st == PB_OK) return std::string(buf.data());
    ETH_CHECK(st == PB_ERR_NOMEM && needed > buf.size(), st,
              std::string("ethernet: cannot read setting '") + key + "' from the core");
    buf.resize(needed);
  }
  throw Error(PB_ERR_INTERNAL, std::string("ethernet: setting '") + key + "' keeps growing while read");
}

Settings Context::settings() const {
  Settings s;
  s.ifname = readSetting(kIfname);
  std::string text = readSetting(kSocketBuffer);
  if (!text.empty()) {
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(text.c_str(), &end, 10);
    ETH_CHECK(errno == 0 && *end == '\0' && v >= 0 && v <= (1LL << 30), PB_ERR_INVALID,
              "ethernet.socket_buffer_bytes = '" + text + "' is not a byte count in [0, 2^30]");
    s.socketBufferBytes = static_cast<int>(v);
  }
  return s;
}

std::optional<Route> Context::route(const PeerInfo& peer, const Settings& settings, std::string* why) const {
  // Same host, nothing configured: loopback always works and never leaves the host.
  if (settings.ifname.empty() && peer.sameHost) return Route{"lo", net::SockAddr::parse("127.0.0.1")};
  auto all = net::listInterfaces();
  auto chosen = net::selectInterfaces(all, settings.ifname);
  if (chosen.empty()) {
    *why = "no interface matches ifname '" + settings.ifname + "' (available: " + interfaceNames(all) + ")";
    return std::nullopt;
  }
  if (peer.sameHost) return Route{chosen.front().name, chosen.front().address};
  for (const auto& itf : chosen)
    if (!itf.loopback) return Route{itf.name, itf.address};
  *why = "interface " + chosen.front().name + " is loopback but rank " + std::to_string(peer.rank) +
         " is on host " + peer.host + " (this is host " + hostname_ + ")";
  return std::nullopt;
}

void Context::log(pb_log_level level, const std::string& message) const {
  if (host_.log) host_.log(host_.core, level, message.c_str());
}

void Context::setError(const std::string& message) {
  std::lock_guard<std::mutex> lock(errorMu_);
  error_ = message;
}

std::string Context::lastError() const {
  std::lock_guard<std::mutex> lock(errorMu_);
  return error_;
}

}  // namespace plugboard::ethernet
