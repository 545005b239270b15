#include "context.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "error.hpp"

namespace plugboard::ethernet {

namespace {

/// Setting keys, plugin-relative (the core prefixes "ethernet.").
constexpr const char* kIfname = "ifname";
constexpr const char* kSocketBuffer = "socket_buffer_bytes";
constexpr const char* kCallerSend = "caller_send_bytes";
constexpr const char* kStripeSockets = "stripe_sockets";
constexpr const char* kStripeBytes = "stripe_bytes";
constexpr const char* kAckTimeout = "ack_timeout";

/// caller_send_bytes = auto: on a few cores one thread doing all the work
/// wins (a second one only competes for the cores); on more, a sender
/// thread sending large frames while the caller receives wins.
/// The limit counts a frame's payload, which carries the core's own header
/// too: a 64 KiB host-collectives chunk is a 65600-byte write. 4 KiB of room
/// keeps such chunks with the caller, as intended (with exactly 65536 they
/// went to the sender thread: 8 ranks on 16 cores took 163 us for a 64 KiB
/// allreduce against 126 us with caller_send_bytes=all, session 37).
constexpr unsigned kFewCores = 4;
constexpr size_t kManyCoresCallerSend = 64 * 1024 + 4096;

/// Parses a byte count in [0, max] of setting key; throws Error naming it.
long long parseBytes(const char* key, const std::string& text, long long max, const char* expected) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  ETH_CHECK(errno == 0 && !text.empty() && *end == '\0' && v >= 0 && v <= max, PB_ERR_INVALID,
            std::string("ethernet.") + key + " = '" + text + "' is not " + expected);
  return v;
}

/// Parses ack_timeout: seconds in [0, 86400].
std::chrono::milliseconds parseAckTimeout(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double s = std::strtod(text.c_str(), &end);
  ETH_CHECK(errno == 0 && !text.empty() && *end == '\0' && s >= 0 && s <= 86400, PB_ERR_INVALID,
            std::string("ethernet.") + kAckTimeout + " = '" + text + "' is not a number of seconds in [0, 86400]");
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0 + 0.5));
}

/// Parses caller_send_bytes: "auto", "all", or a byte count.
size_t parseCallerSend(const std::string& text) {
  if (text.empty() || text == "auto") {
    const unsigned cores = std::thread::hardware_concurrency();
    return cores != 0 && cores <= kFewCores ? SIZE_MAX : kManyCoresCallerSend;
  }
  if (text == "all") return SIZE_MAX;
  return static_cast<size_t>(parseBytes(kCallerSend, text, LLONG_MAX, "auto, all or a byte count"));
}

/// Parses stripe_sockets: a count in [0, kMaxStripes] (auto is handled by the caller).
uint32_t parseStripeSockets(const std::string& text) {
  return static_cast<uint32_t>(
      parseBytes(kStripeSockets, text, kMaxStripes, ("auto or a count in [0, " + std::to_string(kMaxStripes) + "]").c_str()));
}

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

}  // namespace

Context::Context(const pb_host_services_v1* host) : host_(host, "ethernet") {
  declareSettings();
  settings();  // Fail at init, not at the first connection, on a bad value.
}

void Context::declareSettings() const {
  const pb_setting_decl_v1 decls[] = {
      {sizeof(pb_setting_decl_v1), kIfname, PB_SETTING_STRING, "",
       "Interfaces for ethernet connections, NCCL_SOCKET_IFNAME syntax (^ excludes, = exact, "
       "else prefix); empty: loopback to same-host peers, else the first non-loopback interface",
       1},
      {sizeof(pb_setting_decl_v1), kSocketBuffer, PB_SETTING_INT, "0",
       "SO_SNDBUF/SO_RCVBUF of ethernet sockets in bytes; 0 keeps the system default", 1},
      {sizeof(pb_setting_decl_v1), kCallerSend, PB_SETTING_STRING, "auto",
       "Largest frame a posting or polling thread sends itself (larger ones: the connection's sender "
       "thread, in parallel); all, a byte count, or auto (all on up to 4 cores, else 69632: 64 KiB and a header)",
       1},
      {sizeof(pb_setting_decl_v1), kStripeSockets, PB_SETTING_STRING, "auto",
       "Extra TCP sockets per connection direction that carry the pieces of large writes in parallel, each "
       "with its own sending and receiving thread; 0 sends every byte on the one frame stream; auto: 4 where "
       "the host has at least 8 cores per rank of the communicator on it, else 0",
       1},
      {sizeof(pb_setting_decl_v1), kStripeBytes, PB_SETTING_INT, "131072",
       "Smallest write cut into pieces over the stripe sockets (when stripe_sockets > 0)", 1},
      {sizeof(pb_setting_decl_v1), kAckTimeout, PB_SETTING_DOUBLE, "30",
       "Seconds sent data may stay unacknowledged before the connection fails as cut (TCP_USER_TIMEOUT: "
       "a dead link or host is then an error, which `failover` can move past, before the core's timeout); "
       "0 keeps the system's retransmission limit (about 15 minutes)",
       1},
  };
  host_.declare(decls, sizeof(decls) / sizeof(decls[0]));
}

Settings Context::settings() const {
  Settings s;
  s.ifname = host_.setting(kIfname);
  std::string text = host_.setting(kSocketBuffer);
  if (!text.empty())
    s.socketBufferBytes = static_cast<int>(parseBytes(kSocketBuffer, text, 1LL << 30, "a byte count in [0, 2^30]"));
  s.callerSendBytes = parseCallerSend(host_.setting(kCallerSend));
  text = host_.setting(kStripeSockets);
  s.stripeSocketsAuto = text.empty() || text == "auto";
  if (!s.stripeSocketsAuto) s.stripeSockets = parseStripeSockets(text);
  text = host_.setting(kStripeBytes);
  if (!text.empty())
    s.stripeBytes = static_cast<size_t>(parseBytes(kStripeBytes, text, LLONG_MAX, "a byte count"));
  text = host_.setting(kAckTimeout);
  if (!text.empty()) s.ackTimeout = parseAckTimeout(text);
  return s;
}

namespace {

/// An address without the ":0" port listing addresses carry ("[::1]:0" -> "::1").
std::string bareAddress(const net::SockAddr& a) {
  std::string text = a.str();
  if (text.size() > 2 && text.compare(text.size() - 2, 2, ":0") == 0) text.resize(text.size() - 2);
  if (text.size() > 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  return text;
}

/// "lo 127.0.0.1 ::1 (loopback), eth0 10.0.0.1": each interface once, with its addresses.
std::string interfaceList(const std::vector<net::Interface>& list) {
  std::vector<std::pair<std::string, std::string>> named;  // name, "addresses"
  for (const auto& i : list) {
    auto it = std::find_if(named.begin(), named.end(), [&](const auto& n) { return n.first == i.name; });
    if (it == named.end()) it = named.insert(named.end(), {i.name, i.name + (i.loopback ? " (loopback)" : "")});
    it->second += " " + bareAddress(i.address);
  }
  std::string out;
  for (const auto& n : named) out += (out.empty() ? "" : ", ") + n.second;
  return out.empty() ? "none" : out;
}

}  // namespace

std::string Context::describe() const {
  const Settings s = settings();
  const auto all = net::listInterfaces();
  const auto chosen = net::selectInterfaces(all, s.ifname);
  std::string out = "interfaces up: " + interfaceList(all);
  out += "\nifname '" + s.ifname + "' selects: " + (chosen.empty() ? "nothing" : interfaceNames(chosen));
  out += "\nsame-host peers over: ";
  out += s.ifname.empty() ? "lo 127.0.0.1" : chosen.empty() ? "nothing" : chosen.front().name;
  const auto wide = std::find_if(chosen.begin(), chosen.end(), [](const net::Interface& i) { return !i.loopback; });
  out += "\nother hosts over: " + (wide == chosen.end() ? std::string("nothing (no selected interface leaves the host)")
                                                         : wide->name + " " + bareAddress(wide->address));
  return out;
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
         " is on host " + peer.host + " (this is host " + host_.hostname() + ")";
  return std::nullopt;
}

}  // namespace plugboard::ethernet
