// The exported entry symbol and the C function table of the ucx transport.
// Every entry converts exceptions into a pb_status and keeps the reason for
// last_error().
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

#ifndef PLUGBOARD_UCX_VERSION
#define PLUGBOARD_UCX_VERSION "0.0.0"
#endif

namespace plugboard::ucx {
namespace {

/// Guards gInitError.
std::mutex gInitErrorMu;
/// Reason of the last failure with no context (init), for last_error(NULL).
std::string gInitError;

/// The Context behind a pb_plugin_ctx handle.
Context* ctxOf(pb_plugin_ctx* ctx) { return reinterpret_cast<Context*>(ctx); }
/// The Connection behind a pb_conn handle.
Connection* connOf(pb_conn* conn) { return reinterpret_cast<Connection*>(conn); }
/// The LocalRegion behind a pb_mr handle.
LocalRegion* mrOf(pb_mr* mr) { return reinterpret_cast<LocalRegion*>(mr); }
/// The RemoteKey behind a pb_rkey handle.
RemoteKey* rkeyOf(pb_rkey* rkey) { return reinterpret_cast<RemoteKey*>(rkey); }

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
    recordError(ctx, std::string("ucx ") + op + ": out of memory");
    return PB_ERR_NOMEM;
  } catch (const std::exception& e) {
    recordError(ctx, std::string("ucx ") + op + ": internal error: " + e.what());
    return PB_ERR_INTERNAL;
  } catch (...) {
    recordError(ctx, std::string("ucx ") + op + ": unknown internal error");
    return PB_ERR_INTERNAL;
  }
}

/// Throws Error(PB_ERR_INVALID) naming op when p is NULL.
template <typename T>
T* need(T* p, const char* op, const char* what) {
  PB_UCX_CHECK(p, PB_ERR_INVALID, std::string("ucx ") + op + ": " + what + " must not be NULL");
  return p;
}

/// Copies text into reason (NUL-terminated, truncated to reason_len).
void writeReason(const std::string& text, char* reason, size_t reasonLen) {
  if (!reason || reasonLen == 0) return;
  size_t n = std::min(text.size(), reasonLen - 1);
  text.copy(reason, n);
  reason[n] = '\0';
}

// ---- context-level entries -------------------------------------------------

/// pb_transport_v1::init (contract in transport.h).
pb_status ucxInit(const pb_host_services_v1* host, pb_plugin_ctx** ctx) {
  return guarded(nullptr, "init", [&] {
    *need(ctx, "init", "ctx") = nullptr;
    auto context = std::make_unique<Context>(host);
    *ctx = reinterpret_cast<pb_plugin_ctx*>(context.release());
    return PB_OK;
  });
}

/// pb_transport_v1::properties (contract in transport.h).
pb_status ucxProperties(pb_plugin_ctx* ctx, pb_transport_properties_v1* props) {
  Context* c = ctxOf(ctx);
  return guarded(c, "properties", [&] {
    need(c, "properties", "ctx");
    need(props, "properties", "props");
    using P = pb_transport_properties_v1;
    if (PB_HAS_FIELD(props, P, mem_types)) props->mem_types = uint32_t(PB_MEM_HOST) | (c->supportsCuda() ? uint32_t(PB_MEM_CUDA) : 0u);
    if (PB_HAS_FIELD(props, P, flags))
      props->flags = PB_CAP_ONE_SIDED_WRITE | PB_CAP_ATOMIC_SIGNAL | PB_CAP_NEEDS_PROXY;
    // Fixed estimates (README): UCX picks the transport, these do not follow it.
    if (PB_HAS_FIELD(props, P, bandwidth_gbps)) props->bandwidth_gbps = 12.5;  // a 100 Gb/s-class NIC
    if (PB_HAS_FIELD(props, P, latency_us)) props->latency_us = 3.0;
    if (PB_HAS_FIELD(props, P, max_address_size)) props->max_address_size = c->maxAddressSize();
    if (PB_HAS_FIELD(props, P, max_rkey_size)) props->max_rkey_size = c->maxRkeySize();
    return PB_OK;
  });
}

/// pb_transport_v1::can_connect (contract in transport.h).
pb_status ucxCanConnect(pb_plugin_ctx* ctx, const pb_peer_info_v1* peer, int* cost, char* reason,
                        size_t reasonLen) {
  Context* c = ctxOf(ctx);
  return guarded(c, "can_connect", [&] {
    need(c, "can_connect", "ctx");
    need(cost, "can_connect", "cost");
    std::string why = c->unreachableReason(PeerInfo::from(peer));
    *cost = why.empty() ? c->connectCost() : -1;
    writeReason(why, reason, reasonLen);
    return PB_OK;
  });
}

/// pb_transport_v1::setup (contract in transport.h).
pb_status ucxSetup(pb_plugin_ctx* ctx, const pb_peer_info_v1* peer, pb_conn** conn, void* addr,
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
pb_status ucxRegisterMemory(pb_plugin_ctx* ctx, void* ptr, size_t size, pb_mem_type type, pb_mr** mr) {
  Context* c = ctxOf(ctx);
  return guarded(c, "register_memory", [&] {
    need(c, "register_memory", "ctx");
    *need(mr, "register_memory", "mr") = nullptr;
    PB_UCX_CHECK(type != PB_MEM_CUDA || c->supportsCuda(), PB_ERR_UNSUPPORTED,
                 std::string("ucx cannot register CUDA memory: this UCX (") + ucp_get_version_string() +
                     ") reports no CUDA memory support (memory types: " + c->memoryTypesText() +
                     "); GPU buffers are staged by the core");
    PB_UCX_CHECK(type == PB_MEM_HOST || type == PB_MEM_CUDA, PB_ERR_UNSUPPORTED,
                 "ucx cannot register memory of type " + std::to_string(int(type)));
    PB_UCX_CHECK(ptr || size == 0, PB_ERR_INVALID,
                 "ucx register_memory: NULL pointer for " + std::to_string(size) + " bytes");
    std::lock_guard<std::mutex> lock(c->workerMutex());
    *mr = reinterpret_cast<pb_mr*>(c->regions().add(*c, ptr, size, type));
    return PB_OK;
  });
}

/// pb_transport_v1::pack_rkey (contract in transport.h).
pb_status ucxPackRkey(pb_plugin_ctx* ctx, pb_mr* mr, void* buf, size_t* len) {
  Context* c = ctxOf(ctx);
  return guarded(c, "pack_rkey", [&] {
    packRkey(*need(mrOf(mr), "pack_rkey", "mr"), buf, len);
    return PB_OK;
  });
}

/// pb_transport_v1::deregister_memory (contract in transport.h).
pb_status ucxDeregisterMemory(pb_plugin_ctx* ctx, pb_mr* mr) {
  Context* c = ctxOf(ctx);
  return guarded(c, "deregister_memory", [&] {
    need(c, "deregister_memory", "ctx");
    std::lock_guard<std::mutex> lock(c->workerMutex());
    c->regions().remove(*c, need(mrOf(mr), "deregister_memory", "mr"));
    return PB_OK;
  });
}

/// pb_transport_v1::finalize (contract in transport.h).
pb_status ucxFinalize(pb_plugin_ctx* ctx) {
  Context* c = ctxOf(ctx);
  return guarded(c, "finalize", [&] {
    need(c, "finalize", "ctx");
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
    return PB_OK;
  });
}

/// pb_transport_v1::last_error (contract in transport.h).
const char* ucxLastError(pb_plugin_ctx* ctx) {
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
    return "ucx: could not copy the last error (out of memory)";
  }
  return copy.c_str();
}

// ---- connection-level entries ----------------------------------------------

/// The context errors on conn are recorded in (NULL for a NULL conn).
Context* ctxOfConn(pb_conn* conn) { return conn ? &connOf(conn)->context() : nullptr; }

/// pb_transport_v1::proxy_connect (contract in transport.h).
pb_status ucxProxyConnect(pb_conn* conn, const void* peerAddr, size_t peerAddrLen) {
  return guarded(ctxOfConn(conn), "proxy_connect", [&] {
    return need(connOf(conn), "proxy_connect", "conn")->connect(peerAddr, peerAddrLen) ? PB_OK : PB_IN_PROGRESS;
  });
}

/// pb_transport_v1::import_rkey (contract in transport.h).
pb_status ucxImportRkey(pb_conn* conn, const void* buf, size_t len, pb_rkey** rkey) {
  return guarded(ctxOfConn(conn), "import_rkey", [&] {
    Connection* c = need(connOf(conn), "import_rkey", "conn");
    *need(rkey, "import_rkey", "rkey") = nullptr;
    *rkey = reinterpret_cast<pb_rkey*>(c->importRkey(buf, len));
    return PB_OK;
  });
}

/// pb_transport_v1::release_rkey (contract in transport.h).
pb_status ucxReleaseRkey(pb_conn* conn, pb_rkey* rkey) {
  return guarded(ctxOfConn(conn), "release_rkey", [&] {
    need(connOf(conn), "release_rkey", "conn")->releaseRkey(need(rkeyOf(rkey), "release_rkey", "rkey"));
    return PB_OK;
  });
}

/// pb_transport_v1::write (contract in transport.h).
pb_status ucxWrite(pb_conn* conn, pb_mr* src, size_t srcOffset, pb_rkey* dst, size_t dstOffset, size_t size) {
  return guarded(ctxOfConn(conn), "write", [&] {
    need(connOf(conn), "write", "conn")
        ->postWrite(*need(mrOf(src), "write", "src"), srcOffset, *need(rkeyOf(dst), "write", "dst"), dstOffset, size);
    return PB_OK;
  });
}

/// pb_transport_v1::signal (contract in transport.h).
pb_status ucxSignal(pb_conn* conn, pb_rkey* dst, size_t dstOffset, uint64_t value) {
  return guarded(ctxOfConn(conn), "signal", [&] {
    need(connOf(conn), "signal", "conn")->postSignal(*need(rkeyOf(dst), "signal", "dst"), dstOffset, value);
    return PB_OK;
  });
}

/// pb_transport_v1::write_signal (contract in transport.h).
pb_status ucxWriteSignal(pb_conn* conn, pb_mr* src, size_t srcOffset, pb_rkey* dst, size_t dstOffset, size_t size,
                         pb_rkey* signalDst, size_t signalOffset, uint64_t value) {
  return guarded(ctxOfConn(conn), "write_signal", [&] {
    need(connOf(conn), "write_signal", "conn")
        ->postWriteSignal(*need(mrOf(src), "write_signal", "src"), srcOffset,
                          *need(rkeyOf(dst), "write_signal", "dst"), dstOffset, size,
                          *need(rkeyOf(signalDst), "write_signal", "signal_dst"), signalOffset, value);
    return PB_OK;
  });
}

/// pb_transport_v1::proxy_progress (contract in transport.h).
pb_status ucxProxyProgress(pb_conn* conn, uint64_t* completed) {
  return guarded(ctxOfConn(conn), "proxy_progress", [&] {
    need(connOf(conn), "proxy_progress", "conn")->progress(need(completed, "proxy_progress", "completed"));
    return PB_OK;
  });
}

/// pb_transport_v1::flush (contract in transport.h).
pb_status ucxFlush(pb_conn* conn) {
  return guarded(ctxOfConn(conn), "flush", [&] {
    need(connOf(conn), "flush", "conn")->flush();
    return PB_OK;
  });
}

/// pb_transport_v1::free (contract in transport.h).
pb_status ucxFree(pb_conn* conn) {
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
  t.name = "ucx";
  t.version = PLUGBOARD_UCX_VERSION;
  t.init = ucxInit;
  t.properties = ucxProperties;
  t.can_connect = ucxCanConnect;
  t.setup = ucxSetup;
  t.proxy_connect = ucxProxyConnect;
  t.register_memory = ucxRegisterMemory;
  t.pack_rkey = ucxPackRkey;
  t.import_rkey = ucxImportRkey;
  t.release_rkey = ucxReleaseRkey;
  t.deregister_memory = ucxDeregisterMemory;
  t.write = ucxWrite;
  t.signal = ucxSignal;
  t.proxy_progress = ucxProxyProgress;
  t.flush = ucxFlush;
  t.free = ucxFree;
  t.finalize = ucxFinalize;
  t.last_error = ucxLastError;
  t.write_signal = ucxWriteSignal;
  return t;
}

}  // namespace
}  // namespace plugboard::ucx

/// The plugin's only exported symbol: the ABI v1 table, or NULL when the
/// core speaks another major.
extern "C" PB_PLUGIN_EXPORT const pb_transport_v1* plugboard_transport_v1(uint32_t core_major,
                                                                          uint32_t core_minor) {
  (void)core_minor;  // Minors only grow structs; struct_size handles them.
  if (core_major != PB_TRANSPORT_ABI_MAJOR) return nullptr;
  static const pb_transport_v1 table = plugboard::ucx::makeTable();
  return &table;
}

static_assert(std::is_same_v<decltype(&plugboard_transport_v1), pb_transport_entry_v1_fn>,
              "entry symbol does not match pb_transport_entry_v1_fn");
