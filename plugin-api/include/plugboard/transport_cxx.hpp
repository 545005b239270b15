/* SPDX-License-Identifier: Apache-2.0 */
/// @file transport_cxx.hpp
/// Optional, header-only C++17 adapter for writing a Plugboard transport.
///
/// A plugin written against transport.h alone repeats the same glue in
/// every entry: handle casts, a guard that turns exceptions into a
/// pb_status, NULL checks with a named error, last_error bookkeeping, the
/// reason copy of can_connect, and the table itself. Here that glue is
/// written once. A plugin supplies a traits class and writes
///
///     PLUGBOARD_DEFINE_TRANSPORT(my::Traits)
///
/// in one source file; that defines the exported `plugboard_transport_v1`
/// entry symbol returning a table whose every entry is guarded. Everything
/// here is compiled into the plugin: no C++ type crosses `dlopen`, and the
/// ABI stays pure C (a plain-C plugin still needs only transport.h).
///
/// The traits class `T` provides (all static):
///
///   Types
///     T::Context     - one per init(); has `void setError(const std::string&)`
///                      and `std::string lastError() const` (thread-safe).
///     T::Connection  - one per setup(); has `T::Context& context()`.
///     T::Region      - a registered local region (pb_mr).
///     T::RemoteKey   - an imported remote key (pb_rkey).
///   Names
///     static constexpr const char* kName;     // "ethernet": table name and message prefix
///     static constexpr const char* kVersion;  // the plugin's version text
///   Context entries
///     Context* init(const pb_host_services_v1* host);            // new'd; the adapter owns it
///     void properties(Context&, pb_transport_properties_v1&);    // honour PB_HAS_FIELD
///     int canConnect(Context&, const pb_peer_info_v1*, std::string* why);  // cost, or -1 with *why
///     Connection* setup(Context&, const pb_peer_info_v1*, void* addr, size_t* addrLen);
///     Region* registerMemory(Context&, void* ptr, size_t size, pb_mem_type type);
///     void packRkey(Context&, Region&, void* buf, size_t* len);
///     void deregisterMemory(Context&, Region*);
///     void finalize(Context*);                                   // checks, then deletes
///   Connection entries: each optional; without it the adapter calls the
///   connection's method of the conventional name (the shape in brackets)
///     bool connect(Connection&, const void* peerAddr, size_t len);  [conn.connect(addr, len)] true once connected
///     RemoteKey* importRkey(Connection&, const void* buf, size_t len);  (required)
///     void releaseRkey(Connection*, RemoteKey*);                 [delete key] conn may be NULL
///     void write(Connection&, Region& src, size_t srcOffset, RemoteKey& dst, size_t dstOffset, size_t size);
///                                                                [conn.postWrite(src, srcOffset, dst, dstOffset, size)]
///     void signal(Connection&, RemoteKey& dst, size_t dstOffset, uint64_t value);
///                                                                [conn.postSignal(dst, dstOffset, value)]
///     void progress(Connection&, uint64_t* completed);           [conn.progress(completed)]
///     void flush(Connection&);                                   [conn.flush()]
///     void freeConnection(Connection*);                          [delete conn] NULL allowed
///     void writeSignal(Connection&, Region&, size_t, RemoteKey&, size_t, size_t,
///                      RemoteKey& signalDst, size_t signalOffset, uint64_t value);
///                    [conn.postWriteSignal(...)] - with neither, the table's
///                    write_signal is NULL (the core then posts write and signal).
///   Other optional members
///     void* remotePointer(Connection&, RemoteKey*);  // rkey may be NULL: say why
///                    - present: the table's remote_pointer uses it (transports
///                      with PB_CAP_MAPPED); absent: NULL.
///     pb_status translate(const std::exception& e, const char* op, std::string* message);
///                    - maps the plugin's own exception types: return a status
///                      and set *message, or PB_OK for "not one of mine".
///     std::string describe(Context&);
///                    - minor 5: what the context found and chose, one item
///                      a line, for plugboard-info; absent: NULL.
///   Group (switch) entries, minor 4: all three or none, with T::Group the
///   pb_group type (transports with PB_CAP_GROUP; absent: the table's
///   group_can_create, group_create and group_destroy are NULL)
///     int groupCanCreate(Context&, const pb_group_desc_v1*, std::string* why);  // cost, or -1 with *why
///     Group* groupCreate(Context&, const pb_group_desc_v1*, pb_group_view_v1& view);  // collective
///     void groupDestroy(Context&, Group*);
///
/// Helpers for the context, all optional: ErrorSlot (setError/lastError
/// for the context class to derive from), HostServices (the core's
/// pb_host_services_v1 checked at init: settings, logging, wake-ups) and
/// PeerInfo (pb_peer_info_v1 copied and checked).
///
/// Exceptions: throw plugboard::transport_cxx::Failure (or any class derived
/// from it) for an error with a status; its what() is the whole message
/// last_error() returns. std::bad_alloc becomes PB_ERR_NOMEM "<name> <op>:
/// out of memory", any other exception PB_ERR_INTERNAL "<name> <op>:
/// internal error: <what>". A NULL handle or out-parameter is PB_ERR_INVALID
/// "<name> <op>: <argument> must not be NULL" before the traits are called.
/// last_error(ctx) returns ctx's last reason; last_error(NULL) the calling
/// thread's last failed init.
#ifndef PLUGBOARD_TRANSPORT_CXX_HPP
#define PLUGBOARD_TRANSPORT_CXX_HPP

#include <plugboard/transport.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace plugboard::transport_cxx {

/// Stores v at p as little-endian, whatever the host byte order: for the
/// fixed layouts a plugin puts in address blobs, packed keys and messages.
template <typename T>
inline void storeLE(uint8_t* p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
}

/// Loads a little-endian T from p (the inverse of storeLE).
template <typename T>
inline T loadLE(const uint8_t* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return static_cast<T>(v);
}

/// An error with the status an entry returns; what() is the whole reason.
class Failure : public std::runtime_error {
 public:
  /// status: what the entry returns (not PB_OK); message: last_error's text.
  Failure(pb_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  /// The status the entry returns.
  pb_status status() const noexcept { return status_; }

 private:
  pb_status status_;
};

/// The text last_error(ctx) returns, set and read from any thread. A
/// context class may derive from it to meet the adapter's setError() /
/// lastError() requirement.
class ErrorSlot {
 public:
  /// Records message as the context's last error.
  void setError(const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    text_ = message;
  }
  /// The last recorded error ("" when none).
  std::string lastError() const {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }

 private:
  mutable std::mutex mu_;
  std::string text_;
};

/// The far end of a connection, copied out of pb_peer_info_v1.
struct PeerInfo {
  int rank = -1;          ///< Peer's rank.
  std::string host;       ///< Peer's host identity as the core knows it.
  bool sameHost = false;  ///< The core says: same host as this process.
  int localRanks = 0;     ///< Ranks of the communicator on this host; 0: unknown (a core older than ABI 1.4).

  /// Copies *peer; Failure(PB_ERR_INVALID) on NULL or a struct too short.
  static PeerInfo from(const pb_peer_info_v1* peer) {
    if (!peer) throw Failure(PB_ERR_INVALID, "peer info must not be NULL");
    if (!PB_HAS_FIELD(peer, pb_peer_info_v1, same_host))
      throw Failure(PB_ERR_INVALID, "pb_peer_info_v1 of " + std::to_string(peer->struct_size) + " bytes is too short");
    PeerInfo info;
    info.rank = peer->peer_rank;
    info.host = peer->peer_host ? peer->peer_host : "?";
    info.sameHost = peer->same_host != 0;
    if (PB_HAS_FIELD(peer, pb_peer_info_v1, local_ranks)) info.localRanks = peer->local_ranks;
    return info;
  }
  /// "rank N (host H)", for messages.
  std::string describe() const { return "rank " + std::to_string(rank) + " (host " + host + ")"; }
};

/// The core's host services (pb_host_services_v1), checked at init and kept
/// by a context: settings, logging, wake-ups. Errors are Failures whose
/// text starts with the plugin's name.
class HostServices {
 public:
  /// Checks and copies the table: PB_ERR_INVALID when it is NULL or too
  /// short, PB_ERR_VERSION for another ABI major. An older core's shorter
  /// table is copied as far as it goes; PB_HAS_FIELD then tells the rest.
  HostServices(const pb_host_services_v1* host, const char* pluginName) : name_(pluginName) {
    if (!host) throw Failure(PB_ERR_INVALID, name_ + ": init needs the host services table");
    if (host->abi_major != PB_TRANSPORT_ABI_MAJOR)
      throw Failure(PB_ERR_VERSION, name_ + ": the core speaks transport ABI " + std::to_string(host->abi_major) +
                                        "." + std::to_string(host->abi_minor) + ", this plugin speaks " +
                                        std::to_string(PB_TRANSPORT_ABI_MAJOR) + "." +
                                        std::to_string(PB_TRANSPORT_ABI_MINOR));
    if (!PB_HAS_FIELD(host, pb_host_services_v1, hostname))
      throw Failure(PB_ERR_INVALID,
                    name_ + ": pb_host_services_v1 of " + std::to_string(host->struct_size) + " bytes is too short");
    std::memcpy(&table_, host, std::min(sizeof(table_), size_t(host->struct_size)));
    hostname_ = host->hostname ? host->hostname : "?";
  }

  /// This process's rank and the job's size, as the core gave them.
  int rank() const { return table_.rank; }
  int nranks() const { return table_.nranks; }
  /// The host name the core uses for this process ("?" when it gave none).
  const std::string& hostname() const { return hostname_; }

  /// Declares count settings (a core without declare_setting takes none).
  void declare(const pb_setting_decl_v1* decls, size_t count) const {
    if (!table_.declare_setting) return;
    for (size_t i = 0; i < count; ++i) {
      const std::string what = name_ + ": declaring setting '" + decls[i].key + "'";
      const pb_status st = call(what, [&] { return table_.declare_setting(table_.core, &decls[i]); });
      if (st != PB_OK) throw Failure(st, what + ": the core refused it (status " + std::to_string(st) + ")");
    }
  }

  /// The value of a declared setting as text ("" when the core has no get_setting).
  std::string setting(const char* key) const {
    if (!table_.get_setting) return "";
    std::string buf(256, '\0');
    for (int attempt = 0; attempt < 3; ++attempt) {
      size_t needed = 0;
      const pb_status st = call(name_ + ": reading setting '" + key + "'", [&] {
        return table_.get_setting(table_.core, key, &buf[0], buf.size(), &needed);
      });
      if (st == PB_OK) return std::string(buf.c_str());
      if (st != PB_ERR_NOMEM || needed <= buf.size())
        throw Failure(st, name_ + ": cannot read setting '" + key + "' from the core");
      buf.assign(needed, '\0');
    }
    throw Failure(PB_ERR_INTERNAL, name_ + ": setting '" + key + "' keeps growing while read");
  }

  /// Logs through the core (nothing when it has no log service).
  void log(pb_log_level level, const std::string& message) const {
    if (table_.log) table_.log(table_.core, level, message.c_str());
  }

  /// True when the core loads this plugin only for `transports: auto`
  /// (loaded_by_auto, minor >= 6): it may decline where it would not be chosen.
  bool loadedByAuto() const {
    return PB_HAS_FIELD(&table_, pb_host_services_v1, loaded_by_auto) && table_.loaded_by_auto != 0;
  }

  /// True when the core takes signal_landed wake-ups (minor >= 1).
  bool takesWakeUps() const {
    return PB_HAS_FIELD(&table_, pb_host_services_v1, signal_landed) && table_.signal_landed != nullptr;
  }
  /// Wakes the core's waiters: a signal landed or an operation completed.
  void signalLanded() const {
    if (takesWakeUps()) table_.signal_landed(table_.core);
  }

  /// True when the core can export the calling thread's CUDA device memory
  /// as dma-bufs (cuda_dmabuf_fd, minor >= 3, answers its probe with PB_OK).
  bool exportsCudaDmabuf() const {
    if (!PB_HAS_FIELD(&table_, pb_host_services_v1, cuda_dmabuf_fd) || !table_.cuda_dmabuf_fd) return false;
    int fd = -1;
    uint64_t offset = 0;
    return call(name_ + ": asking the core about dma-buf export",
                [&] { return table_.cuda_dmabuf_fd(table_.core, nullptr, 0, &fd, &offset); }) == PB_OK;
  }
  /// A dma-buf fd (the caller's to close) covering CUDA memory [ptr, ptr +
  /// size) and ptr's offset in it; Failure with the core's status otherwise.
  int cudaDmabufFd(void* ptr, size_t size, uint64_t* offset) const {
    if (!PB_HAS_FIELD(&table_, pb_host_services_v1, cuda_dmabuf_fd) || !table_.cuda_dmabuf_fd)
      throw Failure(PB_ERR_UNSUPPORTED, name_ + ": the core (ABI 1." + std::to_string(table_.abi_minor) +
                                            ") cannot export CUDA memory as dma-bufs");
    int fd = -1;
    const pb_status st = call(name_ + ": exporting CUDA memory as a dma-buf",
                              [&] { return table_.cuda_dmabuf_fd(table_.core, ptr, size, &fd, offset); });
    if (st != PB_OK || fd < 0)
      throw Failure(st != PB_OK ? st : PB_ERR_INTERNAL,
                    name_ + ": the core could not export " + std::to_string(size) +
                        " bytes of CUDA memory as a dma-buf (status " + std::to_string(st) + ")");
    return fd;
  }

  /// The calling thread's CUDA device's PCI bus id as sysfs names it
  /// ("0000:3b:00.0"), or "" when the core cannot say (no CUDA, no device,
  /// a core before minor 5).
  std::string cudaPciBusId() const {
    if (!PB_HAS_FIELD(&table_, pb_host_services_v1, cuda_pci_bus_id) || !table_.cuda_pci_bus_id) return "";
    char id[PB_PCI_BUS_ID_LEN] = {0};
    const pb_status st = call(name_ + ": asking the core for the GPU's PCI bus id",
                              [&] { return table_.cuda_pci_bus_id(table_.core, id, sizeof id); });
    return st == PB_OK ? std::string(id) : std::string();
  }

 private:
  /// Calls a host service. The ABI is C, but should the host let a C++
  /// exception out (e.g. a badly typed env value), report it as the user
  /// error it is rather than as an internal one.
  template <typename Call>
  static pb_status call(const std::string& what, Call&& fn) {
    try {
      return fn();
    } catch (const std::exception& e) {
      throw Failure(PB_ERR_INVALID, what + ": " + e.what());
    }
  }

  pb_host_services_v1 table_{};
  std::string name_, hostname_;
};

namespace detail {

/// HasName<T>::value: T declares a static member `name` (an optional traits entry).
#define PLUGBOARD_TRANSPORT_CXX_DETECT(Trait, member)                           \
  template <typename T, typename = void>                                       \
  struct Trait : std::false_type {};                                           \
  template <typename T>                                                        \
  struct Trait<T, std::void_t<decltype(&T::member)>> : std::true_type {}
PLUGBOARD_TRANSPORT_CXX_DETECT(HasWriteSignal, writeSignal);
PLUGBOARD_TRANSPORT_CXX_DETECT(HasRemotePointer, remotePointer);
PLUGBOARD_TRANSPORT_CXX_DETECT(HasTranslate, translate);
PLUGBOARD_TRANSPORT_CXX_DETECT(HasConnect, connect);
PLUGBOARD_TRANSPORT_CXX_DETECT(HasWrite, write);
PLUGBOARD_TRANSPORT_CXX_DETECT(HasSignal, signal);
PLUGBOARD_TRANSPORT_CXX_DETECT(HasProgress, progress);
PLUGBOARD_TRANSPORT_CXX_DETECT(HasFlush, flush);
PLUGBOARD_TRANSPORT_CXX_DETECT(HasReleaseRkey, releaseRkey);
PLUGBOARD_TRANSPORT_CXX_DETECT(HasFreeConnection, freeConnection);
PLUGBOARD_TRANSPORT_CXX_DETECT(HasGroupCanCreate, groupCanCreate);
PLUGBOARD_TRANSPORT_CXX_DETECT(HasGroupCreate, groupCreate);
PLUGBOARD_TRANSPORT_CXX_DETECT(HasGroupDestroy, groupDestroy);
PLUGBOARD_TRANSPORT_CXX_DETECT(HasDescribe, describe);
#undef PLUGBOARD_TRANSPORT_CXX_DETECT

/// The connection class has postWriteSignal (the default writeSignal).
template <typename C, typename R, typename K, typename = void>
struct ConnPostsWriteSignal : std::false_type {};
template <typename C, typename R, typename K>
struct ConnPostsWriteSignal<C, R, K,
                            std::void_t<decltype(std::declval<C&>().postWriteSignal(
                                std::declval<R&>(), size_t(), std::declval<K&>(), size_t(), size_t(),
                                std::declval<K&>(), size_t(), uint64_t()))>> : std::true_type {};

}  // namespace detail

/// The guarded C entries and the table for traits T (see the file comment).
template <typename T>
class Adapter {
 public:
  using Context = typename T::Context;
  using Connection = typename T::Connection;
  using Region = typename T::Region;
  using RemoteKey = typename T::RemoteKey;
  /// write_signal is in the table: the traits or the connection class have it.
  static constexpr bool kWritesSignal =
      detail::HasWriteSignal<T>::value || detail::ConnPostsWriteSignal<Connection, Region, RemoteKey>::value;
  /// The group entries are in the table: the traits define all three.
  static constexpr bool kMakesGroups =
      detail::HasGroupCanCreate<T>::value && detail::HasGroupCreate<T>::value && detail::HasGroupDestroy<T>::value;
  static_assert(kMakesGroups || (!detail::HasGroupCanCreate<T>::value && !detail::HasGroupCreate<T>::value &&
                                 !detail::HasGroupDestroy<T>::value),
                "a transport defines groupCanCreate, groupCreate and groupDestroy together, or none of them");

  /// The table, filled field by field so its order cannot slip.
  static pb_transport_v1 table() {
    pb_transport_v1 t{};
    t.struct_size = sizeof(pb_transport_v1);
    t.abi_major = PB_TRANSPORT_ABI_MAJOR;
    t.abi_minor = PB_TRANSPORT_ABI_MINOR;
    t.name = T::kName;
    t.version = T::kVersion;
    t.init = init;
    t.properties = properties;
    t.can_connect = canConnect;
    t.setup = setup;
    t.proxy_connect = proxyConnect;
    t.register_memory = registerMemory;
    t.pack_rkey = packRkey;
    t.import_rkey = importRkey;
    t.release_rkey = releaseRkey;
    t.deregister_memory = deregisterMemory;
    t.write = write;
    t.signal = signal;
    if constexpr (kWritesSignal) t.write_signal = writeSignal;
    t.proxy_progress = proxyProgress;
    t.flush = flush;
    t.free = freeConn;
    t.finalize = finalize;
    t.last_error = lastError;
    if constexpr (detail::HasRemotePointer<T>::value) t.remote_pointer = remotePointer;
    if constexpr (kMakesGroups) {
      t.group_can_create = groupCanCreate;
      t.group_create = groupCreate;
      t.group_destroy = groupDestroy;
    }
    if constexpr (detail::HasDescribe<T>::value) t.describe = describe;
    return t;
  }

  /// Runs body; every exception becomes a status and a reason recorded for
  /// last_error (on ctx, or the calling thread's init reason when ctx is NULL).
  template <typename Body>
  static pb_status guarded(Context* ctx, const char* op, Body&& body) noexcept {
    try {
      return body();
    } catch (const Failure& e) {
      return fail(ctx, e.status(), e.what());
    } catch (const std::bad_alloc&) {
      return fail(ctx, PB_ERR_NOMEM, prefix(op) + "out of memory");
    } catch (const std::exception& e) {
      return translated(ctx, op, e);
    } catch (...) {
      return fail(ctx, PB_ERR_INTERNAL, prefix(op) + "unknown internal error");
    }
  }

  /// p, or Failure(PB_ERR_INVALID, "<name> <op>: <what> must not be NULL").
  template <typename P>
  static P* need(P* p, const char* op, const char* what) {
    if (!p) throw Failure(PB_ERR_INVALID, prefix(op) + what + " must not be NULL");
    return p;
  }

 private:
  static std::string prefix(const char* op) { return std::string(T::kName) + " " + op + ": "; }

  /// The calling thread's reason of its last failed init.
  static std::string& initError() {
    thread_local std::string reason;
    return reason;
  }

  static pb_status fail(Context* ctx, pb_status status, const std::string& reason) noexcept {
    try {
      if (ctx) ctx->setError(reason);
      else initError() = reason;
    } catch (...) {  // out of memory while recording: the status still tells
    }
    return status;
  }

  static pb_status translated(Context* ctx, const char* op, const std::exception& e) noexcept {
    try {
      if constexpr (detail::HasTranslate<T>::value) {
        std::string message;
        const pb_status st = T::translate(e, op, &message);
        if (st != PB_OK) return fail(ctx, st, message);
      }
      return fail(ctx, PB_ERR_INTERNAL, prefix(op) + "internal error: " + e.what());
    } catch (...) {
      return fail(ctx, PB_ERR_INTERNAL, std::string(T::kName) + ": unknown internal error");
    }
  }

  static Context* ctxOf(pb_plugin_ctx* ctx) { return reinterpret_cast<Context*>(ctx); }
  static Connection* connOf(pb_conn* conn) { return reinterpret_cast<Connection*>(conn); }
  static Region* regionOf(pb_mr* mr) { return reinterpret_cast<Region*>(mr); }
  static RemoteKey* keyOf(pb_rkey* rkey) { return reinterpret_cast<RemoteKey*>(rkey); }
  /// The context errors on conn are recorded in (NULL for a NULL conn).
  static Context* ctxOfConn(pb_conn* conn) { return conn ? &connOf(conn)->context() : nullptr; }
  /// T::Group, named only inside the group entries (traits without groups have none).
  template <typename U = T>
  static typename U::Group* groupOf(pb_group* group) {
    return reinterpret_cast<typename U::Group*>(group);
  }

  /// Copies text into reason (NUL-terminated, truncated to reasonLen).
  static void writeReason(const std::string& text, char* reason, size_t reasonLen) {
    if (!reason || reasonLen == 0) return;
    const size_t n = std::min(text.size(), reasonLen - 1);
    text.copy(reason, n);
    reason[n] = '\0';
  }

  // ---- context-level entries ----------------------------------------------

  static pb_status init(const pb_host_services_v1* host, pb_plugin_ctx** ctx) {
    return guarded(nullptr, "init", [&] {
      *need(ctx, "init", "ctx") = nullptr;
      *ctx = reinterpret_cast<pb_plugin_ctx*>(T::init(host));
      return PB_OK;
    });
  }

  static pb_status properties(pb_plugin_ctx* ctx, pb_transport_properties_v1* props) {
    Context* c = ctxOf(ctx);
    return guarded(c, "properties", [&] {
      need(c, "properties", "ctx");
      T::properties(*c, *need(props, "properties", "props"));
      return PB_OK;
    });
  }

  static pb_status canConnect(pb_plugin_ctx* ctx, const pb_peer_info_v1* peer, int* cost, char* reason,
                              size_t reasonLen) {
    Context* c = ctxOf(ctx);
    return guarded(c, "can_connect", [&] {
      need(c, "can_connect", "ctx");
      need(cost, "can_connect", "cost");
      need(peer, "can_connect", "peer");
      std::string why;
      *cost = T::canConnect(*c, peer, &why);
      writeReason(why, reason, reasonLen);
      return PB_OK;
    });
  }

  static pb_status setup(pb_plugin_ctx* ctx, const pb_peer_info_v1* peer, pb_conn** conn, void* addr,
                         size_t* addrLen) {
    Context* c = ctxOf(ctx);
    return guarded(c, "setup", [&] {
      need(c, "setup", "ctx");
      *need(conn, "setup", "conn") = nullptr;
      need(peer, "setup", "peer");
      *conn = reinterpret_cast<pb_conn*>(T::setup(*c, peer, addr, addrLen));
      return PB_OK;
    });
  }

  static pb_status registerMemory(pb_plugin_ctx* ctx, void* ptr, size_t size, pb_mem_type type, pb_mr** mr) {
    Context* c = ctxOf(ctx);
    return guarded(c, "register_memory", [&] {
      need(c, "register_memory", "ctx");
      *need(mr, "register_memory", "mr") = nullptr;
      *mr = reinterpret_cast<pb_mr*>(T::registerMemory(*c, ptr, size, type));
      return PB_OK;
    });
  }

  static pb_status packRkey(pb_plugin_ctx* ctx, pb_mr* mr, void* buf, size_t* len) {
    Context* c = ctxOf(ctx);
    return guarded(c, "pack_rkey", [&] {
      need(c, "pack_rkey", "ctx");
      T::packRkey(*c, *need(regionOf(mr), "pack_rkey", "mr"), buf, len);
      return PB_OK;
    });
  }

  static pb_status deregisterMemory(pb_plugin_ctx* ctx, pb_mr* mr) {
    Context* c = ctxOf(ctx);
    return guarded(c, "deregister_memory", [&] {
      need(c, "deregister_memory", "ctx");
      T::deregisterMemory(*c, need(regionOf(mr), "deregister_memory", "mr"));
      return PB_OK;
    });
  }

  static pb_status finalize(pb_plugin_ctx* ctx) {
    Context* c = ctxOf(ctx);
    return guarded(c, "finalize", [&] {
      T::finalize(need(c, "finalize", "ctx"));
      return PB_OK;
    });
  }

  static const char* lastError(pb_plugin_ctx* ctx) {
    // A per-thread copy stays valid while other threads record new errors.
    thread_local std::string copy;
    try {
      copy = ctx ? ctxOf(ctx)->lastError() : initError();
    } catch (...) {
      return "could not copy the last error (out of memory)";
    }
    return copy.c_str();
  }

  // ---- group entries (minor 4) ----------------------------------------------

  static pb_status groupCanCreate(pb_plugin_ctx* ctx, const pb_group_desc_v1* desc, int* cost, char* reason,
                                  size_t reasonLen) {
    Context* c = ctxOf(ctx);
    return guarded(c, "group_can_create", [&] {
      need(c, "group_can_create", "ctx");
      need(cost, "group_can_create", "cost");
      need(desc, "group_can_create", "desc");
      std::string why;
      *cost = T::groupCanCreate(*c, desc, &why);
      writeReason(why, reason, reasonLen);
      return PB_OK;
    });
  }

  static pb_status groupCreate(pb_plugin_ctx* ctx, const pb_group_desc_v1* desc, pb_group** group,
                               pb_group_view_v1* view) {
    Context* c = ctxOf(ctx);
    return guarded(c, "group_create", [&] {
      need(c, "group_create", "ctx");
      *need(group, "group_create", "group") = nullptr;
      need(desc, "group_create", "desc");
      need(view, "group_create", "view");
      *group = reinterpret_cast<pb_group*>(T::groupCreate(*c, desc, *view));
      return PB_OK;
    });
  }

  static pb_status groupDestroy(pb_plugin_ctx* ctx, pb_group* group) {
    Context* c = ctxOf(ctx);
    return guarded(c, "group_destroy", [&] {
      need(c, "group_destroy", "ctx");
      T::groupDestroy(*c, need(groupOf(group), "group_destroy", "group"));
      return PB_OK;
    });
  }

  // ---- connection-level entries -------------------------------------------

  static pb_status proxyConnect(pb_conn* conn, const void* peerAddr, size_t peerAddrLen) {
    return guarded(ctxOfConn(conn), "proxy_connect", [&] {
      Connection& c = *need(connOf(conn), "proxy_connect", "conn");
      bool connected = false;
      if constexpr (detail::HasConnect<T>::value) connected = T::connect(c, peerAddr, peerAddrLen);
      else connected = c.connect(peerAddr, peerAddrLen);
      return connected ? PB_OK : PB_IN_PROGRESS;
    });
  }

  static pb_status importRkey(pb_conn* conn, const void* buf, size_t len, pb_rkey** rkey) {
    return guarded(ctxOfConn(conn), "import_rkey", [&] {
      Connection& c = *need(connOf(conn), "import_rkey", "conn");
      *need(rkey, "import_rkey", "rkey") = nullptr;
      *rkey = reinterpret_cast<pb_rkey*>(T::importRkey(c, buf, len));
      return PB_OK;
    });
  }

  static pb_status releaseRkey(pb_conn* conn, pb_rkey* rkey) {
    return guarded(ctxOfConn(conn), "release_rkey", [&] {
      if constexpr (detail::HasReleaseRkey<T>::value) T::releaseRkey(connOf(conn), keyOf(rkey));
      else delete keyOf(rkey);
      return PB_OK;
    });
  }

  static pb_status describe(pb_plugin_ctx* ctx, char* buf, size_t len, size_t* needed) {
    Context* c = ctxOf(ctx);
    return guarded(c, "describe", [&] {
      const std::string text = T::describe(*need(c, "describe", "ctx"));
      *need(needed, "describe", "needed") = text.size() + 1;
      if (!buf || len < text.size() + 1) return PB_ERR_NOMEM;
      std::memcpy(buf, text.c_str(), text.size() + 1);
      return PB_OK;
    });
  }

  static pb_status remotePointer(pb_conn* conn, pb_rkey* rkey, void** ptr) {
    return guarded(ctxOfConn(conn), "remote_pointer", [&] {
      Connection& c = *need(connOf(conn), "remote_pointer", "conn");
      *need(ptr, "remote_pointer", "ptr") = T::remotePointer(c, keyOf(rkey));
      return PB_OK;
    });
  }

  static pb_status write(pb_conn* conn, pb_mr* src, size_t srcOffset, pb_rkey* dst, size_t dstOffset, size_t size) {
    return guarded(ctxOfConn(conn), "write", [&] {
      Connection& c = *need(connOf(conn), "write", "conn");
      Region& from = *need(regionOf(src), "write", "src");
      RemoteKey& to = *need(keyOf(dst), "write", "dst");
      if constexpr (detail::HasWrite<T>::value) T::write(c, from, srcOffset, to, dstOffset, size);
      else c.postWrite(from, srcOffset, to, dstOffset, size);
      return PB_OK;
    });
  }

  static pb_status writeSignal(pb_conn* conn, pb_mr* src, size_t srcOffset, pb_rkey* dst, size_t dstOffset,
                               size_t size, pb_rkey* signalDst, size_t signalOffset, uint64_t value) {
    return guarded(ctxOfConn(conn), "write_signal", [&] {
      Connection& c = *need(connOf(conn), "write_signal", "conn");
      Region& from = *need(regionOf(src), "write_signal", "src");
      RemoteKey& to = *need(keyOf(dst), "write_signal", "dst");
      RemoteKey& counter = *need(keyOf(signalDst), "write_signal", "signal_dst");
      if constexpr (detail::HasWriteSignal<T>::value)
        T::writeSignal(c, from, srcOffset, to, dstOffset, size, counter, signalOffset, value);
      else if constexpr (kWritesSignal)
        c.postWriteSignal(from, srcOffset, to, dstOffset, size, counter, signalOffset, value);
      return PB_OK;
    });
  }

  static pb_status signal(pb_conn* conn, pb_rkey* dst, size_t dstOffset, uint64_t value) {
    return guarded(ctxOfConn(conn), "signal", [&] {
      Connection& c = *need(connOf(conn), "signal", "conn");
      RemoteKey& to = *need(keyOf(dst), "signal", "dst");
      if constexpr (detail::HasSignal<T>::value) T::signal(c, to, dstOffset, value);
      else c.postSignal(to, dstOffset, value);
      return PB_OK;
    });
  }

  static pb_status proxyProgress(pb_conn* conn, uint64_t* completed) {
    return guarded(ctxOfConn(conn), "proxy_progress", [&] {
      Connection& c = *need(connOf(conn), "proxy_progress", "conn");
      need(completed, "proxy_progress", "completed");
      if constexpr (detail::HasProgress<T>::value) T::progress(c, completed);
      else c.progress(completed);
      return PB_OK;
    });
  }

  static pb_status flush(pb_conn* conn) {
    return guarded(ctxOfConn(conn), "flush", [&] {
      Connection& c = *need(connOf(conn), "flush", "conn");
      if constexpr (detail::HasFlush<T>::value) T::flush(c);
      else c.flush();
      return PB_OK;
    });
  }

  static pb_status freeConn(pb_conn* conn) {
    return guarded(ctxOfConn(conn), "free", [&] {
      if constexpr (detail::HasFreeConnection<T>::value) T::freeConnection(connOf(conn));
      else delete connOf(conn);
      return PB_OK;
    });
  }
};

}  // namespace plugboard::transport_cxx

/// Defines the plugin's exported entry symbol for traits class TRAITS: the
/// table of plugboard::transport_cxx::Adapter<TRAITS>, or NULL when the core
/// speaks another ABI major. Use it once, at namespace scope, in one file.
#define PLUGBOARD_DEFINE_TRANSPORT(TRAITS)                                                                       \
  extern "C" PB_PLUGIN_EXPORT const pb_transport_v1* plugboard_transport_v1(uint32_t core_major,                 \
                                                                            uint32_t core_minor) {               \
    (void)core_minor; /* minors only grow structs; struct_size handles them */                                   \
    if (core_major != PB_TRANSPORT_ABI_MAJOR) return nullptr;                                                    \
    static const pb_transport_v1 table = ::plugboard::transport_cxx::Adapter<TRAITS>::table();                   \
    return &table;                                                                                               \
  }                                                                                                              \
  static_assert(std::is_same_v<decltype(&plugboard_transport_v1), pb_transport_entry_v1_fn>,                     \
                "entry symbol does not match pb_transport_entry_v1_fn")

#endif  // PLUGBOARD_TRANSPORT_CXX_HPP
