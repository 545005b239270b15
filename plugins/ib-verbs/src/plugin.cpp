// The ib-verbs transport's decisions at the ABI: its properties, cost and
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
#include "wire.hpp"

#ifndef PLUGBOARD_IB_VERBS_VERSION
#define PLUGBOARD_IB_VERBS_VERSION "0.0.0"
#endif

namespace plugboard::ibverbs {

/// Cost for can_connect: below libfabric's RDMA providers (50) and the
/// ethernet plugin (100); a same-host peer a little higher (the HCA loops
/// it back; a mapping transport such as cudaipc should win there).
constexpr int kRemoteCost = 40;
constexpr int kSameHostCost = 70;

/// The ib-verbs transport for plugboard::transport_cxx::Adapter. connect,
/// write, signal, write_signal, progress and flush go to the Connection's
/// methods of those names, release_rkey and free delete (the adapter's
/// defaults; both take a NULL connection).
struct Traits {
  using Context = ibverbs::Context;
  using Connection = ibverbs::Connection;
  using Region = LocalRegion;
  using RemoteKey = RemoteRegion;
  static constexpr const char* kName = "ib-verbs";
  static constexpr const char* kVersion = PLUGBOARD_IB_VERBS_VERSION;

  static Context* init(const pb_host_services_v1* host) { return new Context(host); }
  static std::string describe(Context& c) { return c.describe(); }

  static void properties(Context& c, pb_transport_properties_v1& props) {
    using P = pb_transport_properties_v1;
    if (PB_HAS_FIELD(&props, P, mem_types)) props.mem_types = PB_MEM_HOST | (c.cudaMemory() ? PB_MEM_CUDA : 0);
    if (PB_HAS_FIELD(&props, P, flags)) props.flags = PB_CAP_ONE_SIDED_WRITE | PB_CAP_ATOMIC_SIGNAL | PB_CAP_NEEDS_PROXY;
    if (PB_HAS_FIELD(&props, P, bandwidth_gbps)) props.bandwidth_gbps = c.port().gbps > 0 ? c.port().gbps / 8 : 12.5;
    if (PB_HAS_FIELD(&props, P, latency_us)) props.latency_us = 2;
    if (PB_HAS_FIELD(&props, P, max_address_size))
      props.max_address_size = wire::AddressBlob::kHeaderSize + 8 * static_cast<size_t>(c.settings().qpsPerConnection);
    if (PB_HAS_FIELD(&props, P, max_rkey_size)) props.max_rkey_size = wire::PackedKey::kSize;
  }

  static int canConnect(Context&, const pb_peer_info_v1* peer, std::string*) {
    return PeerInfo::from(peer).sameHost ? kSameHostCost : kRemoteCost;
  }

  static Connection* setup(Context& c, const pb_peer_info_v1* peer, void* addr, size_t* addrLen) {
    return std::make_unique<Connection>(c, PeerInfo::from(peer), addr, addrLen).release();
  }

  static Region* registerMemory(Context& c, void* ptr, size_t size, pb_mem_type type) {
    return c.registerMemory(ptr, size, type);
  }

  static void packRkey(Context&, Region& region, void* buf, size_t* len) { ibverbs::packRkey(region, buf, len); }

  static void deregisterMemory(Context& c, Region* region) { c.deregisterMemory(region); }

  static void finalize(Context* c) {
    IBV_CHECK(c->connections() == 0, PB_ERR_INVALID,
              "ib-verbs finalize: " + std::to_string(c->connections()) + " connection(s) still open; free them first");
    if (size_t left = c->regionCount())
      c->log(PB_LOG_WARN, "ib-verbs: finalize with " + std::to_string(left) + " region(s) still registered");
    delete c;
  }

  static RemoteKey* importRkey(Connection& conn, const void* buf, size_t len) {
    return new RemoteRegion{wire::PackedKey::decode(static_cast<const uint8_t*>(buf), len, conn.peer().describe())};
  }

};

}  // namespace plugboard::ibverbs

PLUGBOARD_DEFINE_TRANSPORT(plugboard::ibverbs::Traits);
