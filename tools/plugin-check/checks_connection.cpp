// Connection set-up and memory registration against the peer process, then
// the data-path and close groups on the same connection, then finalize.
#include <cstring>
#include <memory>

#include "checks.hpp"
#include "checks_datapath.hpp"
#include "session.hpp"

namespace plugboard::check {
namespace {

/// A single proxy_connect call must return within this many seconds.
constexpr double kMaxCallSeconds = 1.0;

void checkConnect(Session& s) {
  double slowest = s.connect();
  expect(slowest < kMaxCallSeconds, "a single proxy_connect call took " + std::to_string(slowest) +
                                        " s; it must not block (return PB_IN_PROGRESS and be called again)");
}

void checkPackTooSmall(Session& s) {
  LocalBuffer& b = s.localBuffer(4096);
  const pb_transport_v1& t = s.api();
  std::string buf(s.props().max_rkey_size + 64, '\0');
  size_t len = 1;
  pb_status st = t.pack_rkey(s.ctx(), b.mr, buf.data(), &len);
  expect(st == PB_ERR_INVALID, "pack_rkey into a 1-byte buffer returned " + statusName(st) + ", expected PB_ERR_INVALID");
  expect(len > 1 && len <= s.props().max_rkey_size,
         "a too-small pack_rkey must store the size it needs (1 < size <= max_rkey_size " +
             std::to_string(s.props().max_rkey_size) + "), got " + std::to_string(len));
  size_t needed = len;
  st = t.pack_rkey(s.ctx(), b.mr, buf.data(), &len);
  expect(st == PB_OK, "pack_rkey with the " + std::to_string(needed) + " bytes it asked for returned " +
                          statusName(st) + ": " + s.error());
  expect(len <= needed, "pack_rkey used " + std::to_string(len) + " bytes after asking for " + std::to_string(needed));
}

void checkBadRkey(Session& s) {
  RemoteBuffer& good = s.remoteBuffer(64, 0);
  const pb_transport_v1& t = s.api();
  struct Case {
    std::string blob;
    const char* what;
  };
  std::string garbage(good.packed.size(), char(0xA5));
  const Case cases[] = {{"", "an empty key"},
                        {good.packed.substr(0, good.packed.size() - 1), "a key one byte short"},
                        {garbage, "a key of the right size filled with 0xA5"}};
  for (const auto& c : cases) {
    pb_rkey* rkey = nullptr;
    pb_status st = t.import_rkey(s.conn(), c.blob.data(), c.blob.size(), &rkey);
    if (st == PB_OK && rkey) t.release_rkey(s.conn(), rkey);
    expect(st == PB_ERR_INVALID, std::string("import_rkey of ") + c.what + " returned " + statusName(st) +
                                     ", expected PB_ERR_INVALID");
    expect(!s.error().empty(), std::string("import_rkey refused ") + c.what + " but last_error is empty");
  }
}

void checkUnsupportedType(Session& s) {
  if (s.props().mem_types & PB_MEM_CUDA) skip("the plugin registers CUDA memory; that needs a GPU to check");
  char buf[64];
  pb_mr* mr = nullptr;
  pb_status st = s.api().register_memory(s.ctx(), buf, sizeof(buf), PB_MEM_CUDA, &mr);
  if (st == PB_OK && mr) s.api().deregister_memory(s.ctx(), mr);
  expect(st == PB_ERR_UNSUPPORTED, "register_memory(PB_MEM_CUDA) without CUDA in mem_types returned " +
                                       statusName(st) + ", expected PB_ERR_UNSUPPORTED");
  expect(!s.error().empty(), "register_memory refused CUDA memory but last_error is empty");
}

void runMemoryChecks(Report& r, Session& s) {
  r.run("memory.register_pack_import", [&] {
    s.requireUsable();
    RemoteBuffer& b = s.remoteBuffer(4096, 0);
    expect(!b.packed.empty(), "pack_rkey produced an empty key");
  });
  r.run("memory.pack_too_small", [&] {
    s.requireUsable();
    checkPackTooSmall(s);
  });
  r.run("memory.bad_rkey", [&] {
    s.requireUsable();
    checkBadRkey(s);
  });
  r.run("memory.unsupported_type", [&] {
    s.requireUsable();
    checkUnsupportedType(s);
  });
}

}  // namespace

void runConnectionChecks(const Options& o, Report& r, const LoadedPlugin& p) {
  const char* groups[] = {"connect.loopback", "memory.*", "write.*", "signal.*", "flush", "free.in_flight", "finalize"};
  std::string why = !p.propsOk ? "properties failed" : !p.sameHostReachable ? "can_connect refuses a same-host peer: " + p.unreachableReason : "";
  if (!why.empty()) {
    for (const char* g : groups) r.skip(g, why);
    return;
  }
  std::unique_ptr<Session> s;
  r.run("connect.loopback", [&] {
    s = std::make_unique<Session>(o, *p.table, p.props);
    checkConnect(*s);
  });
  if (!s) {
    for (size_t i = 1; i < sizeof(groups) / sizeof(groups[0]); ++i) r.skip(groups[i], "no session (see connect.loopback)");
    return;
  }
  runMemoryChecks(r, *s);
  runDataPathChecks(o, r, *s);
  runCloseChecks(o, r, *s);
  r.run("finalize", [&] { s->finish(); });
}

}  // namespace plugboard::check
