// The exported entry symbol and the C function table of the libfabric
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
#include "wire.hpp"

#ifndef PLUGBOARD_LIBFABRIC_VERSION
#define PLUGBOARD_LIBFABRIC_VERSION "0.0.0"
#endif

namespace plugboard::libfabric {
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
  } catch (const std::bad_alloc&) {
    recordError(ctx, std::string("libfabric ") + op + ": out of memory");
    return PB_ERR_NOMEM;
  } catch (const std::exception& e) {
    recordError(ctx, std::string("libfabric ") + op + ": internal error: " + e.what());
    return PB_ERR_INTERNAL;
  } catch (...) {
    recordError(ctx, std::string("libfabric ") + op + ": unknown internal error");
    return PB_ERR_INTERNAL;
  }
}

/// Throws Error(PB_ERR_INVALID) naming op when p is NULL.
template <typename T>
T* need(T* p, const char* op, const char* what) {
  OFI_CHECK(p, PB_ERR_INVALID, std::string("libfabric ") + op + ": " + what + " must not be NULL");
  return p;
}

/// Prefixes the reason of every failure on conn with who it links, so
/// last_error names the ranks and hosts even for local argument errors.
template <typename Body>
pb_status onConnection(pb_conn* conn, const char* op, Body&& body) noexcept {
  Connection* c = connOf(conn);
  return guarded(c ? &c->context() : nullptr, op, [&] {
    need(c, op, "conn");
    return body(*c);
  });
}

// ---- context-level entries -------------------------------------------------

/// pb_transport_v1::init (contract in transport.h).
pb_status ofiInit(const pb_host_services_v1* host, pb_plugin_ctx** ctx) {
  return guarded(nullptr, "init", [&] {
    *need(ctx, "init", "ctx") = nullptr;
    auto context = std::make_unique<Context>(host);
    *ctx = reinterpret_cast<pb_plugin_ctx*>(context.release());
    return PB_OK;
  });
}

/// pb_transport_v1::properties (contract in transport.h).
pb_status ofiProperties(pb_plugin_ctx* ctx, pb_transport_properties_v1* props) {
  Context* c = ctxOf(ctx);
  return guarded(c, "properties", [&] {
    need(c, "properties", "ctx");
    need(props, "properties", "props");
    using P = pb_transport_properties_v1;
    if (PB_HAS_FIELD(props, P, mem_types)) props->mem_types = PB_MEM_HOST | (c->hmem() ? PB_MEM_CUDA : 0);
    if (PB_HAS_FIELD(props, P, flags))
      props->flags = PB_CAP_ONE_SIDED_WRITE | PB_CAP_ATOMIC_SIGNAL | PB_CAP_NEEDS_PROXY;
    if (PB_HAS_FIELD(props, P, bandwidth_gbps)) props->bandwidth_gbps = c->provider().bandwidthGbps();
    if (PB_HAS_FIELD(props, P, latency_us)) props->latency_us = c->provider().latencyUs();
    if (PB_HAS_FIELD(props, P, max_address_size))
      props->max_address_size = wire::AddressBlob::kHeaderSize + c->endpointName().size();
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
pb_status ofiCanConnect(pb_plugin_ctx* ctx, const pb_peer_info_v1* peer, int* cost, char* reason,
                        size_t reasonLen) {
  Context* c = ctxOf(ctx);
  return guarded(c, "can_connect", [&] {
    need(c, "can_connect", "ctx");
    need(cost, "can_connect", "cost");
    std::string why = c->whyUnreachable(PeerInfo::from(peer));
    *cost = why.empty() ? c->provider().cost() : -1;
    writeReason(why, reason, reasonLen);
    return PB_OK;
  });
}

/// pb_transport_v1::setup (contract in transport.h).
pb_status ofiSetup(pb_plugin_ctx* ctx, const pb_peer_info_v1* peer, pb_conn** conn, void* addr, size_t* addrLen) {
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
pb_status ofiRegisterMemory(pb_plugin_ctx* ctx, void* ptr, size_t size, pb_mem_type type, pb_mr** mr) {
  Context* c = ctxOf(ctx);
  return guarded(c, "register_memory", [&] {
    need(c, "register_memory", "ctx");
    *need(mr, "register_memory", "mr") = nullptr;
    std::lock_guard<std::mutex> lock(c->mutex());
    *mr = reinterpret_cast<pb_mr*>(c->registerMemory(ptr, size, type));
    return PB_OK;
  });
}

/// pb_transport_v1::pack_rkey (contract in transport.h).
pb_status ofiPackRkey(pb_plugin_ctx* ctx, pb_mr* mr, void* buf, size_t* len) {
  Context* c = ctxOf(ctx);
  return guarded(c, "pack_rkey", [&] {
    packRkey(*need(reinterpret_cast<LocalRegion*>(mr), "pack_rkey", "mr"), buf, len);
    return PB_OK;
  });
}

/// pb_transport_v1::deregister_memory (contract in transport.h).
pb_status ofiDeregisterMemory(pb_plugin_ctx* ctx, pb_mr* mr) {
  Context* c = ctxOf(ctx);
  return guarded(c, "deregister_memory", [&] {
    need(c, "deregister_memory", "ctx");
    std::lock_guard<std::mutex> lock(c->mutex());
    c->deregisterMemory(need(reinterpret_cast<LocalRegion*>(mr), "deregister_memory", "mr"));
    return PB_OK;
  });
}

/// pb_transport_v1::finalize (contract in transport.h).
pb_status ofiFinalize(pb_plugin_ctx* ctx) {
  Context* c = ctxOf(ctx);
  return guarded(c, "finalize", [&] {
    need(c, "finalize", "ctx");
    {
      std::lock_guard<std::mutex> lock(c->mutex());
      OFI_CHECK(c->connections() == 0, PB_ERR_INVALID,
                "libfabric finalize: " + std::to_string(c->connections()) +
                    " connection(s) still open; free them first");
      if (size_t left = c->regionCount())
        c->log(PB_LOG_WARN, "libfabric: finalize with " + std::to_string(left) + " region(s) still registered");
    }
    delete c;
    return PB_OK;
  });
}

/// pb_transport_v1::last_error (contract in transport.h).
const char* ofiLastError(pb_plugin_ctx* ctx) {
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
    return "libfabric: could not copy the last error (out of memory)";
  }
  return copy.c_str();
}

// ---- connection-level entries ----------------------------------------------

/// pb_transport_v1::proxy_connect (contract in transport.h).
pb_status ofiProxyConnect(pb_conn* conn, const void* peerAddr, size_t peerAddrLen) {
  return onConnection(conn, "proxy_connect",
                      [&](Connection& c) { return c.connect(peerAddr, peerAddrLen) ? PB_OK : PB_IN_PROGRESS; });
}

/// pb_transport_v1::import_rkey (contract in transport.h).
pb_status ofiImportRkey(pb_conn* conn, const void* buf, size_t len, pb_rkey** rkey) {
  return onConnection(conn, "import_rkey", [&](Connection&) {
    *need(rkey, "import_rkey", "rkey") = nullptr;
    *rkey = reinterpret_cast<pb_rkey*>(new RemoteRegion(importRkey(buf, len)));
    return PB_OK;
  });
}

/// pb_transport_v1::release_rkey (contract in transport.h).
pb_status ofiReleaseRkey(pb_conn* conn, pb_rkey* rkey) {
  return onConnection(conn, "release_rkey", [&](Connection&) {
    delete reinterpret_cast<RemoteRegion*>(rkey);
    return PB_OK;
  });
}

/// pb_transport_v1::write (contract in transport.h).
pb_status ofiWrite(pb_conn* conn, pb_mr* src, size_t srcOffset, pb_rkey* dst, size_t dstOffset, size_t size) {
  return onConnection(conn, "write", [&](Connection& c) {
    c.postWrite(*need(reinterpret_cast<LocalRegion*>(src), "write", "src"), srcOffset,
                *need(reinterpret_cast<RemoteRegion*>(dst), "write", "dst"), dstOffset, size);
    return PB_OK;
  });
}

/// pb_transport_v1::signal (contract in transport.h).
pb_status ofiSignal(pb_conn* conn, pb_rkey* dst, size_t dstOffset, uint64_t value) {
  return onConnection(conn, "signal", [&](Connection& c) {
    c.postSignal(*need(reinterpret_cast<RemoteRegion*>(dst), "signal", "dst"), dstOffset, value);
    return PB_OK;
  });
}

/// pb_transport_v1::proxy_progress (contract in transport.h).
pb_status ofiProxyProgress(pb_conn* conn, uint64_t* completed) {
  return onConnection(conn, "proxy_progress", [&](Connection& c) {
    c.progress(need(completed, "proxy_progress", "completed"));
    return PB_OK;
  });
}

/// pb_transport_v1::flush (contract in transport.h).
pb_status ofiFlush(pb_conn* conn) {
  return onConnection(conn, "flush", [&](Connection& c) {
    c.flush();
    return PB_OK;
  });
}

/// pb_transport_v1::free (contract in transport.h).
pb_status ofiFree(pb_conn* conn) {
  return onConnection(conn, "free", [&](Connection& c) {
    delete &c;
    return PB_OK;
  });
}

/// The function table, filled field by field so its order cannot slip.
pb_transport_v1 makeTable() {
  pb_transport_v1 t{};
  t.struct_size = sizeof(pb_transport_v1);
  t.abi_major = PB_TRANSPORT_ABI_MAJOR;
  t.abi_minor = PB_TRANSPORT_ABI_MINOR;
  t.name = "libfabric";
  t.version = PLUGBOARD_LIBFABRIC_VERSION;
  t.init = ofiInit;
  t.properties = ofiProperties;
  t.can_connect = ofiCanConnect;
  t.setup = ofiSetup;
  t.proxy_connect = ofiProxyConnect;
  t.register_memory = ofiRegisterMemory;
  t.pack_rkey = ofiPackRkey;
  t.import_rkey = ofiImportRkey;
  t.release_rkey = ofiReleaseRkey;
  t.deregister_memory = ofiDeregisterMemory;
  t.write = ofiWrite;
  t.signal = ofiSignal;
  t.proxy_progress = ofiProxyProgress;
  t.flush = ofiFlush;
  t.free = ofiFree;
  t.finalize = ofiFinalize;
  t.last_error = ofiLastError;
  // write_signal stays NULL: a signal must wait for its write's delivery
  // anyway, so there is nothing to fuse (see README.md).
  t.write_signal = nullptr;
  return t;
}

}  // namespace
}  // namespace plugboard::libfabric

/// The plugin's only exported symbol: the ABI v1 table, or NULL when the
/// core speaks another major.
extern "C" PB_PLUGIN_EXPORT const pb_transport_v1* plugboard_transport_v1(uint32_t core_major,
                                                                          uint32_t core_minor) {
  (void)core_minor;  // Minors only grow structs; struct_size handles them.
  if (core_major != PB_TRANSPORT_ABI_MAJOR) return nullptr;
  static const pb_transport_v1 table = plugboard::libfabric::makeTable();
  return &table;
}

static_assert(std::is_same_v<decltype(&plugboard_transport_v1), pb_transport_entry_v1_fn>,
              "entry symbol does not match pb_transport_entry_v1_fn");
