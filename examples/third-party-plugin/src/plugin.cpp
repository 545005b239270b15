// The shm transport's decisions at the ABI: its properties, cost and
// memory types, and which object each entry goes to. The C glue (guards
// that turn exceptions into a pb_status, NULL checks, last_error, the table
// and the exported entry symbol) comes from plugboard/transport_cxx.hpp,
// Plugboard's header-only adapter: no C++ type crosses the ABI.
#include <plugboard/transport_cxx.hpp>

#include <string>

#include "connection.hpp"
#include "context.hpp"
#include "error.hpp"
#include "region.hpp"

#ifndef PLUGBOARD_SHM_VERSION
#define PLUGBOARD_SHM_VERSION "0.0.0"
#endif

namespace shm {

/// The shm transport for plugboard::transport_cxx::Adapter.
struct Traits {
  using Context = shm::Context;
  using Connection = shm::Connection;
  using Region = LocalRegion;
  using RemoteKey = shm::RemoteKey;
  static constexpr const char* kName = "shm";
  static constexpr const char* kVersion = PLUGBOARD_SHM_VERSION;

  // ---- context-level entries (contracts in transport.h) --------------------

  static Context* init(const pb_host_services_v1* host) { return new Context(host); }

  // Optional (ABI 1.5): what plugboard-info prints under the transport.
  static std::string describe(Context& c) {
    return "POSIX shared memory (/dev/shm) between processes of one host\nreceiving rings of " +
           std::to_string(c.settings().ringBytes) + " bytes, receivers poll " + std::to_string(c.settings().spinUs) +
           " us before sleeping";
  }

  static void properties(Context&, pb_transport_properties_v1& props) {
    using P = pb_transport_properties_v1;
    if (PB_HAS_FIELD(&props, P, mem_types)) props.mem_types = PB_MEM_HOST;
    if (PB_HAS_FIELD(&props, P, flags))
      props.flags = PB_CAP_ONE_SIDED_WRITE | PB_CAP_ATOMIC_SIGNAL | PB_CAP_NEEDS_PROXY | PB_CAP_SAME_HOST_ONLY |
                    PB_CAP_SIGNAL_NOTIFY;  // signal_landed for each signal applied and each completion
    if (PB_HAS_FIELD(&props, P, bandwidth_gbps)) props.bandwidth_gbps = 5.0;  // two memcpys per byte
    if (PB_HAS_FIELD(&props, P, latency_us)) props.latency_us = 1.0;
    if (PB_HAS_FIELD(&props, P, max_address_size)) props.max_address_size = kAddressBytes;
    if (PB_HAS_FIELD(&props, P, max_rkey_size)) props.max_rkey_size = kPackedKeyBytes;
  }

  static int canConnect(Context&, const pb_peer_info_v1* peer, std::string* why) {
    if (peer->same_host) return 10;  // cheaper than any network transport
    *why = "rank " + std::to_string(peer->peer_rank) + " is on host " + (peer->peer_host ? peer->peer_host : "?") +
           " (shm connects ranks of one host only)";
    return -1;
  }

  static Connection* setup(Context& c, const pb_peer_info_v1* peer, void* addr, size_t* addrLen) {
    return new Connection(c, *peer, addr, addrLen);
  }

  static Region* registerMemory(Context& c, void* ptr, size_t size, pb_mem_type type) {
    SHM_CHECK(type == PB_MEM_HOST, PB_ERR_UNSUPPORTED,
              "shm registers host memory only (memory type " + std::to_string(int(type)) + " refused)");
    SHM_CHECK(ptr || size == 0, PB_ERR_INVALID, "shm register_memory: NULL pointer for " + std::to_string(size) + " bytes");
    return c.regions().add(ptr, size);
  }

  static void packRkey(Context&, Region& region, void* buf, size_t* len) { packKey(region, buf, len); }

  static void deregisterMemory(Context& c, Region* region) { c.regions().remove(region); }

  static void finalize(Context* c) {
    // Receiver threads use the context: freeing it under them would crash.
    SHM_CHECK(c->connections.load() == 0, PB_ERR_INVALID,
              "shm finalize: " + std::to_string(c->connections.load()) + " connection(s) still open; free them first");
    if (size_t left = c->regions().count())
      c->log(PB_LOG_WARN, "finalize with " + std::to_string(left) + " region(s) still registered");
    delete c;
  }

  // ---- connection-level entries --------------------------------------------
  // connect, write and signal go straight to Connection::connect, postWrite
  // and postSignal (the adapter's defaults), freeConnection and releaseRkey
  // to delete. Connection has no postWriteSignal: write() then signal() is
  // just as ordered here, so the table's optional write_signal stays NULL
  // (and remote_pointer too: a peer's heap is not mapped here).

  static RemoteKey* importRkey(Connection&, const void* buf, size_t len) { return new RemoteKey(importKey(buf, len)); }
  static void progress(Connection& conn, uint64_t* completed) { *completed = conn.progress(); }
  static void flush(Connection& conn) { conn.progress(); }  // pushes whatever fits now
};

}  // namespace shm

PLUGBOARD_DEFINE_TRANSPORT(shm::Traits);
