// Checks that need no peer: exported symbols, the ABI handshake, the
// properties and the settings a plugin declares.
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include "checks.hpp"
#include "elf_symbols.hpp"
#include "fake_host.hpp"

namespace plugboard::check {
namespace {

/// File name without directories.
std::string baseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// Joins up to 10 items with ", " (and says how many more there were).
std::string joinSome(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < 10; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > 10) out += ", ... (" + std::to_string(items.size() - 10) + " more)";
  return out;
}

/// Collects "; "-separated problems and fails the check if there are any.
class Problems {
 public:
  /// Notes what unless ok.
  void check(bool ok, const std::string& what) {
    if (!ok) text_ += (text_.empty() ? "" : "; ") + what;
  }
  /// Fails the running check with every note.
  void raise() const { expect(text_.empty(), text_); }

 private:
  std::string text_;
};

/// init with host; fails the check (naming what) unless PB_OK.
pb_plugin_ctx* initOrFail(const pb_transport_v1& t, FakeHost& host, const std::string& what) {
  pb_plugin_ctx* ctx = nullptr;
  pb_status st = t.init(host.services(), &ctx);
  expect(st == PB_OK, what + ": init returned " + statusName(st) + ": " + lastError(t, nullptr));
  expect(ctx != nullptr, what + ": init returned PB_OK but no context");
  return ctx;
}

/// finalize that must succeed. last_error is read only when it failed: a
/// finalized context is freed.
void finalizeOrFail(const pb_transport_v1& t, pb_plugin_ctx* ctx, const std::string& what) {
  pb_status st = t.finalize(ctx);
  if (st != PB_OK) throw CheckFailed(what + ": finalize returned " + statusName(st) + ": " + lastError(t, ctx));
}

void checkTable(const Options& o, const pb_transport_v1* t) {
  expect(t != nullptr, "plugboard_transport_v1(1, " + std::to_string(PB_TRANSPORT_ABI_MINOR) + ") returned NULL");
  Problems p;
  p.check(t->abi_major == PB_TRANSPORT_ABI_MAJOR,
          "table says ABI " + std::to_string(t->abi_major) + "." + std::to_string(t->abi_minor) + ", expected major 1");
  p.check(t->struct_size >= kMinTableSize, "struct_size " + std::to_string(t->struct_size) +
                                               " is smaller than the ABI 1.0 table (" + std::to_string(kMinTableSize) + ")");
  p.check(t->struct_size <= 65536 && t->struct_size % sizeof(void*) == 0,
          "struct_size " + std::to_string(t->struct_size) + " is not a plausible struct size");
  p.check(t->name && *t->name, "name is NULL or empty");
  if (t->name && *t->name) {
    std::string expected = "libplugboard-" + std::string(t->name) + ".so";
    p.check(baseName(o.plugin) == expected,
            "name '" + std::string(t->name) + "' does not match the file name " + baseName(o.plugin) +
                " (the core looks for " + expected + ")");
  }
  p.check(t->version != nullptr, "version is NULL");
  p.raise();
}

}  // namespace

void runExportChecks(const Options& o, Report& r) {
  r.run("exports.only_entry_symbol", [&] {
    std::vector<std::string> extra;
    bool entry = false;
    for (const auto& s : definedDynamicSymbols(o.plugin)) {
      if (s == PB_TRANSPORT_ENTRY_SYMBOL_V1) entry = true;
      else if (!isLinkerProvidedSymbol(s)) extra.push_back(s);
    }
    expect(entry, std::string("the dynamic symbol table does not define ") + PB_TRANSPORT_ENTRY_SYMBOL_V1);
    expect(extra.empty(), "exports " + std::to_string(extra.size()) + " symbol(s) besides " +
                              PB_TRANSPORT_ENTRY_SYMBOL_V1 + ": " + joinSome(extra) +
                              " (build with -fvisibility=hidden and a version script)");
  });
}

void runAbiChecks(const Options& o, Report& r, LoadedPlugin& p) {
  if (!r.run("abi.dlopen", [&] { p.library = std::make_unique<PluginLibrary>(o.plugin); })) return;
  if (!r.run("abi.entry_symbol", [&] {
        expect(p.library->entry() != nullptr,
               std::string("dlsym(") + PB_TRANSPORT_ENTRY_SYMBOL_V1 + ") found nothing after dlopen");
      }))
    return;
  r.run("abi.refuses_core_major_2", [&] {
    expect(p.library->table(2, 0) == nullptr, "the entry returned a table for core ABI 2.0; it must return NULL "
                                              "for a major it does not speak");
  });
  const pb_transport_v1* t = p.library->table(PB_TRANSPORT_ABI_MAJOR, PB_TRANSPORT_ABI_MINOR);
  if (!r.run("abi.table", [&] { checkTable(o, t); })) return;
  r.run("abi.accepts_core_minor_0", [&] {
    expect(p.library->table(PB_TRANSPORT_ABI_MAJOR, 0) != nullptr,
           "the entry returned NULL for core ABI 1.0; a plugin must work with any minor of its major");
  });
  if (!r.run("abi.required_functions", [&] {
        std::string missing = missingFunctions(*t);
        expect(missing.empty(), "NULL function pointer(s): " + missing);
      }))
    return;
  p.table = t;
  r.run("abi.init_refuses_host_major_2", [&] {
    FakeHost host(0, 2, localHostName(), o.settings, o.verbose);
    host.setAbiMajor(2);
    pb_plugin_ctx* ctx = nullptr;
    pb_status st = t->init(host.services(), &ctx);
    if (st == PB_OK && ctx) t->finalize(ctx);
    expect(st == PB_ERR_VERSION, "init with a core of ABI 2.1 returned " + statusName(st) + ", expected PB_ERR_VERSION");
    std::string why = lastError(*t, nullptr);
    expect(!why.empty(), "init refused ABI 2.1 but last_error(NULL) gives no reason");
  });
  // A transport whose hardware this machine lacks (an RDMA device, a
  // switch) says so with PB_ERR_UNSUPPORTED from init: nothing beyond here
  // can run, which is a skip, not a failure.
  {
    FakeHost host(0, 2, localHostName(), o.settings, o.verbose);
    pb_plugin_ctx* ctx = nullptr;
    const pb_status st = t->init(host.services(), &ctx);
    if (st == PB_OK && ctx) t->finalize(ctx);
    if (st == PB_ERR_UNSUPPORTED) {
      p.unsupported = lastError(*t, nullptr);
      if (p.unsupported.empty()) p.unsupported = "init returned PB_ERR_UNSUPPORTED with no reason";
      p.table = nullptr;
      return;
    }
  }
  r.run("abi.init_minor_0_host", [&] {
    FakeHost host(0, 2, localHostName(), o.settings, o.verbose);
    host.actAsMinor0();
    finalizeOrFail(*t, initOrFail(*t, host, "with a core of ABI 1.0"), "with a core of ABI 1.0");
    auto v = host.violations();
    expect(v.empty(), v.empty() ? "" : v.front());
  });
  r.run("abi.init_finalize", [&] {
    FakeHost host(0, 2, localHostName(), o.settings, o.verbose);
    pb_plugin_ctx* ctx = initOrFail(*t, host, "plain");
    const char* e = t->last_error(ctx);
    finalizeOrFail(*t, ctx, "plain");
    expect(e != nullptr, "last_error(ctx) returned NULL after a successful init; it must never return NULL");
  });
}

namespace {

/// properties.values: the invariants of what properties() reports.
void checkPropertyValues(const pb_transport_v1& t, pb_plugin_ctx* ctx, pb_transport_properties_v1& q) {
  q.struct_size = sizeof(q);
  pb_status st = t.properties(ctx, &q);
  expect(st == PB_OK, "properties returned " + statusName(st) + ": " + lastError(t, ctx));
  Problems pr;
  pr.check(q.mem_types != 0, "mem_types is 0 (no memory type can be registered)");
  pr.check((q.mem_types & ~uint32_t(PB_MEM_HOST | PB_MEM_CUDA)) == 0, "mem_types has unknown bits");
  const uint32_t known = PB_CAP_ONE_SIDED_WRITE | PB_CAP_ATOMIC_SIGNAL | PB_CAP_NEEDS_PROXY | PB_CAP_SAME_HOST_ONLY |
                         PB_CAP_GROUP | PB_CAP_SIGNAL_NOTIFY | PB_CAP_MAPPED | PB_CAP_CHEAP_REGISTRATION;
  pr.check((q.flags & ~known) == 0, "flags has unknown bits");
  pr.check(!(q.flags & PB_CAP_CHEAP_REGISTRATION) || (q.mem_types & PB_MEM_HOST),
           "CHEAP_REGISTRATION is set but host memory cannot be registered");
  pr.check(!(q.flags & PB_CAP_ONE_SIDED_WRITE) || t.write, "ONE_SIDED_WRITE is set but write is NULL");
  pr.check(!(q.flags & PB_CAP_ATOMIC_SIGNAL) || t.signal, "ATOMIC_SIGNAL is set but signal is NULL");
  const bool hasRemotePointer = PB_HAS_FIELD(&t, pb_transport_v1, remote_pointer) && t.remote_pointer;
  pr.check(!(q.flags & PB_CAP_MAPPED) || hasRemotePointer,
           "MAPPED is set but the table has no remote_pointer (it needs ABI minor 2)");
  pr.check((q.flags & PB_CAP_MAPPED) || !hasRemotePointer,
           "remote_pointer is set but MAPPED is not (transport.h: NULL unless PB_CAP_MAPPED)");
  pr.check(q.max_address_size > 0 && q.max_address_size <= 65536,
           "max_address_size " + std::to_string(q.max_address_size) + " is not in 1..65536");
  pr.check(q.max_rkey_size > 0 && q.max_rkey_size <= 65536,
           "max_rkey_size " + std::to_string(q.max_rkey_size) + " is not in 1..65536");
  pr.check(std::isfinite(q.bandwidth_gbps) && q.bandwidth_gbps > 0, "bandwidth_gbps is not a positive number");
  pr.check(std::isfinite(q.latency_us) && q.latency_us >= 0, "latency_us is not a non-negative number");
  pr.raise();
}

/// properties.struct_size_respected: an older core's smaller struct gets
/// nothing written past its struct_size.
void checkStructSizeRespected(const pb_transport_v1& t, pb_plugin_ctx* ctx) {
  unsigned char buf[sizeof(pb_transport_properties_v1) + 64];
  std::memset(buf, 0xA5, sizeof(buf));
  auto* q = reinterpret_cast<pb_transport_properties_v1*>(buf);
  q->struct_size = offsetof(pb_transport_properties_v1, flags) + sizeof(q->flags);
  pb_status st = t.properties(ctx, q);
  expect(st == PB_OK, "properties with struct_size " + std::to_string(q->struct_size) + " returned " + statusName(st));
  for (size_t i = q->struct_size; i < sizeof(buf); ++i)
    expect(buf[i] == 0xA5, "properties wrote byte " + std::to_string(i) + " although struct_size is " +
                               std::to_string(q->struct_size) + " (check PB_HAS_FIELD before each field)");
}

/// can_connect.same_host: records in p whether the connection checks can run.
void checkSameHost(const pb_transport_v1& t, pb_plugin_ctx* ctx, LoadedPlugin& p) {
  PeerDescription peer(0, 1, true);
  int cost = -99;
  char reason[256] = "";
  pb_status st = t.can_connect(ctx, &peer.info, &cost, reason, sizeof(reason));
  expect(st == PB_OK, "can_connect returned " + statusName(st) + ": " + lastError(t, ctx));
  expect(std::memchr(reason, '\0', sizeof(reason)) != nullptr, "reason is not NUL-terminated");
  p.sameHostReachable = cost >= 0;
  p.unreachableReason = reason;
  expect(cost >= 0 || reason[0], "cost " + std::to_string(cost) + " (unreachable) without a reason");
  if (cost < 0) skip(std::string("the plugin cannot reach a same-host peer here: ") + reason);
}

/// can_connect.different_host: a same-host-only transport refuses, with a
/// reason truncated to reason_len.
void checkDifferentHost(const pb_transport_v1& t, pb_plugin_ctx* ctx, const pb_transport_properties_v1& props) {
  if (!(props.flags & PB_CAP_SAME_HOST_ONLY)) skip("not a same-host-only transport");
  PeerDescription peer(0, 1, false);
  int cost = 0;
  char reason[16];
  std::memset(reason, 'x', sizeof(reason));
  pb_status st = t.can_connect(ctx, &peer.info, &cost, reason, 8);
  expect(st == PB_OK, "can_connect returned " + statusName(st) + ": " + lastError(t, ctx));
  expect(cost < 0, "SAME_HOST_ONLY is set but can_connect accepts a peer on another host (cost " +
                       std::to_string(cost) + ")");
  expect(std::memchr(reason, '\0', 8) != nullptr && reason[8] == 'x',
         "the reason was not truncated to reason_len (8) with a NUL inside it");
  expect(reason[0] != '\0', "refused a peer on another host without a reason");
}

/// properties.describe: the optional describe entry (minor 5) says how long
/// its text is, leaves a short buffer alone and fills a long one with one
/// NUL-terminated text of that length.
void checkDescribe(const pb_transport_v1& t, pb_plugin_ctx* ctx) {
  if (!PB_HAS_FIELD(&t, pb_transport_v1, describe) || !t.describe) skip("no describe entry (optional)");
  size_t needed = 0;
  pb_status st = t.describe(ctx, nullptr, 0, &needed);
  expect(st == PB_ERR_NOMEM, "describe with no buffer returned " + statusName(st) + ", expected PB_ERR_NOMEM");
  expect(needed >= 1 && needed <= (1u << 20), "describe says it needs " + std::to_string(needed) + " bytes");
  std::vector<char> text(needed + 8, 'x');
  size_t again = 0;
  st = t.describe(ctx, text.data(), needed - 1, &again);
  expect(st == PB_ERR_NOMEM && text[0] == 'x', "describe with one byte too few returned " + statusName(st) +
                                                   (text[0] == 'x' ? "" : " and wrote into the buffer"));
  st = t.describe(ctx, text.data(), text.size(), &again);
  expect(st == PB_OK, "describe returned " + statusName(st) + ": " + lastError(t, ctx));
  expect(again == needed && text[needed - 1] == '\0' && std::strlen(text.data()) == needed - 1,
         "describe's text is not the NUL-terminated " + std::to_string(needed) + " bytes it said");
}

}  // namespace

void runPropertyChecks(const Options& o, Report& r, LoadedPlugin& p) {
  const pb_transport_v1& t = *p.table;
  FakeHost host(0, 2, localHostName(), o.settings, o.verbose);
  pb_plugin_ctx* ctx = nullptr;
  p.propsOk = r.run("properties.values", [&] {
    ctx = initOrFail(t, host, "for properties");
    checkPropertyValues(t, ctx, p.props);
  });
  if (p.propsOk) {
    r.run("properties.struct_size_respected", [&] { checkStructSizeRespected(t, ctx); });
    r.run("properties.describe", [&] { checkDescribe(t, ctx); });
    r.run("can_connect.same_host", [&] { checkSameHost(t, ctx, p); });
    r.run("can_connect.different_host", [&] { checkDifferentHost(t, ctx, p.props); });
  } else {
    for (const char* name : {"properties.struct_size_respected", "properties.describe", "can_connect.same_host",
                             "can_connect.different_host"})
      r.skip(name, "properties.values did not pass");
  }
  if (ctx) t.finalize(ctx);
}

namespace {

/// Problems with one declaration ("" when none).
std::string badDeclaration(const DeclaredSetting& d) {
  std::string why;
  bool keyOk = !d.key.empty() && d.key[0] >= 'a' && d.key[0] <= 'z';
  for (char c : d.key) keyOk = keyOk && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  if (!keyOk) why += "key must be lower-case letters, digits and '_' (no dots), starting with a letter; ";
  if (d.type < PB_SETTING_STRING || d.type > PB_SETTING_DOUBLE) why += "type " + std::to_string(d.type) + " is unknown; ";
  if (d.doc.empty()) why += "doc is empty; ";
  const std::string& v = d.defaultValue;
  char* end = nullptr;
  if (d.type == PB_SETTING_INT && (std::strtoll(v.c_str(), &end, 10), v.empty() || *end))
    why += "default '" + v + "' is not an integer; ";
  if (d.type == PB_SETTING_DOUBLE && (std::strtod(v.c_str(), &end), v.empty() || *end))
    why += "default '" + v + "' is not a number; ";
  static const std::set<std::string> bools = {"0", "1", "true", "false", "yes", "no", "on", "off"};
  if (d.type == PB_SETTING_BOOL && !bools.count(v)) why += "default '" + v + "' is not a boolean; ";
  return why.empty() ? why : "setting '" + d.key + "': " + why.substr(0, why.size() - 2);
}

/// Key, type, default, doc and rank_local of each declaration, sorted.
std::set<std::tuple<std::string, int, std::string, std::string, int>> signature(const std::vector<DeclaredSetting>& ds) {
  std::set<std::tuple<std::string, int, std::string, std::string, int>> s;
  for (const auto& d : ds) s.emplace(d.key, d.type, d.defaultValue, d.doc, d.rankLocal);
  return s;
}

/// Declarations made by one init (finalized again).
std::vector<DeclaredSetting> declarationsOfOneInit(const Options& o, const pb_transport_v1& t,
                                                   std::vector<std::string>* violations) {
  FakeHost host(0, 2, localHostName(), o.settings, o.verbose);
  finalizeOrFail(t, initOrFail(t, host, "for settings"), "for settings");
  if (violations) *violations = host.violations();
  return host.declared();
}

}  // namespace

void runSettingChecks(const Options& o, Report& r, const LoadedPlugin& p) {
  const pb_transport_v1& t = *p.table;
  std::vector<DeclaredSetting> first;
  r.run("settings.declarations", [&] {
    std::vector<std::string> violations;
    first = declarationsOfOneInit(o, t, &violations);
    Problems pr;
    for (const auto& v : violations) pr.check(false, v);
    for (const auto& d : first) {
      std::string why = badDeclaration(d);
      pr.check(why.empty(), why);
    }
    pr.raise();
  });
  r.run("settings.reinit_same_set", [&] {
    auto second = declarationsOfOneInit(o, t, nullptr);
    expect(signature(first) == signature(second),
           "a second init declared " + std::to_string(second.size()) + " setting(s) differing from the first init's " +
               std::to_string(first.size()) + " (same keys, types, defaults and docs are required)");
  });
  r.run("settings.given_keys_declared", [&] {
    if (o.settings.empty()) skip("no --set given");
    std::vector<std::string> known;
    for (const auto& d : first) known.push_back(d.key);
    for (const auto& [key, value] : o.settings) {
      bool found = false;
      for (const auto& k : known) found = found || k == key;
      expect(found, "--set " + key + "=" + value + ": the plugin declares no setting '" + key +
                        "' (declared: " + (known.empty() ? std::string("none") : joinSome(known)) + ")");
    }
  });
}

}  // namespace plugboard::check
