// The ucx transport's decisions at the ABI: its properties, cost and
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

#ifndef PLUGBOARD_UCX_VERSION
#define PLUGBOARD_UCX_VERSION "0.0.0"
#endif

namespace plugboard::ucx {

/// The ucx transport for plugboard::transport_cxx::Adapter. connect,
/// write, write_signal, signal, progress, flush and free go to the
/// Connection's methods of those names (the adapter's defaults).
struct Traits {
  using Context = ucx::Context;
  using Connection = ucx::Connection;
  using Region = LocalRegion;
  using RemoteKey = ucx::RemoteKey;
  static constexpr const char* kName = "ucx";
  static constexpr const char* kVersion = PLUGBOARD_UCX_VERSION;

  static Context* init(const pb_host_services_v1* host) { return new Context(host); }
  static std::string describe(Context& c) { return c.describe(); }

  static void properties(Context& c, pb_transport_properties_v1& props) {
    using P = pb_transport_properties_v1;
    if (PB_HAS_FIELD(&props, P, mem_types))
      props.mem_types = uint32_t(PB_MEM_HOST) | (c.supportsCuda() && !c.activeMessages() ? uint32_t(PB_MEM_CUDA) : 0u);
    if (PB_HAS_FIELD(&props, P, flags))
      props.flags = PB_CAP_ONE_SIDED_WRITE | PB_CAP_ATOMIC_SIGNAL | PB_CAP_NEEDS_PROXY |
                    (c.settings().progressThread ? uint32_t(PB_CAP_SIGNAL_NOTIFY) : 0u) |
                    (c.registersCheaply() ? uint32_t(PB_CAP_CHEAP_REGISTRATION) : 0u);
    // Fixed estimates (README): UCX picks the transport, these do not follow it.
    if (PB_HAS_FIELD(&props, P, bandwidth_gbps)) props.bandwidth_gbps = 12.5;  // a 100 Gb/s-class NIC
    if (PB_HAS_FIELD(&props, P, latency_us)) props.latency_us = 3.0;
    if (PB_HAS_FIELD(&props, P, max_address_size)) props.max_address_size = c.maxAddressSize();
    if (PB_HAS_FIELD(&props, P, max_rkey_size)) props.max_rkey_size = c.maxRkeySize();
  }

  static int canConnect(Context& c, const pb_peer_info_v1* peer, std::string* why) {
    *why = c.unreachableReason(PeerInfo::from(peer));
    return why->empty() ? c.connectCost() : -1;
  }

  static Connection* setup(Context& c, const pb_peer_info_v1* peer, void* addr, size_t* addrLen) {
    return std::make_unique<Connection>(c, PeerInfo::from(peer), addr, addrLen).release();
  }

  static Region* registerMemory(Context& c, void* ptr, size_t size, pb_mem_type type) {
    PB_UCX_CHECK(type != PB_MEM_CUDA || c.supportsCuda(), PB_ERR_UNSUPPORTED,
                 std::string("ucx cannot register CUDA memory: this UCX (") + ucp_get_version_string() +
                     ") reports no CUDA memory support (memory types: " + c.memoryTypesText() +
                     "); GPU buffers are staged by the core");
    PB_UCX_CHECK(type != PB_MEM_CUDA || !c.activeMessages(), PB_ERR_UNSUPPORTED,
                 "ucx cannot register CUDA memory with ucx.protocol=am (active messages are stored by the CPU); "
                 "GPU buffers are staged by the core, or set ucx.protocol=rma for GPUDirect through UCX");
    PB_UCX_CHECK(type == PB_MEM_HOST || type == PB_MEM_CUDA, PB_ERR_UNSUPPORTED,
                 "ucx cannot register memory of type " + std::to_string(int(type)));
    PB_UCX_CHECK(ptr || size == 0, PB_ERR_INVALID,
                 "ucx register_memory: NULL pointer for " + std::to_string(size) + " bytes");
    std::lock_guard<std::mutex> lock(c.workerMutex());
    return c.regions().add(c, ptr, size, type);
  }

  static void packRkey(Context&, Region& region, void* buf, size_t* len) { ucx::packRkey(region, buf, len); }

  static void deregisterMemory(Context& c, Region* region) {
    std::lock_guard<std::mutex> lock(c.workerMutex());
    c.regions().remove(c, region);
  }

  static void finalize(Context* c) {
    // Connections use the worker: destroying it under them would crash.
    PB_UCX_CHECK(c->connections() == 0, PB_ERR_INVALID,
                 "ucx finalize: " + std::to_string(c->connections()) + " connection(s) still open; free them first");
    size_t left = 0;
    {
      std::lock_guard<std::mutex> lock(c->workerMutex());
      left = c->regions().size();
    }
    if (left) c->log(PB_LOG_WARN, "finalize with " + std::to_string(left) + " region(s) still registered");
    delete c;
  }

  static RemoteKey* importRkey(Connection& conn, const void* buf, size_t len) { return conn.importRkey(buf, len); }

  static void releaseRkey(Connection* conn, RemoteKey* key) {
    PB_UCX_CHECK(conn, PB_ERR_INVALID, "ucx release_rkey: conn must not be NULL");
    PB_UCX_CHECK(key, PB_ERR_INVALID, "ucx release_rkey: rkey must not be NULL");
    conn->releaseRkey(key);
  }
};

}  // namespace plugboard::ucx

PLUGBOARD_DEFINE_TRANSPORT(plugboard::ucx::Traits);
