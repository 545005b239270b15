// libFuzzer target: the ethernet plugin's receiver, fed the byte streams a
// peer sends after a correct handshake (issue 15). Built twice:
// fuzz_ethernet_stream (the frame stream only) and, with
// -DPB_FUZZ_STRIPES=2, fuzz_ethernet_stripes (the frame stream and two
// stripe sockets, whose piece streams the stripe receivers parse).
//
// The plugin is compiled into this binary and driven through its C ABI
// table as the core drives it: rank 1 here, with one registered region
// between two guard zones. A stand-in rank 0 speaks the handshake over
// loopback, then sends the input as its frame stream and hangs up. Inputs
// reach past the region checks through two placeholders: any 8 bytes equal
// to kRegionPlaceholder or kKeyPlaceholder (little-endian) are replaced by
// the region's id or its secret key before sending, so the seed corpus
// holds well-formed frames that mutations start from. With stripe sockets
// the input is cut at each 8-byte kSeparator: the frame stream, then the
// stream of stripe socket 1, then of socket 2 (missing parts are empty).
//
// Must hold for every input: the connection ends within kEndWait once the
// peer hangs up (proxy_progress reports an error, or, after the peer's
// CLOSE, a post is refused) and no byte of either guard zone changes. A crash, a sanitizer report, a hang past
// libFuzzer's -timeout or a broken guard is a finding.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <plugboard/transport.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

extern "C" const pb_transport_v1* plugboard_transport_v1(uint32_t core_major, uint32_t core_minor);

namespace {

constexpr uint64_t kRegionPlaceholder = 0x4e4f494745524242ull;  // "BBREGION"
constexpr uint64_t kKeyPlaceholder = 0x59454b5445524342ull;     // "BCRETKEY"
constexpr uint64_t kSeparator = 0x4b434f534b545842ull;          // "BXTKSOCK"
#ifndef PB_FUZZ_STRIPES
#define PB_FUZZ_STRIPES 0
#endif
/// Stripe sockets the stand-in opens besides its frame stream.
constexpr uint32_t kStripes = PB_FUZZ_STRIPES;
constexpr const char* kName = kStripes ? "fuzz_ethernet_stripes" : "fuzz_ethernet_stream";
/// Room for two 4 KiB pieces when striped (pieces are 4 KiB-aligned parts).
constexpr size_t kGuard = 256, kData = kStripes ? 8192 : 1024;
constexpr auto kEndWait = std::chrono::seconds(5);
constexpr uint32_t kWireVersion = 2;

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "%s: %s\n", kName, why.c_str());
  std::abort();
}

void putLE32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(uint8_t(v >> (8 * i)));
}

uint64_t loadLE64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

/// The core's host services, reduced to what the plugin asks: settings
/// (declared defaults, stripe_sockets 0: one frame stream, as the stand-in
/// speaks), logs dropped, rank 1 of 2.
struct Host {
  std::map<std::string, std::string> values{{"stripe_sockets", "0"}, {"iface", "lo"}};
  std::map<std::string, std::string> defaults;
  pb_host_services_v1 services{};

  Host() {
    services.struct_size = sizeof(services);
    services.abi_major = PB_TRANSPORT_ABI_MAJOR;
    services.abi_minor = PB_TRANSPORT_ABI_MINOR;
    services.core = this;
    services.log = [](void*, pb_log_level, const char*) {};
    services.declare_setting = [](void* core, const pb_setting_decl_v1* d) {
      static_cast<Host*>(core)->defaults[d->key] = d->default_value ? d->default_value : "";
      return PB_OK;
    };
    services.get_setting = [](void* core, const char* key, char* buf, size_t len, size_t* needed) {
      auto* self = static_cast<Host*>(core);
      auto v = self->values.count(key) ? self->values[key] : self->defaults.count(key) ? self->defaults[key] : "";
      *needed = v.size() + 1;
      if (*needed > len) return PB_ERR_NOMEM;
      std::memcpy(buf, v.c_str(), v.size() + 1);
      return PB_OK;
    };
    services.rank = 1;
    services.nranks = 2;
    services.hostname = "fuzzhost";
    services.signal_landed = [](void*) {};
  }
};

/// Rank 0 as raw sockets: listens for the plugin's outbound stream and
/// connects to the plugin's listener as rank 0's frame stream and kStripes
/// stripe sockets.
class StandIn {
 public:
  StandIn() {
    listen_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = loopback(0);
    if (bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(listen_, 4) != 0)
      die("stand-in cannot listen");
    socklen_t len = sizeof(a);
    getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~StandIn() {
    for (int fd : outs_) closeAbruptly(fd);
    for (int fd : {listen_, in_})
      if (fd >= 0) closeAbruptly(fd);
  }

  /// Address blob: "PBEA", version, rank 0, IPv4, port, 127.0.0.1, zero-padded to 32.
  std::vector<uint8_t> blob() const {
    std::vector<uint8_t> b;
    putLE32(b, 0x41454250);
    putLE32(b, kWireVersion);
    putLE32(b, 0);
    b.push_back(4), b.push_back(0);
    b.push_back(uint8_t(port_)), b.push_back(uint8_t(port_ >> 8));
    for (uint8_t byte : {127, 0, 0, 1}) b.push_back(byte);
    b.resize(32, 0);
    return b;
  }

  /// Connects rank 0's sockets to the plugin's listener (port in its blob),
  /// each starting with its hello: socket 0 the frame stream, 1.. stripes.
  void greet(const std::vector<uint8_t>& pluginBlob) {
    const uint16_t port = uint16_t(pluginBlob[14] | (pluginBlob[15] << 8));
    for (uint32_t i = 0; i <= kStripes; ++i) {
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a = loopback(port);
      if (!connectTo(fd, a)) die(std::string("stand-in cannot connect socket ") + std::to_string(i) + ": " + std::strerror(errno));
      outs_.push_back(fd);
      std::vector<uint8_t> hello;
      for (uint32_t v : {0x48454250u, kWireVersion, 0u, 1u, i, kStripes}) putLE32(hello, v);
      sendAll(i, hello);
    }
  }

  /// Accepts the plugin's own stream and reads its 24-byte hello.
  void accept() {
    do in_ = ::accept(listen_, nullptr, nullptr);
    while (in_ < 0 && errno == EINTR);
    uint8_t hello[24];
    size_t got = 0;
    while (in_ >= 0 && got < sizeof(hello)) {
      const ssize_t n = recv(in_, hello + got, sizeof(hello) - got, 0);
      if (n <= 0 && !(n < 0 && errno == EINTR)) break;
      if (n > 0) got += size_t(n);
    }
    if (got < sizeof(hello)) die("no hello from the plugin");
  }

  /// Sends as much of bytes on socket i as the plugin takes (it may stop
  /// reading after a bad frame).
  void sendAll(uint32_t i, const std::vector<uint8_t>& bytes) {
    const uint8_t* data = bytes.data();
    size_t size = bytes.size();
    while (size > 0) {
      ssize_t n = send(outs_[i], data, size, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      data += n, size -= size_t(n);
    }
  }

  /// Every stream ends: the plugin reads end-of-file after the input.
  void hangUp() {
    for (int fd : outs_) shutdown(fd, SHUT_WR);
  }

 private:
  /// connect() that outlasts signals (libFuzzer's timer interrupts calls):
  /// an interrupted connect goes on in the background, so wait for it.
  static bool connectTo(int fd, const sockaddr_in& a) {
    if (connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0) return true;
    if (errno != EINTR) return false;
    pollfd p{fd, POLLOUT, 0};
    while (poll(&p, 1, 5000) < 0)
      if (errno != EINTR) return false;
    int error = 0;
    socklen_t len = sizeof(error);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) return false;
    errno = error;
    return error == 0;
  }
  /// Closes with a reset, leaving no TIME_WAIT behind: thousands of inputs
  /// a minute would otherwise use up loopback's ephemeral ports.
  static void closeAbruptly(int fd) {
    const linger reset{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    close(fd);
  }
  static sockaddr_in loopback(uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
  }
  int listen_ = -1, in_ = -1;
  std::vector<int> outs_;
  uint16_t port_ = 0;
};

/// One context and one registered region (guard | data | counter | guard)
/// for the whole run; a fresh connection per input.
struct Fixture {
  const pb_transport_v1* t = plugboard_transport_v1(PB_TRANSPORT_ABI_MAJOR, PB_TRANSPORT_ABI_MINOR);
  Host host;
  pb_plugin_ctx* ctx = nullptr;
  std::vector<uint8_t> mem = std::vector<uint8_t>(kGuard + kData + 8 + kGuard, 0xa5);
  pb_mr* mr = nullptr;
  uint64_t region = 0, key = 0;
  std::vector<uint8_t> packedKey;

  Fixture() {
    if (!t || t->init(&host.services, &ctx) != PB_OK) die("init failed");
    if (t->register_memory(ctx, mem.data() + kGuard, kData + 8, PB_MEM_HOST, &mr) != PB_OK) die("register failed");
    uint8_t packed[64];
    size_t len = sizeof(packed);
    if (t->pack_rkey(ctx, mr, packed, &len) != PB_OK || len < 24) die("pack_rkey failed");
    region = loadLE64(packed + 8);
    key = loadLE64(packed + 16);
    packedKey.assign(packed, packed + len);
  }

  void checkGuards() const {
    for (size_t i = 0; i < kGuard; ++i)
      if (mem[i] != 0xa5 || mem[kGuard + kData + 8 + i] != 0xa5)
        die("a byte outside the registered region changed (guard byte " + std::to_string(i) + ")");
  }
};

/// The input cut at each kSeparator into kStripes + 1 streams (the last
/// takes the rest, separators included); missing ones are empty.
std::vector<std::vector<uint8_t>> split(const std::vector<uint8_t>& input) {
  std::vector<std::vector<uint8_t>> parts(kStripes + 1);
  size_t part = 0, begin = 0;
  for (size_t i = 0; part < kStripes && i + 8 <= input.size(); ++i) {
    if (loadLE64(&input[i]) != kSeparator) continue;
    parts[part++].assign(input.begin() + ptrdiff_t(begin), input.begin() + ptrdiff_t(i));
    begin = i + 8;
    i += 7;
  }
  parts[part].assign(input.begin() + ptrdiff_t(std::min(begin, input.size())), input.end());
  return parts;
}

/// The input with the placeholders replaced by the region's id and key.
std::vector<uint8_t> substitute(const uint8_t* data, size_t size, const Fixture& f) {
  std::vector<uint8_t> s(data, data + size);
  for (size_t i = 0; i + 8 <= s.size(); ++i) {
    const uint64_t v = loadLE64(&s[i]);
    if (v != kRegionPlaceholder && v != kKeyPlaceholder) continue;
    const uint64_t real = v == kRegionPlaceholder ? f.region : f.key;
    for (int b = 0; b < 8; ++b) s[i + b] = uint8_t(real >> (8 * b));
    i += 7;
  }
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture f;
  pb_peer_info_v1 peer{};
  peer.struct_size = sizeof(peer);
  peer.local_rank = 1;
  peer.peer_rank = 0;
  peer.local_host = peer.peer_host = "fuzzhost";
  peer.same_host = 1;
  peer.local_ranks = 2;
  pb_conn* conn = nullptr;
  uint8_t blob[256];
  size_t blobLen = sizeof(blob);
  if (f.t->setup(f.ctx, &peer, &conn, blob, &blobLen) != PB_OK) die("setup failed");
  {
    StandIn rank0;
    rank0.greet(std::vector<uint8_t>(blob, blob + blobLen));
    const auto standInBlob = rank0.blob();
    pb_status st = PB_IN_PROGRESS;
    const auto connectBy = std::chrono::steady_clock::now() + kEndWait;
    while (st == PB_IN_PROGRESS && std::chrono::steady_clock::now() < connectBy)
      st = f.t->proxy_connect(conn, standInBlob.data(), standInBlob.size());
    if (st != PB_OK) die(std::string("proxy_connect: ") + f.t->last_error(f.ctx));
    rank0.accept();

    const auto streams = split(substitute(data, size, f));
    for (uint32_t i = kStripes + 1; i-- > 0;) rank0.sendAll(i, streams[i]);  // pieces first, then the frame stream
    rank0.hangUp();
    // The peer is gone: the connection must end, whatever the stream held.
    // A zero-byte write to our own region probes a cleanly closed one.
    pb_rkey* self = nullptr;
    if (f.t->import_rkey(conn, f.packedKey.data(), f.packedKey.size(), &self) != PB_OK) die("import_rkey failed");
    uint64_t done = 0;
    bool ended = false;
    const auto endBy = std::chrono::steady_clock::now() + kEndWait;
    while (!ended && std::chrono::steady_clock::now() < endBy) {
      ended = f.t->proxy_progress(conn, &done) != PB_OK || f.t->write(conn, f.mr, 0, self, 0, 0) != PB_OK;
      if (!ended) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (!ended) die("the connection still works after its peer hung up");
    f.t->release_rkey(conn, self);
  }
  f.t->free(conn);  // joins the connection's threads: nothing touches mem after this
  f.checkGuards();
  return 0;
}
