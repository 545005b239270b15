// The cudaipc transport's decisions at the ABI: its properties, cost and
// memory types, and which object each entry goes to. The C glue (guards,
// NULL checks, last_error, the table and the entry symbol) is
// plugboard/transport_cxx.hpp's. Loading the plugin touches no CUDA.
#include <plugboard/transport_cxx.hpp>

#include <memory>
#include <string>

#include "connection.hpp"
#include "context.hpp"
#include "error.hpp"
#include "memory.hpp"
#include "wire.hpp"

#ifndef PLUGBOARD_CUDAIPC_VERSION
#define PLUGBOARD_CUDAIPC_VERSION "0.0.0"
#endif

namespace plugboard::cudaipc {

/// The cudaipc transport for plugboard::transport_cxx::Adapter. connect,
/// write, write_signal, signal, progress, flush and free go to the
/// Connection's methods of those names (the adapter's defaults).
struct Traits {
  using Context = cudaipc::Context;
  using Connection = cudaipc::Connection;
  using Region = LocalRegion;
  using RemoteKey = RemoteRegion;
  static constexpr const char* kName = "cudaipc";
  static constexpr const char* kVersion = PLUGBOARD_CUDAIPC_VERSION;

  static Context* init(const pb_host_services_v1* host) { return new Context(host); }

  static void properties(Context&, pb_transport_properties_v1& props) {
    using P = pb_transport_properties_v1;
    if (PB_HAS_FIELD(&props, P, mem_types)) props.mem_types = PB_MEM_CUDA;
    if (PB_HAS_FIELD(&props, P, flags))
      props.flags = PB_CAP_ONE_SIDED_WRITE | PB_CAP_ATOMIC_SIGNAL | PB_CAP_NEEDS_PROXY | PB_CAP_SAME_HOST_ONLY |
                    PB_CAP_MAPPED;
    // NVLink 4 moves ~450 GB/s per direction; PCIe 5 x16 ~50. One copy
    // engine stream reaches a good share of the former on H100/H200.
    if (PB_HAS_FIELD(&props, P, bandwidth_gbps)) props.bandwidth_gbps = 150.0;
    if (PB_HAS_FIELD(&props, P, latency_us)) props.latency_us = 3.0;  // async copy + event, launch-bound
    if (PB_HAS_FIELD(&props, P, max_address_size)) props.max_address_size = wire::AddressBlob::kSize;
    if (PB_HAS_FIELD(&props, P, max_rkey_size)) props.max_rkey_size = wire::PackedRkey::kSize;
  }

  static int canConnect(Context& c, const pb_peer_info_v1* peer, std::string* why) {
    const PeerInfo info = PeerInfo::from(peer);
    if (info.sameHost) return kConnectCost;
    *why = "different host: rank " + std::to_string(info.rank) + " is on " + info.host + ", this is " + c.hostname() +
           " (CUDA IPC works within one machine)";
    return -1;
  }

  static Connection* setup(Context& c, const pb_peer_info_v1* peer, void* addr, size_t* addrLen) {
    return std::make_unique<Connection>(c, PeerInfo::from(peer), addr, addrLen).release();
  }

  static Region* registerMemory(Context& c, void* ptr, size_t size, pb_mem_type type) {
    IPC_CHECK(type != PB_MEM_HOST, PB_ERR_UNSUPPORTED,
              "cudaipc cannot register host memory: cudaipc moves GPU memory only (PB_MEM_CUDA)");
    IPC_CHECK(type == PB_MEM_CUDA, PB_ERR_UNSUPPORTED,
              "cudaipc cannot register memory of type " + std::to_string(int(type)) + " (PB_MEM_CUDA only)");
    return c.exports().add(c, ptr, size);
  }

  static void packRkey(Context& c, Region& region, void* buf, size_t* len) {
    IPC_CHECK(c.exports().contains(&region), PB_ERR_INVALID,
              "cudaipc pack_rkey: not a region registered with this context");
    cudaipc::packRkey(c, region, buf, len);
  }

  static void deregisterMemory(Context& c, Region* region) { c.exports().remove(region); }

  static void finalize(Context* c) {
    // Connections hold the context's device and import cache.
    IPC_CHECK(c->connections() == 0, PB_ERR_INVALID,
              "cudaipc finalize: " + std::to_string(c->connections()) + " connection(s) still open; free them first");
    if (size_t left = c->exports().size())
      c->log(PB_LOG_WARN, "finalize with " + std::to_string(left) + " region(s) still registered");
    delete c;
  }

  static RemoteKey* importRkey(Connection& conn, const void* buf, size_t len) { return conn.importKey(buf, len); }

  static void releaseRkey(Connection* conn, RemoteKey* key) {
    IPC_CHECK(conn, PB_ERR_INVALID, "cudaipc release_rkey: conn must not be NULL");
    conn->releaseKey(key);
  }

  static void* remotePointer(Connection& conn, RemoteKey* key) { return conn.remotePointer(key); }
};

}  // namespace plugboard::cudaipc

PLUGBOARD_DEFINE_TRANSPORT(plugboard::cudaipc::Traits);
