// The exported entry symbol and the C function table of the ethernet
// transport. Every entry converts exceptions into a pb_status and keeps the
// reason for last_error().
#include <plugboard/transport.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>

#include "connection.hpp"
#include "context.hpp"
#include "error.hpp"
#include "memory.hpp"

#ifndef PLUGBOARD_ETHERNET_VERSION
#define PLUGBOARD_ETHERNET_VERSION "0.0.0"
#endif

namespace plugboard::ethernet {
namespace {

/// Guards gInitError.
std::mutex gInitErrorMu;
/// Reason of the last failure with no context (init), for last_error(NULL).
std::string gInitError;

/// The Context behind a pb_plugin_ctx handle.
Context* ctxOf(pb_plugin_ctx* ctx) { return reinterpret_cast<Context*>(ctx); }
/// The Connection behind a pb_conn handle.
Connection* connOf(pb_conn* conn) { return reinterpret_cast<Connection*>(conn); }

/// Records reason where last_error(ctx) will find it.
void recordError(Context* ctx, const std::string& reason) {
  if (ctx) {
    ctx->setError(reason);
    return;
  }
  std::lock_guard<std::mutex> lock(gInitErrorMu);
  gInitError = reason;
}

/// Runs body, turning every exception into a status and a recorded reason.
template <typename Body>
pb_status guarded(Context* ctx, const char* op, Body&& body) noexcept {
  try {
    return body();
  } catch (const Error& e) {
    recordError(ctx, e.what());
    return e.status();
  } catch (const net::NetError& e) {
    recordError(ctx, std::string("ethernet ") + op + ": " + e.what());
    switch (e.kind()) {
      case net::NetErrorKind::Timeout: return PB_ERR_TIMEOUT;
      case net::NetErrorKind::Closed: return PB_ERR_REMOTE;
      case net::NetErrorKind::Invalid: return PB_ERR_INVALID;
      default: return PB_ERR_SYSTEM;
    }
  } catch (const std::bad_alloc&) {
    recordError(ctx, std::string("ethernet ") + op + ": out of memory");
    return PB_ERR_NOMEM;
  } catch (const std::exception& e) {
    recordError(ctx, std::string("ethernet ") + op + ": internal error: " + e.what());
    return PB_ERR_INTERNAL;
  } catch (...) {
    recordError(ctx, std::string("ethernet ") + op + ": unknown internal error");
    return PB_ERR_INTERNAL;
  }
}

/// Throws Error(PB_ERR_INVALID) naming op when p is NULL.
template <typename T>
T* need(T* p, const char* op, const char* what) {
  ETH_CHECK(p, PB_ERR_INVALID, std::string("ethernet ") + op + ": " + what + " must not be NULL");
  return p;
}

// ---- context-level entries -------------------------------------------------

/// pb_transport_v1::init (contract in transport.h).
pb_status ethInit(const pb_host_services_v1* host, pb_plugin_ctx** ctx) {
  return guarded(nullptr, "init", [&] {
    *need(ctx, "init", "ctx") = nullptr;
    auto context = std::make_unique<Context>(host);
    *ctx = reinterpret_cast<pb_plugin_ctx*>(context.release());
    return PB_OK;
  });
}

/// pb_transport_v1::properties (contract in transport.h).
pb_status ethProperties(pb_plugin_ctx* ctx, pb_transport_properties_v1* props) {
  return guarded(ctxOf(ctx), "properties", [&] {
    need(props, "properties", "props");
    using P = pb_transport_properties_v1;
    if (PB_HAS_FIELD(props, P, mem_types)) props->mem_types = PB_MEM_HOST;
    if (PB_HAS_FIELD(props, P, flags))
      props->flags = PB_CAP_ONE_SIDED_WRITE | PB_CAP_ATOMIC_SIGNAL | PB_CAP_NEEDS_PROXY | PB_CAP_SIGNAL_NOTIFY;
    if (PB_HAS_FIELD(props, P, bandwidth_gbps)) props->bandwidth_gbps = 1.25;  // 10 GbE-class link
    if (PB_HAS_FIELD(props, P, latency_us)) props->latency_us = 25.0;         // kernel TCP round trip / 2
    if (PB_HAS_FIELD(props, P, max_address_size)) props->max_address_size = wire::AddressBlob::kSize;
    if (PB_HAS_FIELD(props, P, max_rkey_size)) props->max_rkey_size = wire::PackedRkey::kSize;
    return PB_OK;
  });
}

/// Copies text into reason (NUL-terminated, truncated to reason_len).
void writeReason(const std::string& text, char* reason, size_t reasonLen) {
  if (!reason || reasonLen == 0) return;
  size_t n = std::min(text.size(), reasonLen - 1);
  text.copy(reason, n);
  reason[n] = '\0';
}

/// pb_transport_v1::can_connect (contract in transport.h).
pb_status ethCanConnect(pb_plugin_ctx* ctx, const pb_peer_info_v1* peer, int* cost, char* reason,
                        size_t reasonLen) {
  Context* c = ctxOf(ctx);
  return guarded(c, "can_connect", [&] {
    need(c, "can_connect", "ctx");
    need(cost, "can_connect", "cost");
    PeerInfo info = PeerInfo::from(peer);
    std::string why;
    bool ok = c->route(info, c->settings(), &why).has_value();
    *cost = ok ? kConnectCost : -1;
    writeReason(why, reason, reasonLen);
    return PB_OK;
  });
}

/// pb_transport_v1::setup (contract in transport.h).
pb_status ethSetup(pb_plugin_ctx* ctx, const pb_peer_info_v1* peer, pb_conn** conn, void* addr,
                   size_t* addrLen) {
  Context* c = ctxOf(ctx);
  return guarded(c, "setup", [&] {
    need(c, "setup", "ctx");
    *need(conn, "setup", "conn") = nullptr;
    auto connection = std::make_unique<Connection>(*c, PeerInfo::from(peer), addr, addrLen);
    *conn = reinterpret_cast<pb_conn*>(connection.release());
    return PB_OK;
  });
}

/// pb_transport_v1::register_memory (contract in transport.h).
pb_status ethRegisterMemory(pb_plugin_ctx* ctx, void* ptr, size_t size, pb_mem_type type, pb_mr** mr) {
  Context* c = ctxOf(ctx);
  return guarded(c, "register_memory", [&] {
    need(c, "register_memory", "ctx");
    *need(mr, "register_memory", "mr") = nullptr;
    ETH_CHECK(type != PB_MEM_CUDA, PB_ERR_UNSUPPORTED,
              "ethernet cannot register CUDA memory (GPU buffers are staged by the core)");
    ETH_CHECK(type == PB_MEM_HOST, PB_ERR_UNSUPPORTED,
              "ethernet cannot register memory of type " + std::to_string(int(type)) + " (host memory only)");
    ETH_CHECK(ptr || size == 0, PB_ERR_INVALID,
              "ethernet register_memory: NULL pointer for " + std::to_string(size) + " bytes");
    *mr = reinterpret_cast<pb_mr*>(c->regions().add(c, ptr, size));
    return PB_OK;
  });
}

/// pb_transport_v1::pack_rkey (contract in transport.h).
pb_status ethPackRkey(pb_plugin_ctx* ctx, pb_mr* mr, void* buf, size_t* len) {
  Context* c = ctxOf(ctx);
  return guarded(c, "pack_rkey", [&] {
    packRkey(*need(reinterpret_cast<LocalRegion*>(mr), "pack_rkey", "mr"), buf, len);
    return PB_OK;
  });
}

/// pb_transport_v1::deregister_memory (contract in transport.h).
pb_status ethDeregisterMemory(pb_plugin_ctx* ctx, pb_mr* mr) {
  Context* c = ctxOf(ctx);
  return guarded(c, "deregister_memory", [&] {
    need(c, "deregister_memory", "ctx");
    c->regions().remove(need(reinterpret_cast<LocalRegion*>(mr), "deregister_memory", "mr"));
    return PB_OK;
  });
}

/// pb_transport_v1::finalize (contract in transport.h).
pb_status ethFinalize(pb_plugin_ctx* ctx) {
  Context* c = ctxOf(ctx);
  return guarded(c, "finalize", [&] {
    need(c, "finalize", "ctx");
    // Connection threads use the context: freeing it under them would crash.
    ETH_CHECK(c->connections() == 0, PB_ERR_INVALID,
              "ethernet finalize: " + std::to_string(c->connections()) + " connection(s) still open; free them first");
    if (size_t left = c->regions().size())
      c->log(PB_LOG_WARN, "finalize with " + std::to_string(left) + " region(s) still registered");
    delete c;
    return PB_OK;
  });
}

/// pb_transport_v1::last_error (contract in transport.h).
const char* ethLastError(pb_plugin_ctx* ctx) {
  // A per-thread copy stays valid while other threads record new errors.
  thread_local std::string copy;
  try {
    if (ctx) {
      copy = ctxOf(ctx)->lastError();
    } else {
      std::lock_guard<std::mutex> lock(gInitErrorMu);
      copy = gInitError;
    }
  } catch (...) {
    return "ethernet: could not copy the last error (out of memory)";
  }
  return copy.c_str();
}

// ---- connection-level entries ----------------------------------------------

/// The context errors on conn are recorded in (NULL for a NULL conn).
Context* ctxOfConn(pb_conn* conn) { return conn ? &connOf(conn)->context() : nullptr; }

/// pb_transport_v1::proxy_connect (contract in transport.h).
pb_status ethProxyConnect(pb_conn* conn, const void* peerAddr, size_t peerAddrLen) {
  return guarded(ctxOfConn(conn), "proxy_connect", [&] {
    return need(connOf(conn), "proxy_connect", "conn")->connect(peerAddr, peerAddrLen) ? PB_OK : PB_IN_PROGRESS;
  });
}

/// pb_transport_v1::import_rkey (contract in transport.h).
pb_status ethImportRkey(pb_conn* conn, const void* buf, size_t len, pb_rkey** rkey) {
  return guarded(ctxOfConn(conn), "import_rkey", [&] {
    need(conn, "import_rkey", "conn");
    *need(rkey, "import_rkey", "rkey") = nullptr;
    *rkey = reinterpret_cast<pb_rkey*>(new RemoteRegion(importRkey(buf, len)));
    return PB_OK;
  });
}

/// pb_transport_v1::release_rkey (contract in transport.h).
pb_status ethReleaseRkey(pb_conn* conn, pb_rkey* rkey) {
  return guarded(ctxOfConn(conn), "release_rkey", [&] {
    delete reinterpret_cast<RemoteRegion*>(rkey);
    return PB_OK;
  });
}

/// pb_transport_v1::write (contract in transport.h).
pb_status ethWrite(pb_conn* conn, pb_mr* src, size_t srcOffset, pb_rkey* dst, size_t dstOffset, size_t size) {
  return guarded(ctxOfConn(conn), "write", [&] {
    need(connOf(conn), "write", "conn")
        ->postWrite(*need(reinterpret_cast<LocalRegion*>(src), "write", "src"), srcOffset,
                    *need(reinterpret_cast<RemoteRegion*>(dst), "write", "dst"), dstOffset, size);
    return PB_OK;
  });
}

/// pb_transport_v1::write_signal (contract in transport.h).
pb_status ethWriteSignal(pb_conn* conn, pb_mr* src, size_t srcOffset, pb_rkey* dst, size_t dstOffset, size_t size,
                         pb_rkey* signalDst, size_t signalOffset, uint64_t value) {
  return guarded(ctxOfConn(conn), "write_signal", [&] {
    need(connOf(conn), "write_signal", "conn")
        ->postWriteSignal(*need(reinterpret_cast<LocalRegion*>(src), "write_signal", "src"), srcOffset,
                          *need(reinterpret_cast<RemoteRegion*>(dst), "write_signal", "dst"), dstOffset, size,
                          *need(reinterpret_cast<RemoteRegion*>(signalDst), "write_signal", "signal_dst"),
                          signalOffset, value);
    return PB_OK;
  });
}

/// pb_transport_v1::signal (contract in transport.h).
pb_status ethSignal(pb_conn* conn, pb_rkey* dst, size_t dstOffset, uint64_t value) {
  return guarded(ctxOfConn(conn), "signal", [&] {
    need(connOf(conn), "signal", "conn")
        ->postSignal(*need(reinterpret_cast<RemoteRegion*>(dst), "signal", "dst"), dstOffset, value);
    return PB_OK;
  });
}

/// pb_transport_v1::proxy_progress (contract in transport.h).
pb_status ethProxyProgress(pb_conn* conn, uint64_t* completed) {
  return guarded(ctxOfConn(conn), "proxy_progress", [&] {
    need(connOf(conn), "proxy_progress", "conn")->progress(need(completed, "proxy_progress", "completed"));
    return PB_OK;
  });
}

/// pb_transport_v1::flush (contract in transport.h).
pb_status ethFlush(pb_conn* conn) {
  return guarded(ctxOfConn(conn), "flush", [&] {
    need(connOf(conn), "flush", "conn")->flush();
    return PB_OK;
  });
}

/// pb_transport_v1::free (contract in transport.h).
pb_status ethFree(pb_conn* conn) {
  return guarded(ctxOfConn(conn), "free", [&] {
    delete connOf(conn);
    return PB_OK;
  });
}

/// The function table, filled field by field so its order cannot slip.
pb_transport_v1 makeTable() {
  pb_transport_v1 t{};
  t.struct_size = sizeof(pb_transport_v1);
  t.abi_major = PB_TRANSPORT_ABI_MAJOR;
  t.abi_minor = PB_TRANSPORT_ABI_MINOR;
  t.name = "ethernet";
  t.version = PLUGBOARD_ETHERNET_VERSION;
  t.init = ethInit;
  t.properties = ethProperties;
  t.can_connect = ethCanConnect;
  t.setup = ethSetup;
  t.proxy_connect = ethProxyConnect;
  t.register_memory = ethRegisterMemory;
  t.pack_rkey = ethPackRkey;
  t.import_rkey = ethImportRkey;
  t.release_rkey = ethReleaseRkey;
  t.deregister_memory = ethDeregisterMemory;
  t.write = ethWrite;
  t.signal = ethSignal;
  t.write_signal = ethWriteSignal;
  t.proxy_progress = ethProxyProgress;
  t.flush = ethFlush;
  t.free = ethFree;
  t.finalize = ethFinalize;
  t.last_error = ethLastError;
  return t;
}

}  // namespace
}  // namespace plugboard::ethernet

/// The plugin's only exported symbol: the ABI v1 table, or NULL when the
/// core speaks another major.
extern "C" PB_PLUGIN_EXPORT const pb_transport_v1* plugboard_transport_v1(uint32_t core_major,
                                                                          uint32_t core_minor) {
  (void)core_minor;  // Minors only grow structs; struct_size handles them.
  if (core_major != PB_TRANSPORT_ABI_MAJOR) return nullptr;
  static const pb_transport_v1 table = plugboard::ethernet::makeTable();
  return &table;
}

static_assert(std::is_same_v<decltype(&plugboard_transport_v1), pb_transport_entry_v1_fn>,
              "entry symbol does not match pb_transport_entry_v1_fn");
