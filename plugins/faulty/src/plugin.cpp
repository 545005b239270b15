// The faulty transport's decisions at the ABI: everything goes to the
// wrapped transport, with the plan's fault applied to registrations,
// connections and operations (connection.cpp). The C glue is
// plugboard/transport_cxx.hpp's.
#include <plugboard/transport_cxx.hpp>

#include <memory>
#include <string>

#include "connection.hpp"
#include "context.hpp"
#include "error.hpp"

#ifndef PLUGBOARD_FAULTY_VERSION
#define PLUGBOARD_FAULTY_VERSION "0.0.0"
#endif

namespace plugboard::faulty {

/// The faulty transport for plugboard::transport_cxx::Adapter.
struct Traits {
  using Context = faulty::Context;
  using Connection = faulty::Connection;
  using Region = faulty::Region;
  using RemoteKey = faulty::RemoteKey;
  static constexpr const char* kName = "faulty";
  static constexpr const char* kVersion = PLUGBOARD_FAULTY_VERSION;

  static Context* init(const pb_host_services_v1* host) { return new Context(host); }
  static std::string describe(Context& c) { return c.report(); }

  /// The inner transport's, except: never mapped (loads and stores through a
  /// mapping pass no code of ours to fault, so the core must use write and
  /// signal), and no completion wake-ups while operations are held here
  /// (delay, reorder), which complete only when polled.
  static void properties(Context& c, pb_transport_properties_v1& props) {
    InnerTransport& in = c.inner();
    in.check(in.api().properties(in.ctx(), &props), "properties");
    if (PB_HAS_FIELD(&props, pb_transport_properties_v1, max_rkey_size)) props.max_rkey_size += kRkeyHeaderBytes;
    if (PB_HAS_FIELD(&props, pb_transport_properties_v1, flags))
      props.flags &= ~static_cast<uint32_t>(PB_CAP_MAPPED);
    const Fault f = c.plan().fault;
    if (c.injects() && (f == Fault::Delay || f == Fault::Reorder) && PB_HAS_FIELD(&props, pb_transport_properties_v1, flags))
      props.flags &= ~static_cast<uint32_t>(PB_CAP_SIGNAL_NOTIFY);
  }

  static int canConnect(Context& c, const pb_peer_info_v1* peer, std::string* why) {
    InnerTransport& in = c.inner();
    int cost = -1;
    char reason[256] = {0};
    in.check(in.api().can_connect(in.ctx(), peer, &cost, reason, sizeof(reason)), "can_connect");
    if (cost < 0) *why = in.name() + ": " + reason;
    return cost;
  }

  static Connection* setup(Context& c, const pb_peer_info_v1* peer, void* addr, size_t* addrLen) {
    return std::make_unique<Connection>(c, peer, addr, addrLen).release();
  }

  static Region* registerMemory(Context& c, void* ptr, size_t size, pb_mem_type type) {
    if (c.plan().fault == Fault::FailRegister)
      if (const uint64_t n = c.strike())
        throw Error(PB_ERR_SYSTEM, c.describe("register_memory of " + std::to_string(size) + " bytes", n));
    auto region = std::make_unique<Region>();
    region->ptr = ptr;
    region->size = size;
    region->type = type;
    InnerTransport& in = c.inner();
    in.check(in.api().register_memory(in.ctx(), ptr, size, type, &region->inner), "register_memory");
    return region.release();
  }

  /// The region's size (u64 LE), then the inner transport's key. Too small
  /// a buffer (or none) gets the inner transport's answer plus the header.
  static void packRkey(Context& c, Region& region, void* buf, size_t* len) {
    FAULTY_CHECK(len, PB_ERR_INVALID, "faulty pack_rkey: len must not be NULL");
    auto* bytes = static_cast<uint8_t*>(buf);
    const bool room = bytes && *len >= kRkeyHeaderBytes;
    uint8_t probe[1] = {0};  // lets the inner transport say what it needs
    size_t innerLen = room ? *len - kRkeyHeaderBytes : 0;
    InnerTransport& in = c.inner();
    const pb_status st = in.api().pack_rkey(in.ctx(), region.inner, room ? bytes + kRkeyHeaderBytes : probe, &innerLen);
    *len = innerLen + kRkeyHeaderBytes;  // on PB_ERR_INVALID: what it takes
    in.check(st, "pack_rkey");
    FAULTY_CHECK(room, PB_ERR_INVALID, "faulty pack_rkey: needs " + std::to_string(*len) + " bytes");
    transport_cxx::storeLE<uint64_t>(bytes, region.size);
  }

  static void deregisterMemory(Context& c, Region* region) {
    std::unique_ptr<Region> owned(region);
    InnerTransport& in = c.inner();
    in.check(in.api().deregister_memory(in.ctx(), region->inner), "deregister_memory");
  }

  static void finalize(Context* c) {
    FAULTY_CHECK(c->connections() == 0, PB_ERR_INVALID,
                 "faulty finalize: " + std::to_string(c->connections()) + " connection(s) still open; free them first");
    delete c;
  }

  static RemoteKey* importRkey(Connection& conn, const void* buf, size_t len) {
    FAULTY_CHECK(buf && len > kRkeyHeaderBytes, PB_ERR_INVALID,
                 "faulty import_rkey: a packed key of " + std::to_string(len) + " bytes is too short");
    auto key = std::make_unique<RemoteKey>();
    const auto* bytes = static_cast<const uint8_t*>(buf);
    key->size = transport_cxx::loadLE<uint64_t>(bytes);
    InnerTransport& in = conn.context().inner();
    in.check(in.api().import_rkey(conn.inner(), bytes + kRkeyHeaderBytes, len - kRkeyHeaderBytes, &key->inner),
             "import_rkey");
    return key.release();
  }

  static void releaseRkey(Connection* conn, RemoteKey* key) {
    std::unique_ptr<RemoteKey> owned(key);
    FAULTY_CHECK(conn && key, PB_ERR_INVALID, "faulty release_rkey: conn and rkey must not be NULL");
    InnerTransport& in = conn->context().inner();
    in.check(in.api().release_rkey(conn->inner(), key->inner), "release_rkey");
  }
};

}  // namespace plugboard::faulty

PLUGBOARD_DEFINE_TRANSPORT(plugboard::faulty::Traits);
