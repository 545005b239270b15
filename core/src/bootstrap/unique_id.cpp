#include "bootstrap/unique_id.hpp"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <random>

#include "bootstrap/context.hpp"
#include "bootstrap/wire.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {
namespace bootstrap {
namespace {

constexpr uint16_t kFlagCreated = 1;

// Root listeners opened by createUniqueId, by nonce. A forked child inherits
// both the map and the descriptors, so its rank 0 can take the socket over.
struct ListenerRegistry {
  std::mutex mutex;
  std::map<uint64_t, net::Socket> byNonce;
};

ListenerRegistry& registry() {
  static ListenerRegistry* r = new ListenerRegistry;  // never destroyed: forked children use it
  return *r;
}

uint64_t newNonce() {
  std::random_device rd;
  uint64_t n = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  n ^= static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  n ^= static_cast<uint64_t>(getpid()) << 17;
  return n == 0 ? 1 : n;
}

uint64_t hashText(const std::string& text) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  return h == 0 ? 1 : h;
}

std::string interfaceNames(const std::vector<net::Interface>& all) {
  std::string out;
  for (const auto& i : all) out += (out.empty() ? "" : ", ") + i.name + " " + i.address.str();
  return out.empty() ? "none" : out;
}

net::Interface pickInterface(const std::string& spec) {
  std::vector<net::Interface> all;
  try {
    all = net::listInterfaces();
  } catch (const net::NetError& e) {
    rethrowNet(e, "bootstrap: cannot list the network interfaces");
  }
  std::vector<net::Interface> chosen = net::selectInterfaces(all, spec);
  if (chosen.empty())
    throw Error(ErrorCode::Config, "bootstrap: no network interface matches '" + spec +
                                       "' (interfaces: " + interfaceNames(all) + ")");
  return chosen.front();
}

}  // namespace

UniqueId encodeId(const IdContents& c) {
  std::vector<uint8_t> buf;
  ByteWriter w(buf);
  w.u32(kIdMagic);
  w.u16(kWireVersion);
  w.u16(c.created ? kFlagCreated : 0);
  w.u64(c.nonce);
  w.address(c.root);
  UniqueId id;
  memcpy(id.bytes.data(), buf.data(), buf.size());
  return id;
}

IdContents decodeId(const UniqueId& id) {
  ByteReader r(id.bytes.data(), id.bytes.size());
  uint32_t magic = r.u32();
  uint16_t version = r.u16();
  if (magic != kIdMagic || version != kWireVersion)
    throw Error(ErrorCode::InvalidUsage,
                "bootstrap: the UniqueId is not one made by TcpBootstrap (version " +
                    std::to_string(kWireVersion) + "); was it copied whole to every rank?");
  IdContents c;
  c.created = (r.u16() & kFlagCreated) != 0;
  c.nonce = r.u64();
  c.root = r.address();
  if (!r.ok()) throw Error(ErrorCode::InvalidUsage, "bootstrap: the UniqueId holds no valid root address");
  return c;
}

net::Socket takeRootListener(uint64_t nonce) {
  ListenerRegistry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto it = reg.byNonce.find(nonce);
  if (it == reg.byNonce.end()) return net::Socket();
  net::Socket s = std::move(it->second);
  reg.byNonce.erase(it);
  return s;
}

}  // namespace bootstrap

UniqueId TcpBootstrap::createUniqueId(const std::string& interfaceSpec) {
  net::Interface itf = bootstrap::pickInterface(interfaceSpec);
  bootstrap::IdContents c;
  c.nonce = bootstrap::newNonce();
  c.created = true;
  net::Socket listener;
  try {
    listener = net::Socket::listenOn(itf.address);
    c.root = listener.localAddress();
  } catch (const net::NetError& e) {
    bootstrap::rethrowNet(e, "bootstrap: cannot open the root listener on " + itf.name);
  }
  PB_LOG(Info, "BOOTSTRAP", "unique id created: root listens on " << c.root.str() << " (" << itf.name << ")");
  auto& reg = bootstrap::registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  reg.byNonce[c.nonce] = std::move(listener);
  return bootstrap::encodeId(c);
}

UniqueId TcpBootstrap::uniqueIdFromAddress(const std::string& hostPort, const std::string& jobKey) {
  bootstrap::IdContents c;
  try {
    c.root = net::SockAddr::parse(hostPort);
  } catch (const net::NetError& e) {
    bootstrap::rethrowNet(e, "bootstrap: bad root address");
  }
  // Every rank derives the id on its own, so the nonce must follow from the
  // address and the job key alone.
  c.nonce = bootstrap::hashText(jobKey.empty() ? c.root.str() : c.root.str() + "\n" + jobKey);
  return bootstrap::encodeId(c);
}

std::string TcpBootstrap::uniqueIdAddress(const UniqueId& id) {
  return bootstrap::decodeId(id).root.str();
}

}  // namespace plugboard
