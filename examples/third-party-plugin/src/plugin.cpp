// The exported entry symbol and the C function table of the shm transport.
// Every entry turns exceptions into a pb_status and keeps the reason for
// last_error(): no C++ exception may cross the ABI.
#include <plugboard/transport.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "connection.hpp"
#include "context.hpp"
#include "error.hpp"
#include "region.hpp"

#ifndef PLUGBOARD_SHM_VERSION
#define PLUGBOARD_SHM_VERSION "0.0.0"
#endif

namespace shm {
namespace {

/// Reason of the last failed init (no context yet), for last_error(NULL).
std::mutex gInitErrorMu;
std::string gInitError;

Context* ctxOf(pb_plugin_ctx* ctx) { return reinterpret_cast<Context*>(ctx); }
Connection* connOf(pb_conn* conn) { return reinterpret_cast<Connection*>(conn); }
Context* ctxOfConn(pb_conn* conn) { return conn ? &connOf(conn)->context() : nullptr; }

/// Stores reason where last_error(ctx) finds it.
void recordError(Context* ctx, const std::string& reason) {
  if (ctx) return ctx->setError(reason);
  std::lock_guard<std::mutex> lock(gInitErrorMu);
  gInitError = reason;
}

/// Runs body; every exception becomes a status plus a recorded reason.
template <typename Body>
pb_status guarded(Context* ctx, const char* op, Body&& body) noexcept {
  try {
    return body();
  } catch (const Error& e) {
    recordError(ctx, e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    recordError(ctx, std::string("shm ") + op + ": out of memory");
    return PB_ERR_NOMEM;
  } catch (const std::exception& e) {
    recordError(ctx, std::string("shm ") + op + ": internal error: " + e.what());
    return PB_ERR_INTERNAL;
  } catch (...) {
    recordError(ctx, std::string("shm ") + op + ": unknown internal error");
    return PB_ERR_INTERNAL;
  }
}

/// p, or Error(PB_ERR_INVALID) naming the NULL argument.
template <typename T>
T* need(T* p, const char* op, const char* what) {
  SHM_CHECK(p, PB_ERR_INVALID, std::string("shm ") + op + ": " + what + " must not be NULL");
  return p;
}

// ---- context-level entries (contracts in transport.h) ----------------------

pb_status shmInit(const pb_host_services_v1* host, pb_plugin_ctx** ctx) {
  return guarded(nullptr, "init", [&] {
    *need(ctx, "init", "ctx") = nullptr;
    *ctx = reinterpret_cast<pb_plugin_ctx*>(new Context(host));
    return PB_OK;
  });
}

pb_status shmProperties(pb_plugin_ctx* ctx, pb_transport_properties_v1* props) {
  return guarded(ctxOf(ctx), "properties", [&] {
    using P = pb_transport_properties_v1;
    need(props, "properties", "props");
    if (PB_HAS_FIELD(props, P, mem_types)) props->mem_types = PB_MEM_HOST;
    if (PB_HAS_FIELD(props, P, flags))
      props->flags = PB_CAP_ONE_SIDED_WRITE | PB_CAP_ATOMIC_SIGNAL | PB_CAP_NEEDS_PROXY | PB_CAP_SAME_HOST_ONLY |
                     PB_CAP_SIGNAL_NOTIFY;  // signal_landed for each signal applied and each completion
    if (PB_HAS_FIELD(props, P, bandwidth_gbps)) props->bandwidth_gbps = 5.0;  // two memcpys per byte
    if (PB_HAS_FIELD(props, P, latency_us)) props->latency_us = 1.0;
    if (PB_HAS_FIELD(props, P, max_address_size)) props->max_address_size = kAddressBytes;
    if (PB_HAS_FIELD(props, P, max_rkey_size)) props->max_rkey_size = kPackedKeyBytes;
    return PB_OK;
  });
}

/// Copies text into reason, truncated and NUL-terminated.
void writeReason(const std::string& text, char* reason, size_t len) {
  if (!reason || len == 0) return;
  size_t n = std::min(text.size(), len - 1);
  text.copy(reason, n);
  reason[n] = '\0';
}

pb_status shmCanConnect(pb_plugin_ctx* ctx, const pb_peer_info_v1* peer, int* cost, char* reason, size_t reasonLen) {
  return guarded(ctxOf(ctx), "can_connect", [&] {
    need(peer, "can_connect", "peer");
    need(cost, "can_connect", "cost");
    if (peer->same_host) {
      *cost = 10;  // cheaper than any network transport
      writeReason("", reason, reasonLen);
    } else {
      *cost = -1;
      writeReason("rank " + std::to_string(peer->peer_rank) + " is on host " +
                      (peer->peer_host ? peer->peer_host : "?") + " (shm connects ranks of one host only)",
                  reason, reasonLen);
    }
    return PB_OK;
  });
}

pb_status shmSetup(pb_plugin_ctx* ctx, const pb_peer_info_v1* peer, pb_conn** conn, void* addr, size_t* addrLen) {
  Context* c = ctxOf(ctx);
  return guarded(c, "setup", [&] {
    need(c, "setup", "ctx");
    *need(conn, "setup", "conn") = nullptr;
    *conn = reinterpret_cast<pb_conn*>(new Connection(*c, *need(peer, "setup", "peer"), addr, addrLen));
    return PB_OK;
  });
}

pb_status shmRegisterMemory(pb_plugin_ctx* ctx, void* ptr, size_t size, pb_mem_type type, pb_mr** mr) {
  Context* c = ctxOf(ctx);
  return guarded(c, "register_memory", [&] {
    need(c, "register_memory", "ctx");
    *need(mr, "register_memory", "mr") = nullptr;
    SHM_CHECK(type == PB_MEM_HOST, PB_ERR_UNSUPPORTED,
              "shm registers host memory only (memory type " + std::to_string(int(type)) + " refused)");
    SHM_CHECK(ptr || size == 0, PB_ERR_INVALID, "shm register_memory: NULL pointer for " + std::to_string(size) + " bytes");
    *mr = reinterpret_cast<pb_mr*>(c->regions().add(ptr, size));
    return PB_OK;
  });
}

pb_status shmPackRkey(pb_plugin_ctx* ctx, pb_mr* mr, void* buf, size_t* len) {
  return guarded(ctxOf(ctx), "pack_rkey", [&] {
    packKey(*need(reinterpret_cast<LocalRegion*>(mr), "pack_rkey", "mr"), buf, len);
    return PB_OK;
  });
}

pb_status shmDeregisterMemory(pb_plugin_ctx* ctx, pb_mr* mr) {
  Context* c = ctxOf(ctx);
  return guarded(c, "deregister_memory", [&] {
    need(c, "deregister_memory", "ctx")->regions().remove(reinterpret_cast<LocalRegion*>(mr));
    return PB_OK;
  });
}

pb_status shmFinalize(pb_plugin_ctx* ctx) {
  Context* c = ctxOf(ctx);
  return guarded(c, "finalize", [&] {
    need(c, "finalize", "ctx");
    // Receiver threads use the context: freeing it under them would crash.
    SHM_CHECK(c->connections.load() == 0, PB_ERR_INVALID,
              "shm finalize: " + std::to_string(c->connections.load()) + " connection(s) still open; free them first");
    if (size_t left = c->regions().count())
      c->log(PB_LOG_WARN, "finalize with " + std::to_string(left) + " region(s) still registered");
    delete c;
    return PB_OK;
  });
}

const char* shmLastError(pb_plugin_ctx* ctx) {
  thread_local std::string copy;  // stays valid while other threads record errors
  try {
    if (ctx) {
      copy = ctxOf(ctx)->lastError();
    } else {
      std::lock_guard<std::mutex> lock(gInitErrorMu);
      copy = gInitError;
    }
  } catch (...) {
    return "shm: could not copy the last error (out of memory)";
  }
  return copy.c_str();
}

// ---- connection-level entries ----------------------------------------------

pb_status shmProxyConnect(pb_conn* conn, const void* addr, size_t len) {
  return guarded(ctxOfConn(conn), "proxy_connect", [&] {
    return need(connOf(conn), "proxy_connect", "conn")->connect(addr, len) ? PB_OK : PB_IN_PROGRESS;
  });
}

pb_status shmImportRkey(pb_conn* conn, const void* buf, size_t len, pb_rkey** rkey) {
  return guarded(ctxOfConn(conn), "import_rkey", [&] {
    need(conn, "import_rkey", "conn");
    *need(rkey, "import_rkey", "rkey") = nullptr;
    *rkey = reinterpret_cast<pb_rkey*>(new RemoteKey(importKey(buf, len)));
    return PB_OK;
  });
}

pb_status shmReleaseRkey(pb_conn* conn, pb_rkey* rkey) {
  return guarded(ctxOfConn(conn), "release_rkey", [&] {
    delete reinterpret_cast<RemoteKey*>(rkey);
    return PB_OK;
  });
}

pb_status shmWrite(pb_conn* conn, pb_mr* src, size_t srcOffset, pb_rkey* dst, size_t dstOffset, size_t size) {
  return guarded(ctxOfConn(conn), "write", [&] {
    need(connOf(conn), "write", "conn")
        ->postWrite(*need(reinterpret_cast<LocalRegion*>(src), "write", "src"), srcOffset,
                    *need(reinterpret_cast<RemoteKey*>(dst), "write", "dst"), dstOffset, size);
    return PB_OK;
  });
}

pb_status shmSignal(pb_conn* conn, pb_rkey* dst, size_t offset, uint64_t value) {
  return guarded(ctxOfConn(conn), "signal", [&] {
    need(connOf(conn), "signal", "conn")->postSignal(*need(reinterpret_cast<RemoteKey*>(dst), "signal", "dst"), offset, value);
    return PB_OK;
  });
}

pb_status shmProxyProgress(pb_conn* conn, uint64_t* completed) {
  return guarded(ctxOfConn(conn), "proxy_progress", [&] {
    *need(completed, "proxy_progress", "completed") = need(connOf(conn), "proxy_progress", "conn")->progress();
    return PB_OK;
  });
}

pb_status shmFlush(pb_conn* conn) {
  return guarded(ctxOfConn(conn), "flush", [&] {
    need(connOf(conn), "flush", "conn")->progress();  // pushes whatever fits now
    return PB_OK;
  });
}

pb_status shmFree(pb_conn* conn) {
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
  t.name = "shm";
  t.version = PLUGBOARD_SHM_VERSION;
  t.init = shmInit;
  t.properties = shmProperties;
  t.can_connect = shmCanConnect;
  t.setup = shmSetup;
  t.proxy_connect = shmProxyConnect;
  t.register_memory = shmRegisterMemory;
  t.pack_rkey = shmPackRkey;
  t.import_rkey = shmImportRkey;
  t.release_rkey = shmReleaseRkey;
  t.deregister_memory = shmDeregisterMemory;
  t.write = shmWrite;
  t.signal = shmSignal;
  t.proxy_progress = shmProxyProgress;
  t.flush = shmFlush;
  t.free = shmFree;
  t.finalize = shmFinalize;
  t.last_error = shmLastError;
  t.write_signal = nullptr;    // optional (minor 1): write() then signal() is just as ordered here
  t.remote_pointer = nullptr;  // optional (minor 2): a peer's heap is not mapped here (no PB_CAP_MAPPED)
  return t;
}

}  // namespace
}  // namespace shm

/// The plugin's only exported symbol: the ABI v1 table, or NULL for a core
/// that speaks another major.
extern "C" PB_PLUGIN_EXPORT const pb_transport_v1* plugboard_transport_v1(uint32_t core_major, uint32_t core_minor) {
  (void)core_minor;  // minors only grow structs; struct_size covers them
  if (core_major != PB_TRANSPORT_ABI_MAJOR) return nullptr;
  static const pb_transport_v1 table = shm::makeTable();
  return &table;
}
