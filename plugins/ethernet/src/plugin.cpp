// The ethernet transport's decisions at the ABI: its properties, cost and
// memory types, and which object each entry goes to. The C glue (guards,
// NULL checks, last_error, the table and the entry symbol) is
// plugboard/transport_cxx.hpp's.
#include <plugboard/transport_cxx.hpp>

#include <memory>
#include <string>

#include "connection.hpp"
#include "context.hpp"
#include "error.hpp"
#include "memory.hpp"

#ifndef PLUGBOARD_ETHERNET_VERSION
#define PLUGBOARD_ETHERNET_VERSION "0.0.0"
#endif

namespace plugboard::ethernet {

/// The ethernet transport for plugboard::transport_cxx::Adapter. connect,
/// write, write_signal, signal, progress, flush and free go to the
/// Connection's methods of those names (the adapter's defaults).
struct Traits {
  using Context = ethernet::Context;
  using Connection = ethernet::Connection;
  using Region = LocalRegion;
  using RemoteKey = RemoteRegion;
  static constexpr const char* kName = "ethernet";
  static constexpr const char* kVersion = PLUGBOARD_ETHERNET_VERSION;

  static Context* init(const pb_host_services_v1* host) { return new Context(host); }
  static std::string describe(Context& c) { return c.describe(); }

  static void properties(Context&, pb_transport_properties_v1& props) {
    using P = pb_transport_properties_v1;
    if (PB_HAS_FIELD(&props, P, mem_types)) props.mem_types = PB_MEM_HOST;
    if (PB_HAS_FIELD(&props, P, flags))
      props.flags = PB_CAP_ONE_SIDED_WRITE | PB_CAP_ATOMIC_SIGNAL | PB_CAP_NEEDS_PROXY | PB_CAP_SIGNAL_NOTIFY |
                   PB_CAP_CHEAP_REGISTRATION;  // regions are an id and a range in a table
    if (PB_HAS_FIELD(&props, P, bandwidth_gbps)) props.bandwidth_gbps = 1.25;  // 10 GbE-class link
    if (PB_HAS_FIELD(&props, P, latency_us)) props.latency_us = 25.0;         // kernel TCP round trip / 2
    if (PB_HAS_FIELD(&props, P, max_address_size)) props.max_address_size = wire::AddressBlob::kSize;
    if (PB_HAS_FIELD(&props, P, max_rkey_size)) props.max_rkey_size = wire::PackedRkey::kSize;
  }

  static int canConnect(Context& c, const pb_peer_info_v1* peer, std::string* why) {
    return c.route(PeerInfo::from(peer), c.settings(), why).has_value() ? kConnectCost : -1;
  }

  static Connection* setup(Context& c, const pb_peer_info_v1* peer, void* addr, size_t* addrLen) {
    return std::make_unique<Connection>(c, PeerInfo::from(peer), addr, addrLen).release();
  }

  static Region* registerMemory(Context& c, void* ptr, size_t size, pb_mem_type type) {
    ETH_CHECK(type != PB_MEM_CUDA, PB_ERR_UNSUPPORTED,
              "ethernet cannot register CUDA memory (GPU buffers are staged by the core)");
    ETH_CHECK(type == PB_MEM_HOST, PB_ERR_UNSUPPORTED,
              "ethernet cannot register memory of type " + std::to_string(int(type)) + " (host memory only)");
    ETH_CHECK(ptr || size == 0, PB_ERR_INVALID,
              "ethernet register_memory: NULL pointer for " + std::to_string(size) + " bytes");
    return c.regions().add(&c, ptr, size);
  }

  static void packRkey(Context&, Region& region, void* buf, size_t* len) { ethernet::packRkey(region, buf, len); }

  static void deregisterMemory(Context& c, Region* region) { c.regions().remove(region); }

  static void finalize(Context* c) {
    // Connection threads use the context: freeing it under them would crash.
    ETH_CHECK(c->connections() == 0, PB_ERR_INVALID,
              "ethernet finalize: " + std::to_string(c->connections()) + " connection(s) still open; free them first");
    if (size_t left = c->regions().size())
      c->log(PB_LOG_WARN, "finalize with " + std::to_string(left) + " region(s) still registered");
    delete c;
  }

  static RemoteKey* importRkey(Connection&, const void* buf, size_t len) {
    return new RemoteRegion(ethernet::importRkey(buf, len));
  }

  /// Socket errors that reach the ABI: their kind picks the status.
  static pb_status translate(const std::exception& e, const char* op, std::string* message) {
    const auto* net = dynamic_cast<const net::NetError*>(&e);
    if (!net) return PB_OK;
    *message = std::string("ethernet ") + op + ": " + net->what();
    switch (net->kind()) {
      case net::NetErrorKind::Timeout: return PB_ERR_TIMEOUT;
      case net::NetErrorKind::Closed:
      case net::NetErrorKind::Unacknowledged: return PB_ERR_REMOTE;
      case net::NetErrorKind::Invalid: return PB_ERR_INVALID;
      default: return PB_ERR_SYSTEM;
    }
  }
};

}  // namespace plugboard::ethernet

PLUGBOARD_DEFINE_TRANSPORT(plugboard::ethernet::Traits);
