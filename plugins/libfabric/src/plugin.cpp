// The libfabric transport's decisions at the ABI: its properties, cost and
// memory types, and which object each entry goes to. The C glue (guards,
// NULL checks, last_error, the table and the entry symbol) is
// plugboard/transport_cxx.hpp's.
#include <plugboard/transport_cxx.hpp>

#include <memory>
#include <mutex>
#include <string>

#include "connection.hpp"
#include "context.hpp"
#include "error.hpp"
#include "memory.hpp"
#include "wire.hpp"

#ifndef PLUGBOARD_LIBFABRIC_VERSION
#define PLUGBOARD_LIBFABRIC_VERSION "0.0.0"
#endif

namespace plugboard::libfabric {

/// The libfabric transport for plugboard::transport_cxx::Adapter. connect,
/// write, signal, write_signal, progress and flush go to the Connection's
/// methods of those names (the adapter's defaults).
struct Traits {
  using Context = libfabric::Context;
  using Connection = libfabric::Connection;
  using Region = LocalRegion;
  using RemoteKey = RemoteRegion;
  static constexpr const char* kName = "libfabric";
  static constexpr const char* kVersion = PLUGBOARD_LIBFABRIC_VERSION;

  static Context* init(const pb_host_services_v1* host) { return new Context(host); }
  static std::string describe(Context& c) { return c.describe(); }

  static void properties(Context& c, pb_transport_properties_v1& props) {
    using P = pb_transport_properties_v1;
    if (PB_HAS_FIELD(&props, P, mem_types)) props.mem_types = PB_MEM_HOST | (c.hmem() ? PB_MEM_CUDA : 0);
    // Cheap registration on tcp: the host collectives then write large
    // messages straight between the callers' buffers (README "Cheap registration").
    if (PB_HAS_FIELD(&props, P, flags))
      props.flags = PB_CAP_ONE_SIDED_WRITE | PB_CAP_ATOMIC_SIGNAL | PB_CAP_NEEDS_PROXY |
                    (c.registersCheaply() ? uint32_t(PB_CAP_CHEAP_REGISTRATION) : 0u);
    if (PB_HAS_FIELD(&props, P, bandwidth_gbps)) props.bandwidth_gbps = c.provider().bandwidthGbps();
    if (PB_HAS_FIELD(&props, P, latency_us)) props.latency_us = c.provider().latencyUs();
    if (PB_HAS_FIELD(&props, P, max_address_size))
      props.max_address_size = c.addressBlob(0).size();
    if (PB_HAS_FIELD(&props, P, max_rkey_size)) props.max_rkey_size = wire::PackedRkey::kHeaderSize + 8 * c.laneCount();
  }

  static int canConnect(Context& c, const pb_peer_info_v1* peer, std::string* why) {
    *why = c.whyUnreachable(PeerInfo::from(peer));
    return why->empty() ? c.provider().cost() : -1;
  }

  static Connection* setup(Context& c, const pb_peer_info_v1* peer, void* addr, size_t* addrLen) {
    return std::make_unique<Connection>(c, PeerInfo::from(peer), addr, addrLen).release();
  }

  static Region* registerMemory(Context& c, void* ptr, size_t size, pb_mem_type type) {
    std::lock_guard<std::mutex> lock(c.mutex());
    return c.registerMemory(ptr, size, type);
  }

  static void packRkey(Context&, Region& region, void* buf, size_t* len) { libfabric::packRkey(region, buf, len); }

  static void deregisterMemory(Context& c, Region* region) {
    std::lock_guard<std::mutex> lock(c.mutex());
    c.deregisterMemory(region);
  }

  static void finalize(Context* c) {
    {
      std::lock_guard<std::mutex> lock(c->mutex());
      OFI_CHECK(c->connections() == 0, PB_ERR_INVALID,
                "libfabric finalize: " + std::to_string(c->connections()) +
                    " connection(s) still open; free them first");
      if (size_t left = c->regionCount())
        c->log(PB_LOG_WARN, "libfabric: finalize with " + std::to_string(left) + " region(s) still registered");
    }
    delete c;
  }

  static RemoteKey* importRkey(Connection&, const void* buf, size_t len) {
    return new RemoteRegion(libfabric::importRkey(buf, len));
  }

  static void releaseRkey(Connection* conn, RemoteKey* key) {
    OFI_CHECK(conn, PB_ERR_INVALID, "libfabric release_rkey: conn must not be NULL");
    delete key;
  }

  static void freeConnection(Connection* conn) {
    OFI_CHECK(conn, PB_ERR_INVALID, "libfabric free: conn must not be NULL");
    delete conn;
  }
};

}  // namespace plugboard::libfabric

PLUGBOARD_DEFINE_TRANSPORT(plugboard::libfabric::Traits);
