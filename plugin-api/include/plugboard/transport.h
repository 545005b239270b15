/*
 * Plugboard transport ABI, major version 1.
 *
 * This is the only interface between the Plugboard core and a transport
 * plugin. It is pure C (C99), so a plugin may be written in any language and
 * built with any compiler; no C++ type crosses it.
 *
 * A plugin is a shared library named libplugboard-<name>.so that exports one
 * symbol, PB_TRANSPORT_ENTRY_SYMBOL_V1, of type pb_transport_entry_v1_fn. The
 * core loads it with RTLD_NOW | RTLD_LOCAL, calls the entry function with the
 * ABI version it speaks, and receives a pb_transport_v1 table.
 *
 * Versioning:
 *  - The major version changes only when an existing field changes meaning;
 *    a new major gets a new entry symbol, so old and new can coexist.
 *  - Within a major, structs only grow at the end. Every struct begins with
 *    struct_size; a reader must check that a field lies inside struct_size
 *    before reading it (PB_HAS_FIELD does this). struct_size is sizeof, tail
 *    padding included, so a new field must start past the old sizeof: fill
 *    the old tail padding with a reserved member first (pb_peer_info_v1).
 *  - The core passes its (major, minor) to the entry function; the plugin
 *    returns its own in the table. Each side refuses a major it does not
 *    speak, and the error names both versions.
 *
 * Threading contract:
 *  - The core never calls two functions on the same connection at the same
 *    time (it holds a per-connection lock), but different connections may be
 *    used from different threads concurrently. Context-level functions
 *    (register/deregister memory, setup) may run concurrently with
 *    connection functions; a plugin protects its own shared state.
 *  - A plugin may run its own threads; they must never call back into the
 *    core except through pb_host_services_v1, which is thread-safe.
 *
 * Buffers: where the caller passes a buffer and its size (setup's address,
 * pack_rkey), a plugin that needs more returns PB_ERR_INVALID and stores the
 * size it needs in the length argument.
 *
 * Errors: every function returns pb_status. On any status other than PB_OK
 * and PB_IN_PROGRESS the plugin leaves a human-readable reason that
 * last_error() returns (per context, thread-safe, valid until the next call
 * on that context). Plugins must catch every C++ exception at this boundary.
 */
#ifndef PLUGBOARD_TRANSPORT_H
#define PLUGBOARD_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** ABI major version described by this header. */
#define PB_TRANSPORT_ABI_MAJOR 1
/** ABI minor version described by this header (grows with struct fields). */
#define PB_TRANSPORT_ABI_MINOR 6
/** Name of the exported entry symbol for ABI major 1. */
#define PB_TRANSPORT_ENTRY_SYMBOL_V1 "plugboard_transport_v1"

/** True when the struct pointed to by p is big enough to contain field f. */
#define PB_HAS_FIELD(p, type, f) \
  ((p)->struct_size >= offsetof(type, f) + sizeof(((type*)0)->f))

/** Result of every ABI call. Negative values are errors. */
typedef enum pb_status {
  PB_OK = 0,              /**< Done. */
  PB_IN_PROGRESS = 1,     /**< Not done yet: call again (proxy_connect). */
  PB_ERR_INVALID = -1,    /**< Bad argument from the caller. */
  PB_ERR_UNSUPPORTED = -2,/**< The plugin cannot do this (memory type, op). */
  PB_ERR_SYSTEM = -3,     /**< An OS or library call failed. */
  PB_ERR_REMOTE = -4,     /**< The peer closed, reset or sent bad data. */
  PB_ERR_TIMEOUT = -5,    /**< A plugin-internal wait ran out. */
  PB_ERR_NOMEM = -6,      /**< Out of memory or another resource. */
  PB_ERR_VERSION = -7,    /**< ABI version not spoken by this side. */
  PB_ERR_INTERNAL = -8    /**< A bug: an invariant did not hold. */
} pb_status;

/** Memory types, used as bits in pb_transport_properties_v1.mem_types. */
typedef enum pb_mem_type {
  PB_MEM_HOST = 1u << 0, /**< Ordinary or pinned host memory. */
  PB_MEM_CUDA = 1u << 1  /**< CUDA device memory. */
} pb_mem_type;

/** Capability bits for pb_transport_properties_v1.flags. */
typedef enum pb_transport_flag {
  PB_CAP_ONE_SIDED_WRITE = 1u << 0, /**< write() is supported. */
  PB_CAP_ATOMIC_SIGNAL = 1u << 1,   /**< signal() is supported. */
  PB_CAP_NEEDS_PROXY = 1u << 2,     /**< Completions need proxy_progress calls. */
  PB_CAP_SAME_HOST_ONLY = 1u << 3,  /**< Only connects ranks of one host. */
  PB_CAP_GROUP = 1u << 4,           /**< A group (switch) transport such as nvls. */
  PB_CAP_SIGNAL_NOTIFY = 1u << 5,   /**< Calls signal_landed for every signal it applies and
                                         every operation it completes (minor 1). */
  PB_CAP_MAPPED = 1u << 6,          /**< Imported regions are mapped into this process:
                                         remote_pointer() gives an address kernels can
                                         load and store through (minor 2). */
  PB_CAP_CHEAP_REGISTRATION = 1u << 7 /**< register_memory / deregister_memory of host
                                         memory cost about a table entry (nothing is
                                         pinned or mapped), so the core may register a
                                         caller's buffers per call and write straight
                                         from and into them. A hint: cores that do not
                                         know it ignore it. */
} pb_transport_flag;

/** Log levels understood by pb_host_services_v1.log. */
typedef enum pb_log_level {
  PB_LOG_WARN = 1,  /**< Something the user should see. */
  PB_LOG_INFO = 2,  /**< One-off set-up facts. */
  PB_LOG_TRACE = 3  /**< Per-operation detail. */
} pb_log_level;

/** Types a plugin setting can have. */
typedef enum pb_setting_type {
  PB_SETTING_STRING = 0, /**< Any text. */
  PB_SETTING_INT = 1,    /**< Signed 64-bit integer, decimal. */
  PB_SETTING_BOOL = 2,   /**< 0/1, true/false, yes/no, on/off. */
  PB_SETTING_DOUBLE = 3  /**< Floating point. */
} pb_setting_type;

/**
 * A setting a plugin declares at init. The core registers it as
 * "<plugin>.<key>", readable from env PLUGBOARD_<PLUGIN>_<KEY> and from the
 * YAML section "<plugin>: { <key>: value }". Strings are copied by the core.
 */
typedef struct pb_setting_decl_v1 {
  size_t struct_size;       /**< sizeof(pb_setting_decl_v1). */
  const char* key;          /**< Lower-case key, e.g. "ifname". */
  pb_setting_type type;     /**< Value type, checked when the value is parsed. */
  const char* default_value;/**< Default as text (NULL means empty string). */
  const char* doc;          /**< One-line description for plugboard-info. */
  int rank_local;           /**< Non-zero: may differ between ranks (e.g. a NIC name). */
} pb_setting_decl_v1;

/**
 * Services the core offers a plugin. Handed to init() and valid until
 * finalize() returns. All functions are thread-safe.
 */
typedef struct pb_host_services_v1 {
  size_t struct_size;   /**< sizeof(pb_host_services_v1) as the core built it. */
  uint32_t abi_major;   /**< ABI major the core speaks. */
  uint32_t abi_minor;   /**< ABI minor the core speaks. */
  void* core;           /**< Opaque core handle, first argument of the calls below. */
  /** Log one line (no trailing newline needed) under the plugin's subsystem. */
  void (*log)(void* core, pb_log_level level, const char* message);
  /** Declare a setting; returns PB_ERR_INVALID for a bad key or duplicate. */
  pb_status (*declare_setting)(void* core, const pb_setting_decl_v1* decl);
  /**
   * Read a declared setting's resolved value as text into buf (NUL-
   * terminated). *needed receives the length including the NUL; when it is
   * larger than len, buf is untouched and PB_ERR_NOMEM is returned.
   */
  pb_status (*get_setting)(void* core, const char* key, char* buf, size_t len,
                           size_t* needed);
  int rank;             /**< This process's rank in the communicator. */
  int nranks;           /**< Number of ranks. */
  const char* hostname; /**< This host's name as the core identifies it. */

  /* ---- minor 1 ---- */
  /**
   * Tells the core that something it may be waiting for happened: a peer's
   * signal landed in this process's memory (call right after the atomic
   * add), or a posted operation completed. Lets host-side waiters sleep
   * instead of polling; cheap when nobody waits. A plugin that calls it in
   * both cases sets PB_CAP_SIGNAL_NOTIFY. Check PB_HAS_FIELD first: older
   * cores lack it.
   */
  void (*signal_landed)(void* core);

  /* ---- minor 3 ---- */
  /**
   * A dma-buf file descriptor covering CUDA device memory [ptr, ptr + size),
   * so a plugin can register GPU memory with its NIC (ibv_reg_dmabuf_mr,
   * FI_HMEM with a dma-buf) without linking CUDA. The exported range is
   * widened to whole host pages; *offset receives ptr's offset in it. The
   * caller owns *fd and closes it once registered. PB_ERR_UNSUPPORTED when
   * the core has no CUDA, the device or driver cannot export dma-bufs, or
   * ptr is not device memory. With ptr NULL and size 0 it only answers
   * whether the calling thread's CUDA device can export dma-bufs (PB_OK)
   * or not (PB_ERR_UNSUPPORTED), leaving *fd and *offset alone. Check
   * PB_HAS_FIELD first: older cores lack it.
   */
  pb_status (*cuda_dmabuf_fd)(void* core, void* ptr, size_t size, int* fd, uint64_t* offset);

  /* ---- minor 5 ---- */
  /**
   * The PCI bus id of the calling thread's CUDA device as sysfs names it
   * ("0000:3b:00.0": lowercase hex, a 4-digit domain), NUL-terminated in
   * buf, so a network plugin can pick the NIC nearest that GPU (as NCCL
   * does by PCI distance). PB_ERR_UNSUPPORTED when the core has no CUDA or
   * the process sees no CUDA device; PB_ERR_NOMEM when len is too small
   * (PB_PCI_BUS_ID_LEN always suffices); PB_ERR_INVALID for a NULL buf.
   * Check PB_HAS_FIELD first: older cores lack it.
   */
  pb_status (*cuda_pci_bus_id)(void* core, char* buf, size_t len);

  /* ---- minor 6 ---- */
  /**
   * Non-zero when the core loads this plugin only because `transports` is
   * `auto`: neither the list nor a rule names it and failover is off, so
   * the plugin carries a pair only where its cost beats every other loaded
   * transport's. A plugin whose initialisation is costly and that can tell
   * it would lose on this host (no device for its fast paths, say) may then
   * refuse init with PB_ERR_UNSUPPORTED and a reason, which `auto` logs as
   * a skip. Zero for a named transport. Check PB_HAS_FIELD first: older
   * cores lack it.
   */
  int loaded_by_auto;
} pb_host_services_v1;

/** Bytes that always hold cuda_pci_bus_id's answer with its NUL ("dddddddd:bb:dd.f"). */
#define PB_PCI_BUS_ID_LEN 32

/** Static facts about a transport, filled in by properties(). */
typedef struct pb_transport_properties_v1 {
  size_t struct_size;      /**< Set by the caller to sizeof its struct. */
  uint32_t mem_types;      /**< Bitmask of pb_mem_type the plugin can register. */
  uint32_t flags;          /**< Bitmask of pb_transport_flag. */
  double bandwidth_gbps;   /**< Estimated per-connection bandwidth, GB/s. */
  double latency_us;       /**< Estimated one-way small-message latency, us. */
  size_t max_address_size; /**< Upper bound on setup()'s address blob, bytes. */
  size_t max_rkey_size;    /**< Upper bound on pack_rkey()'s blob, bytes. */
} pb_transport_properties_v1;

/** What the core knows about the two ends of a prospective connection. */
typedef struct pb_peer_info_v1 {
  size_t struct_size;    /**< sizeof(pb_peer_info_v1). */
  int local_rank;        /**< Rank of this process. */
  int peer_rank;         /**< Rank of the peer. */
  const char* local_host;/**< Host identity of this process. */
  const char* peer_host; /**< Host identity of the peer. */
  int same_host;         /**< Non-zero when both identities are equal. */
  /* ---- minor 4 ---- */
  int reserved;          /**< Zero. Fills minor 3's tail padding: a field there would lie
                              inside a minor-3 core's struct_size (sizeof included the
                              padding), so PB_HAS_FIELD could not tell it was absent. */
  int local_ranks;       /**< Ranks of the communicator on this process's host, this one
                              included (>= 1); lets a plugin share the host's cores among
                              them. Check PB_HAS_FIELD first: older cores lack it. */
} pb_peer_info_v1;

/** Opaque plugin objects. The core only passes them back. */
typedef struct pb_plugin_ctx pb_plugin_ctx;  /**< One per loaded plugin. */
typedef struct pb_conn pb_conn;              /**< One per peer connection. */
typedef struct pb_mr pb_mr;                  /**< A local registered region. */
typedef struct pb_rkey pb_rkey;              /**< An imported remote region. */
typedef struct pb_group pb_group;            /**< A group (switch) buffer (minor 4). */

/* ---- minor 4: group (switch) transports ---- */

/**
 * The out-of-band exchange the core lends a group set-up, collective over
 * the group's ranks (the core's bootstrap). Every call is bounded by the
 * core's timeout and returns an error status (never hangs) when a rank
 * fails or leaves. Every rank of the group must make the same calls in the
 * same order, so a plugin that fails on one rank still takes part in the
 * exchanges it has left (telling the others it failed) before returning.
 */
typedef struct pb_group_bootstrap_v1 {
  size_t struct_size; /**< sizeof(pb_group_bootstrap_v1). */
  void* core;         /**< Opaque, first argument of the calls below. */
  /**
   * Every rank passes `bytes` bytes (the same count on every rank); `all`
   * receives nranks * bytes, rank i's at i * bytes (its own included).
   */
  pb_status (*all_gather)(void* core, const void* mine, size_t bytes, void* all);
  /** Returns once every rank of the group has called it. */
  pb_status (*barrier)(void* core);
} pb_group_bootstrap_v1;

/** What the core asks of a group buffer: one per rank of the group. */
typedef struct pb_group_desc_v1 {
  size_t struct_size;   /**< sizeof(pb_group_desc_v1). */
  int rank;             /**< This rank's index in the group, 0 .. nranks - 1. */
  int nranks;           /**< Ranks in the group (>= 2). */
  const int* comm_ranks;/**< Communicator rank of each group rank (for messages). */
  int cuda_device;      /**< CUDA device ordinal this rank uses. */
  size_t bytes;         /**< Bytes asked for per rank (the plugin may round up). */
  const pb_group_bootstrap_v1* bootstrap; /**< Exchange for group_create; NULL for group_can_create. */
} pb_group_desc_v1;

/** Where a created group buffer is mapped in this process. */
typedef struct pb_group_view_v1 {
  size_t struct_size; /**< Set by the caller to sizeof its struct. */
  void* multicast;    /**< Device address whose stores and reductions reach every rank's buffer. */
  void* unicast;      /**< Device address of this rank's own buffer (bound into the group). */
  size_t bytes;       /**< Usable bytes of each view (>= desc->bytes). */
} pb_group_view_v1;

/**
 * The function table of a transport, ABI major 1.
 *
 * Operation model. write() and signal() post operations on a connection and
 * return at once. Each posted operation gets the next sequence number of
 * that connection, starting at 1. proxy_progress() reports how many have
 * completed; operations complete in posting order. "Completed" means the
 * local source buffer may be reused. A signal() becomes visible at the peer
 * only after every earlier write() on the same connection is visible there:
 * this is the ordering semaphores rely on.
 */
typedef struct pb_transport_v1 {
  size_t struct_size;   /**< sizeof(pb_transport_v1) as the plugin built it. */
  uint32_t abi_major;   /**< Must equal PB_TRANSPORT_ABI_MAJOR (1). */
  uint32_t abi_minor;   /**< The minor the plugin was built with. */
  const char* name;     /**< Transport name, equal to <name> in the file name. */
  const char* version;  /**< Plugin's own version string, for logs. */

  /** Create the plugin context. Declare settings here. */
  pb_status (*init)(const pb_host_services_v1* host, pb_plugin_ctx** ctx);
  /** Fill props (props->struct_size is set by the caller). */
  pb_status (*properties)(pb_plugin_ctx* ctx, pb_transport_properties_v1* props);
  /**
   * Can this rank reach the peer? *cost >= 0: yes, lower is better.
   * *cost < 0: no, and a short reason is written to reason (NUL-terminated,
   * at most reason_len bytes), e.g. "different host".
   */
  pb_status (*can_connect)(pb_plugin_ctx* ctx, const pb_peer_info_v1* peer,
                           int* cost, char* reason, size_t reason_len);
  /**
   * Start a connection: allocate it and write this side's address blob
   * (at most *addr_len bytes; on return *addr_len is the size used). The core
   * sends the blob to the peer and passes the peer's blob to proxy_connect.
   */
  pb_status (*setup)(pb_plugin_ctx* ctx, const pb_peer_info_v1* peer,
                     pb_conn** conn, void* addr, size_t* addr_len);
  /**
   * Finish connecting with the peer's address blob. Non-blocking: returns
   * PB_IN_PROGRESS until connected, then PB_OK. The core calls it
   * repeatedly (both ranks concurrently) with the same arguments and applies
   * its own timeout.
   */
  pb_status (*proxy_connect)(pb_conn* conn, const void* peer_addr,
                             size_t peer_addr_len);
  /** Register local memory of the given pb_mem_type for write/signal. */
  pb_status (*register_memory)(pb_plugin_ctx* ctx, void* ptr, size_t size,
                               pb_mem_type type, pb_mr** mr);
  /**
   * Serialize what a peer needs to target mr (at most *len bytes; on return
   * *len is the size used).
   */
  pb_status (*pack_rkey)(pb_plugin_ctx* ctx, pb_mr* mr, void* buf, size_t* len);
  /** Import a peer's packed key for use on conn. */
  pb_status (*import_rkey)(pb_conn* conn, const void* buf, size_t len,
                           pb_rkey** rkey);
  /** Release an imported key. */
  pb_status (*release_rkey)(pb_conn* conn, pb_rkey* rkey);
  /**
   * Deregister memory. No local operation using it may be in flight. It may
   * block while a peer's write into the region is still arriving; the
   * region is never written after this returns.
   */
  pb_status (*deregister_memory)(pb_plugin_ctx* ctx, pb_mr* mr);
  /**
   * Post a one-sided write of size bytes from (src, src_offset) to
   * (dst, dst_offset). size may be 0. Ranges are checked against the regions.
   */
  pb_status (*write)(pb_conn* conn, pb_mr* src, size_t src_offset,
                     pb_rkey* dst, size_t dst_offset, size_t size);
  /**
   * Post an atomic add of value to the 8-byte aligned uint64_t at
   * (dst, dst_offset) in the peer's memory (a semaphore's inbound counter).
   */
  pb_status (*signal)(pb_conn* conn, pb_rkey* dst, size_t dst_offset,
                      uint64_t value);
  /**
   * Make progress and report *completed, the sequence number of the last
   * completed operation. An error here (peer vanished, bad message) is
   * final for the connection. A peer's clean close alone is not an error;
   * posting after it is. With an error the plugin may still set
   * *completed to the operations that completed before it (the core then
   * counts them done: a caller waiting for an earlier write is not failed
   * by a later signal to a peer that has gone); else it leaves it alone.
   */
  pb_status (*proxy_progress)(pb_conn* conn, uint64_t* completed);
  /**
   * Ask for every posted operation to complete soon (push out batched work).
   * Non-blocking; completion is still observed through proxy_progress.
   */
  pb_status (*flush)(pb_conn* conn);
  /**
   * Close a connection. Operations still in flight are abandoned; the
   * plugin must not touch their buffers after free returns.
   */
  pb_status (*free)(pb_conn* conn);
  /** Destroy the context. Every connection and region is freed before. */
  pb_status (*finalize)(pb_plugin_ctx* ctx);
  /**
   * Reason for the last failure on ctx (or on any of its connections), or
   * "" if none. Never NULL. ctx may be NULL for a failed init().
   */
  const char* (*last_error)(pb_plugin_ctx* ctx);

  /* ---- minor 1 ---- */
  /**
   * Optional (may be NULL): a write followed by a signal, posted as one
   * operation with one sequence number, with the same ordering as write()
   * then signal(). Lets a transport send both in one message.
   */
  pb_status (*write_signal)(pb_conn* conn, pb_mr* src, size_t src_offset, pb_rkey* dst, size_t dst_offset,
                            size_t size, pb_rkey* signal_dst, size_t signal_offset, uint64_t value);

  /* ---- minor 2 ---- */
  /**
   * Optional (NULL unless PB_CAP_MAPPED): the address in this process at
   * which the imported region starts, valid until release_rkey. For a
   * PB_MEM_CUDA region it is a device pointer usable by kernels on this
   * process's device (e.g. through CUDA IPC); PB_ERR_UNSUPPORTED otherwise.
   */
  pb_status (*remote_pointer)(pb_conn* conn, pb_rkey* rkey, void** ptr);

  /* ---- minor 4 ---- */
  /**
   * Optional (NULL unless PB_CAP_GROUP): can this rank join a group buffer
   * of desc->nranks ranks on desc->cuda_device? *cost >= 0: yes; < 0: no,
   * with a short reason (e.g. "disabled by NCCL_NVLS_ENABLE=0"). Creates
   * nothing; desc->bootstrap is NULL. The core asks every rank and creates
   * a group only when all said yes.
   */
  pb_status (*group_can_create)(pb_plugin_ctx* ctx, const pb_group_desc_v1* desc, int* cost, char* reason,
                                size_t reason_len);
  /**
   * Optional (NULL unless PB_CAP_GROUP). Collective over the group: create
   * the group buffer, bind this rank's memory into it and map both views
   * (filled into *view), exchanging what it must through desc->bootstrap.
   * On failure on any rank every rank returns an error and nothing stays
   * allocated. The buffer's initial contents are undefined.
   */
  pb_status (*group_create)(pb_plugin_ctx* ctx, const pb_group_desc_v1* desc, pb_group** group,
                            pb_group_view_v1* view);
  /**
   * Optional (NULL unless PB_CAP_GROUP): unmap and release this rank's part
   * of the group. The core calls it on every rank once no kernel uses the
   * views (after a barrier), and before finalize.
   */
  pb_status (*group_destroy)(pb_plugin_ctx* ctx, pb_group* group);

  /* ---- minor 5 ---- */
  /**
   * Optional (may be NULL): what this context found and chose, as text for
   * plugboard-info: devices, ports, addresses, the provider, and why a
   * device was skipped, one item per line. Writes it NUL-terminated into
   * buf and its length with the NUL into *needed; PB_ERR_NOMEM when len is
   * smaller (buf untouched: call again with *needed bytes).
   */
  pb_status (*describe)(pb_plugin_ctx* ctx, char* buf, size_t len, size_t* needed);

  /* Fields added in later minors go here, after this line. */
} pb_transport_v1;

/**
 * Type of the exported entry symbol. core_major/core_minor are the ABI the
 * core speaks. Returns the plugin's table (static storage, never freed) or
 * NULL when the plugin does not speak core_major.
 */
typedef const pb_transport_v1* (*pb_transport_entry_v1_fn)(uint32_t core_major,
                                                           uint32_t core_minor);

/** Visibility attribute for the entry symbol in plugins built with -fvisibility=hidden. */
#if defined(__GNUC__)
#define PB_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define PB_PLUGIN_EXPORT
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PLUGBOARD_TRANSPORT_H */
