/* A transport plugin that fails on purpose, in one of several ways chosen at
 * compile time, so the loader's error paths run against real .so files:
 *   MOCK_NO_SYMBOL  - exports no entry symbol
 *   MOCK_WRONG_ABI  - reports ABI major 99
 *   MOCK_INIT_FAILS - init() fails with a reason in last_error()
 *   MOCK_INIT_CRASHES - init() dies of SIGSEGV
 *   MOCK_INIT_EXITS - init() calls exit(3)
 *   MOCK_INIT_HANGS - init() never returns
 *   MOCK_GOOD       - loads and initialises; connects to nobody; describes itself
 *   MOCK_DESCRIBE_LIES - as GOOD, but describe() asks for a 1 TiB buffer
 *   MOCK_AUTO_DECLINES - as GOOD, but init() declines when the core says it
 *                     loads it only for `transports: auto` (loaded_by_auto)
 */
#include <plugboard/transport.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char* g_error = "";

static pb_status mock_init(const pb_host_services_v1* host, pb_plugin_ctx** ctx) {
  (void)host;
#if defined(MOCK_INIT_CRASHES)
  raise(SIGSEGV);
#elif defined(MOCK_INIT_EXITS)
  exit(3);
#elif defined(MOCK_INIT_HANGS)
  for (;;) pause();
#endif
#if defined(MOCK_INIT_FAILS)
  *ctx = NULL;
  g_error = "mock: init refused on purpose (no device found)";
  return PB_ERR_SYSTEM;
#else
#if defined(MOCK_AUTO_DECLINES)
  if (PB_HAS_FIELD(host, pb_host_services_v1, loaded_by_auto) && host->loaded_by_auto) {
    *ctx = NULL;
    g_error = "mock: declined, loaded only for transports: auto";
    return PB_ERR_UNSUPPORTED;
  }
#endif
  static int token;
  *ctx = (pb_plugin_ctx*)&token;
  return PB_OK;
#endif
}

static pb_status mock_properties(pb_plugin_ctx* ctx, pb_transport_properties_v1* p) {
  (void)ctx;
  p->mem_types = PB_MEM_HOST;
  p->flags = PB_CAP_ONE_SIDED_WRITE;
  p->bandwidth_gbps = 1.0;
  p->latency_us = 100.0;
  p->max_address_size = 16;
  p->max_rkey_size = 16;
  return PB_OK;
}

static pb_status mock_can_connect(pb_plugin_ctx* ctx, const pb_peer_info_v1* peer, int* cost,
                                  char* reason, size_t reason_len) {
  (void)ctx;
  (void)peer;
  *cost = -1;
  if (reason_len > 0) {
    strncpy(reason, "mock transport connects to nobody", reason_len - 1);
    reason[reason_len - 1] = '\0';
  }
  return PB_OK;
}

static pb_status mock_finalize(pb_plugin_ctx* ctx) {
  (void)ctx;
  return PB_OK;
}

#if !defined(MOCK_NO_SYMBOL)
static pb_status mock_describe(pb_plugin_ctx* ctx, char* buf, size_t len, size_t* needed) {
  static const char text[] = "mock: found nothing\nconnects to nobody";
  (void)ctx;
#if defined(MOCK_DESCRIBE_LIES)
  (void)buf;
  (void)len;
  *needed = (size_t)1 << 40;
  return PB_ERR_NOMEM;
#else
  *needed = sizeof text;
  if (!buf || len < sizeof text) return PB_ERR_NOMEM;
  memcpy(buf, text, sizeof text);
  return PB_OK;
#endif
}
#endif

static const char* mock_last_error(pb_plugin_ctx* ctx) {
  (void)ctx;
  return g_error;
}

static pb_transport_v1 g_table = {
    sizeof(pb_transport_v1),
#if defined(MOCK_WRONG_ABI)
    99,
#else
    PB_TRANSPORT_ABI_MAJOR,
#endif
    PB_TRANSPORT_ABI_MINOR,
    "mock",
    "0.0-mock",
    mock_init,
    mock_properties,
    mock_can_connect,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    mock_finalize,
    mock_last_error};

#if !defined(MOCK_NO_SYMBOL)
PB_PLUGIN_EXPORT const pb_transport_v1* plugboard_transport_v1(uint32_t core_major, uint32_t core_minor) {
  (void)core_minor;
  g_table.describe = mock_describe;
#if !defined(MOCK_WRONG_ABI)
  if (core_major != PB_TRANSPORT_ABI_MAJOR) return NULL;
#else
  (void)core_major;
#endif
  return &g_table;
}
#else
PB_PLUGIN_EXPORT int plugboard_not_the_entry_symbol(void) { return 0; }
#endif
