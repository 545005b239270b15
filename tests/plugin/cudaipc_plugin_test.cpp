// Tests of libplugboard-cudaipc.so through its C ABI only, as the core uses
// it: dlopen, a fake host-services table, real GPUs. CUDA refuses to open a
// process's own IPC handles, and CUDA does not survive fork, so every test
// that touches CUDA runs its ranks in forked children (the gtest process
// itself never initialises CUDA) that swap blobs over a socketpair, the way
// the core's bootstrap would. A rank's failure comes back as a message
// naming the rank and the check. Without a GPU, every GPU test skips with
// "no CUDA device"; the checks of loading and of init without a device run
// everywhere.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <plugboard/transport.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cudaipc_test_kernels.hpp"
#include "gpu_test_util.hpp"

#ifndef PLUGBOARD_CUDAIPC_PLUGIN
#error "PLUGBOARD_CUDAIPC_PLUGIN must name libplugboard-cudaipc.so"
#endif

using cudaipc_test::patternByte;

namespace {

using Clock = std::chrono::steady_clock;
/// Longest single wait inside a rank (a completion, a message, a counter).
constexpr auto kWait = std::chrono::seconds(30);
/// Whole forked test; the parent kills ranks still running after it.
constexpr auto kTestTimeout = std::chrono::seconds(150);
constexpr size_t kMiB = size_t(1) << 20;

/// CUDA devices here, counted once in a throwaway child (gpu_test_util.hpp)
/// so this process never initialises CUDA.
int gpuCount() {
  static const int count = gpuCountWithoutInit();
  return count;
}

/// Skips unless n GPUs exist, without initialising CUDA in this process.
#define REQUIRE_GPUS(n)                                                                   \
  do {                                                                                    \
    if (gpuCount() == 0) GTEST_SKIP() << "no CUDA device";                                \
    if (gpuCount() < (n)) GTEST_SKIP() << "needs " << (n) << " CUDA devices, found " << gpuCount(); \
  } while (0)

// ---- failing and skipping inside a forked rank ------------------------------

/// Thrown by a failed check in a rank; its text goes to the parent.
struct RankFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// Thrown by a rank that cannot run the test here (the parent skips it).
struct RankSkip : std::runtime_error {
  using std::runtime_error::runtime_error;
};

#define RCHECK(cond, msg)                                                                   \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::ostringstream os_;                                                               \
      os_ << __FILE__ << ":" << __LINE__ << ": check failed: " #cond ": " << msg;           \
      throw RankFailure(os_.str());                                                         \
    }                                                                                       \
  } while (0)

#define RCUDA(call)                                                                         \
  do {                                                                                      \
    cudaError_t e_ = (call);                                                                \
    RCHECK(e_ == cudaSuccess, #call " returned " << cudaGetErrorName(e_) << " (" << cudaGetErrorString(e_) << ")"); \
  } while (0)

#define RCU(call)                                                                           \
  do {                                                                                      \
    CUresult r_ = (call);                                                                   \
    RCHECK(r_ == CUDA_SUCCESS, #call " returned driver error " << static_cast<int>(r_));    \
  } while (0)

// ---- the plugin ------------------------------------------------------------

/// The plugin's table, loaded the way the core loads it. Loading touches no
/// CUDA, so the gtest process may do it.
const pb_transport_v1* plugin() {
  static const pb_transport_v1* table = []() -> const pb_transport_v1* {
    void* handle = dlopen(PLUGBOARD_CUDAIPC_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (!handle) return nullptr;
    auto entry = reinterpret_cast<pb_transport_entry_v1_fn>(dlsym(handle, PB_TRANSPORT_ENTRY_SYMBOL_V1));
    return entry ? entry(PB_TRANSPORT_ABI_MAJOR, PB_TRANSPORT_ABI_MINOR) : nullptr;
  }();
  return table;
}

/// A stand-in for the core's host services. cudaipc declares no settings,
/// so every lookup is refused.
struct FakeHost {
  FakeHost(int rank, std::string host) : hostname(std::move(host)) {
    services.struct_size = sizeof(services);
    services.abi_major = PB_TRANSPORT_ABI_MAJOR;
    services.abi_minor = PB_TRANSPORT_ABI_MINOR;
    services.core = this;
    services.log = [](void* core, pb_log_level, const char* message) {
      static_cast<FakeHost*>(core)->logs.push_back(message);
    };
    services.declare_setting = [](void*, const pb_setting_decl_v1*) { return PB_OK; };
    services.get_setting = [](void*, const char*, char*, size_t, size_t*) { return PB_ERR_INVALID; };
    services.rank = rank;
    services.nranks = 2;
    services.hostname = hostname.c_str();
  }
  std::string hostname;
  std::vector<std::string> logs;
  pb_host_services_v1 services{};
};

/// Peer description as the core would build it.
struct Peer {
  Peer(int local, int peer, std::string localHost, std::string peerHost)
      : localHost(std::move(localHost)), peerHost(std::move(peerHost)) {
    info.struct_size = sizeof(info);
    info.local_rank = local;
    info.peer_rank = peer;
    info.local_host = this->localHost.c_str();
    info.peer_host = this->peerHost.c_str();
    info.same_host = this->localHost == this->peerHost;
  }
  std::string localHost, peerHost;
  pb_peer_info_v1 info{};
};

// ---- two ranks talking: a socketpair, one per test --------------------------

/// The out-of-band channel between the two ranks (the core's bootstrap).
class Link {
 public:
  explicit Link(int fd) : fd_(fd) {}
  void send(const void* data, size_t n) {
    auto* p = static_cast<const char*>(data);
    while (n > 0) {
      ssize_t k = ::send(fd_, p, n, MSG_NOSIGNAL);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) throw RankFailure("the peer rank is gone (send failed)");
      p += k;
      n -= static_cast<size_t>(k);
    }
  }
  void recv(void* data, size_t n) {
    auto* p = static_cast<char*>(data);
    auto deadline = Clock::now() + kWait;
    while (n > 0) {
      pollfd pfd{fd_, POLLIN, 0};
      int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
      if (left <= 0) throw RankFailure("no message from the peer rank within the wait limit");
      if (::poll(&pfd, 1, left) <= 0) continue;
      ssize_t k = ::recv(fd_, p, n, 0);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) throw RankFailure("the peer rank exited (see its own message)");
      p += k;
      n -= static_cast<size_t>(k);
    }
  }
  void sendU64(uint64_t v) { send(&v, sizeof(v)); }
  uint64_t recvU64() {
    uint64_t v = 0;
    recv(&v, sizeof(v));
    return v;
  }
  /// Receives a u64 and fails unless it is expected.
  void expect(uint64_t expected, const char* what) {
    uint64_t got = recvU64();
    RCHECK(got == expected, "expected message " << what << " (" << expected << "), got " << got);
  }
  void sendBlob(const std::vector<uint8_t>& blob) {
    sendU64(blob.size());
    send(blob.data(), blob.size());
  }
  std::vector<uint8_t> recvBlob() {
    std::vector<uint8_t> blob(recvU64());
    recv(blob.data(), blob.size());
    return blob;
  }

 private:
  int fd_;
};

/// Messages the ranks exchange (any distinct values would do).
enum Msg : uint64_t { kReady = 0x100, kCheck, kChecked, kDone, kBye, kSkip };

using RankBody = std::function<void(Link&)>;

/// What one rank process did.
struct RankOutcome {
  int rank = -1;
  int exitCode = -1;
  int signal = 0;
  bool timedOut = false;
  std::string message;
};
constexpr int kSkipExit = 77;

[[noreturn]] void runChild(int rank, const RankBody& body, int linkFd, int msgFd) {
  std::string message;
  int code = 0;
  try {
    Link link(linkFd);
    body(link);
  } catch (const RankSkip& e) {
    message = e.what();
    code = kSkipExit;
  } catch (const std::exception& e) {
    message = "rank " + std::to_string(rank) + ": " + e.what();
    code = 1;
  } catch (...) {
    message = "rank " + std::to_string(rank) + ": unknown exception";
    code = 1;
  }
  if (!message.empty()) {
    ssize_t ignored = ::write(msgFd, message.data(), std::min<size_t>(message.size(), 8192));
    (void)ignored;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(code);
}

/// Forks one process per body (rank r runs bodies[r]); two ranks share a
/// socketpair. Kills ranks still running after the timeout.
std::vector<RankOutcome> runRanks(const std::vector<RankBody>& bodies) {
  int sv[2] = {-1, -1};
  if (bodies.size() == 2 && ::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) throw std::runtime_error("socketpair");
  std::vector<RankOutcome> out(bodies.size());
  std::vector<pid_t> pids(bodies.size(), -1);
  std::vector<int> pipes(bodies.size(), -1);
  for (size_t r = 0; r < bodies.size(); ++r) {
    out[r].rank = static_cast<int>(r);
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe");
    std::fflush(stdout);
    std::fflush(stderr);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      if (bodies.size() == 2) ::close(sv[1 - r]);
      runChild(static_cast<int>(r), bodies[r], bodies.size() == 2 ? sv[r] : -1, fds[1]);
    }
    ::close(fds[1]);
    pids[r] = pid;
    pipes[r] = fds[0];
  }
  if (bodies.size() == 2) {
    ::close(sv[0]);
    ::close(sv[1]);
  }
  auto deadline = Clock::now() + kTestTimeout;
  size_t running = bodies.size();
  while (running > 0) {
    for (size_t r = 0; r < bodies.size(); ++r) {
      int status = 0;
      if (pids[r] > 0 && ::waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        if (WIFEXITED(status)) out[r].exitCode = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) out[r].signal = WTERMSIG(status);
        pids[r] = -1;
        --running;
      }
    }
    if (running > 0 && Clock::now() > deadline) {
      for (size_t r = 0; r < bodies.size(); ++r) {
        if (pids[r] <= 0) continue;
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], nullptr, 0);
        out[r].timedOut = true;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (size_t r = 0; r < bodies.size(); ++r) {
    char buf[1024];
    ssize_t n;
    while ((n = ::read(pipes[r], buf, sizeof(buf))) > 0) out[r].message.append(buf, static_cast<size_t>(n));
    ::close(pipes[r]);
  }
  return out;
}

/// Runs the ranks and reports each failure; a rank that skipped (and no
/// failure elsewhere) skips the test with its reason.
#define RUN_RANKS(...)                                                                          \
  do {                                                                                          \
    auto out_ = runRanks({__VA_ARGS__});                                                        \
    std::string skip_;                                                                          \
    for (const auto& o : out_) {                                                                \
      EXPECT_FALSE(o.timedOut) << "rank " << o.rank << " was killed after the test timeout";     \
      EXPECT_EQ(o.signal, 0) << "rank " << o.rank << " died of signal " << o.signal << ": " << o.message; \
      if (o.exitCode == kSkipExit) {                                                            \
        if (skip_.empty()) skip_ = o.message;                                                   \
        continue;                                                                               \
      }                                                                                         \
      if (!o.timedOut && o.signal == 0) {                                                       \
        EXPECT_EQ(o.exitCode, 0) << o.message;                                                  \
      }                                                                                         \
    }                                                                                           \
    if (!skip_.empty() && !HasFailure()) GTEST_SKIP() << skip_;                                  \
  } while (0)

// ---- one rank's plugin state, freed in ABI order -----------------------------

/// A plugin context of one rank on one GPU, with the connections, regions,
/// keys and device buffers made through it; the destructor releases them
/// in the order the core would (keys, connections, regions, context,
/// buffers) and never throws.
class Rank {
 public:
  Rank(int rank, int device, std::string host = "testhost") : rank_(rank), device_(device), host_(rank, host) {
    t = plugin();
    RCHECK(t, "cannot load " << PLUGBOARD_CUDAIPC_PLUGIN << ": " << dlerror());
    RCUDA(cudaSetDevice(device));
    RCUDA(cudaFree(nullptr));
    pb_status st = t->init(&host_.services, &ctx);
    RCHECK(st == PB_OK && ctx, "init: status " << st << ": " << t->last_error(nullptr));
  }
  ~Rank() { close(); }
  Rank(const Rank&) = delete;
  Rank& operator=(const Rank&) = delete;

  /// Releases everything (idempotent).
  void close() noexcept {
    for (auto& [conn, rkey] : rkeys_) t->release_rkey(conn, rkey);
    rkeys_.clear();
    for (pb_conn* conn : conns_) t->free(conn);
    conns_.clear();
    for (pb_mr* mr : mrs_) t->deregister_memory(ctx, mr);
    mrs_.clear();
    if (ctx) t->finalize(ctx);
    ctx = nullptr;
    cudaSetDevice(device_);
    cudaDeviceSynchronize();
    for (void* p : buffers_) cudaFree(p);
    buffers_.clear();
    count_ = nullptr;
  }

  std::string err() const { return t->last_error(ctx); }
  int device() const { return device_; }
  const FakeHost& host() const { return host_; }

  /// setup() for a connection to peer; blob receives our address.
  pb_conn* setup(int peer, std::vector<uint8_t>* blob, const std::string& peerHost = "testhost") {
    RCUDA(cudaSetDevice(device_));
    Peer info(rank_, peer, host_.hostname, peerHost);
    pb_conn* conn = nullptr;
    blob->resize(256);
    size_t len = blob->size();
    pb_status st = t->setup(ctx, &info.info, &conn, blob->data(), &len);
    RCHECK(st == PB_OK && conn, "setup: status " << st << ": " << err());
    blob->resize(len);
    conns_.push_back(conn);
    return conn;
  }

  /// A connection to peer, its address swapped over link.
  pb_conn* connect(Link& link, int peer) {
    std::vector<uint8_t> ours;
    pb_conn* conn = setup(peer, &ours);
    link.sendBlob(ours);
    std::vector<uint8_t> theirs = link.recvBlob();
    pb_status st = PB_IN_PROGRESS;
    auto deadline = Clock::now() + kWait;
    while (st == PB_IN_PROGRESS && Clock::now() < deadline) st = t->proxy_connect(conn, theirs.data(), theirs.size());
    RCHECK(st == PB_OK, "proxy_connect: status " << st << ": " << err());
    return conn;
  }

  /// cudaMalloc'd buffer on our GPU, freed last.
  uint8_t* alloc(size_t n) {
    RCUDA(cudaSetDevice(device_));
    void* p = nullptr;
    RCUDA(cudaMalloc(&p, n));
    buffers_.push_back(p);
    return static_cast<uint8_t*>(p);
  }

  pb_mr* reg(void* ptr, size_t size) {
    pb_mr* mr = nullptr;
    pb_status st = t->register_memory(ctx, ptr, size, PB_MEM_CUDA, &mr);
    RCHECK(st == PB_OK && mr, "register_memory of " << size << " bytes: status " << st << ": " << err());
    mrs_.push_back(mr);
    return mr;
  }

  void deregister(pb_mr* mr) {
    pb_status st = t->deregister_memory(ctx, mr);
    RCHECK(st == PB_OK, "deregister_memory: " << err());
    mrs_.erase(std::find(mrs_.begin(), mrs_.end(), mr));
  }

  std::vector<uint8_t> pack(pb_mr* mr) {
    std::vector<uint8_t> key(512);
    size_t len = key.size();
    pb_status st = t->pack_rkey(ctx, mr, key.data(), &len);
    RCHECK(st == PB_OK, "pack_rkey: status " << st << ": " << err());
    key.resize(len);
    return key;
  }

  pb_rkey* import(pb_conn* conn, const std::vector<uint8_t>& key) {
    pb_rkey* rkey = nullptr;
    pb_status st = t->import_rkey(conn, key.data(), key.size(), &rkey);
    RCHECK(st == PB_OK && rkey, "import_rkey: status " << st << ": " << err());
    rkeys_.emplace_back(conn, rkey);
    return rkey;
  }

  void release(pb_conn* conn, pb_rkey* rkey) {
    pb_status st = t->release_rkey(conn, rkey);
    RCHECK(st == PB_OK, "release_rkey: " << err());
    rkeys_.erase(std::find(rkeys_.begin(), rkeys_.end(), std::make_pair(conn, rkey)));
  }

  /// free() of one connection (its keys first, as the core does).
  void freeConn(pb_conn* conn) {
    for (auto it = rkeys_.begin(); it != rkeys_.end();) {
      if (it->first == conn) {
        RCHECK(t->release_rkey(conn, it->second) == PB_OK, "release_rkey: " << err());
        it = rkeys_.erase(it);
      } else {
        ++it;
      }
    }
    RCHECK(t->free(conn) == PB_OK, "free: " << err());
    conns_.erase(std::find(conns_.begin(), conns_.end(), conn));
  }

  uint8_t* remotePointer(pb_conn* conn, pb_rkey* rkey) {
    void* p = nullptr;
    pb_status st = t->remote_pointer(conn, rkey, &p);
    RCHECK(st == PB_OK, "remote_pointer: status " << st << ": " << err());
    return static_cast<uint8_t*>(p);
  }

  uint64_t write(pb_conn* conn, pb_mr* src, size_t srcOff, pb_rkey* dst, size_t dstOff, size_t size) {
    pb_status st = t->write(conn, src, srcOff, dst, dstOff, size);
    RCHECK(st == PB_OK, "write of " << size << " bytes: status " << st << ": " << err());
    return ++posted_[conn];
  }
  uint64_t signal(pb_conn* conn, pb_rkey* dst, size_t off, uint64_t value) {
    pb_status st = t->signal(conn, dst, off, value);
    RCHECK(st == PB_OK, "signal: status " << st << ": " << err());
    return ++posted_[conn];
  }
  uint64_t writeSignal(pb_conn* conn, pb_mr* src, size_t srcOff, pb_rkey* dst, size_t dstOff, size_t size,
                       pb_rkey* sig, size_t sigOff, uint64_t value) {
    pb_status st = t->write_signal(conn, src, srcOff, dst, dstOff, size, sig, sigOff, value);
    RCHECK(st == PB_OK, "write_signal of " << size << " bytes: status " << st << ": " << err());
    return ++posted_[conn];
  }

  /// Polls proxy_progress until seq completed; completion never runs
  /// ahead of what was posted nor goes back.
  void waitCompleted(pb_conn* conn, uint64_t seq) {
    uint64_t done = 0, last = 0;
    auto deadline = Clock::now() + kWait;
    while (Clock::now() < deadline) {
      pb_status st = t->proxy_progress(conn, &done);
      RCHECK(st == PB_OK, "proxy_progress: status " << st << ": " << err());
      RCHECK(done <= posted_[conn], "completed " << done << " runs ahead of the " << posted_[conn] << " posted");
      RCHECK(done >= last, "completed went back from " << last << " to " << done);
      last = done;
      if (done >= seq) return;
      std::this_thread::yield();
    }
    RCHECK(false, "completion stuck at " << done << ", waiting for " << seq);
  }

  /// Host copy of n device bytes.
  std::vector<uint8_t> download(const void* dev, size_t n) {
    std::vector<uint8_t> out(n);
    RCUDA(cudaSetDevice(device_));
    RCUDA(cudaMemcpy(out.data(), dev, n, cudaMemcpyDeviceToHost));
    return out;
  }
  uint64_t readU64(const void* dev) {
    uint64_t v = 0;
    RCUDA(cudaMemcpy(&v, dev, sizeof(v), cudaMemcpyDeviceToHost));
    return v;
  }
  /// Mismatches of dev[0, n) against the pattern, counted on our GPU.
  unsigned long long mismatches(const uint8_t* dev, size_t n, uint64_t first, uint32_t seed) {
    RCUDA(cudaSetDevice(device_));
    if (!count_) count_ = reinterpret_cast<unsigned long long*>(alloc(sizeof(unsigned long long)));
    unsigned long long* count = count_;
    RCUDA(cudaMemset(count, 0, sizeof(*count)));
    RCUDA(cudaipc_test::countMismatches(dev, n, first, seed, count));
    RCUDA(cudaDeviceSynchronize());
    return readU64(count);
  }

  const pb_transport_v1* t = nullptr;
  pb_plugin_ctx* ctx = nullptr;

 private:
  int rank_;
  int device_;
  FakeHost host_;
  std::vector<pb_conn*> conns_;
  std::vector<pb_mr*> mrs_;
  std::vector<std::pair<pb_conn*, pb_rkey*>> rkeys_;
  std::vector<void*> buffers_;
  std::map<pb_conn*, uint64_t> posted_;
  unsigned long long* count_ = nullptr;  // mismatches()' device counter
};

/// Fails unless got[i] == patternByte(first + i, seed) for every i.
void expectPattern(const std::vector<uint8_t>& got, size_t begin, size_t n, uint64_t first, uint32_t seed,
                   const std::string& what) {
  for (size_t i = 0; i < n; ++i)
    RCHECK(got[begin + i] == patternByte(first + i, seed),
           what << ": byte " << i << " of " << n << " is " << int(got[begin + i]) << ", expected "
                << int(patternByte(first + i, seed)));
}

/// Fails unless got[begin, end) all equal fill.
void expectFill(const std::vector<uint8_t>& got, size_t begin, size_t end, uint8_t fill, const std::string& what) {
  for (size_t i = begin; i < end; ++i)
    RCHECK(got[i] == fill, what << ": byte " << i << " outside the write changed to " << int(got[i]));
}

/// Expects status from call and a reason containing needle.
#define RSTATUS(call, status, rank, needle)                                                               \
  do {                                                                                                    \
    pb_status st_ = (call);                                                                               \
    RCHECK(st_ == (status), #call " returned " << st_ << ", expected " << (status) << ": " << (rank).err()); \
    RCHECK((rank).err().find(needle) != std::string::npos, #call ": reason lacks '" << (needle) << "': " << (rank).err()); \
  } while (0)

/// Where the two ranks of a pair test run.
struct Placement {
  const char* name;
  int dev0;  ///< GPU of rank 0 (writes, imports).
  int dev1;  ///< GPU of rank 1 (owns the target memory).
};

/// gtest (and ctest's test names) print a placement by its name.
void PrintTo(const Placement& p, std::ostream* os) { *os << p.name; }

/// Rank 0 is done with rank 1's memory: release it all, then tell rank 1,
/// which frees its buffers only after (freeing exported memory that a peer
/// still maps is undefined behaviour in CUDA).
void importerDone(Rank& r, Link& link) {
  r.close();
  link.sendU64(kBye);
}
void exporterDone(Link& link) { link.expect(kBye, "bye"); }

// ---- loading: no CUDA needed -----------------------------------------------

TEST(CudaIpcPlugin, TableDescribesTheTransport) {
  const pb_transport_v1* t = plugin();
  ASSERT_NE(t, nullptr) << "dlopen " << PLUGBOARD_CUDAIPC_PLUGIN << ": " << dlerror();
  EXPECT_EQ(t->abi_major, uint32_t(PB_TRANSPORT_ABI_MAJOR));
  EXPECT_EQ(t->abi_minor, uint32_t(PB_TRANSPORT_ABI_MINOR));
  EXPECT_EQ(std::string(t->name), "cudaipc");
  EXPECT_GE(t->struct_size, sizeof(pb_transport_v1));
  EXPECT_NE(t->write_signal, nullptr);
  EXPECT_NE(t->remote_pointer, nullptr) << "PB_CAP_MAPPED needs remote_pointer";
  void* handle = dlopen(PLUGBOARD_CUDAIPC_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr);
  auto entry = reinterpret_cast<pb_transport_entry_v1_fn>(dlsym(handle, PB_TRANSPORT_ENTRY_SYMBOL_V1));
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry(2, 0), nullptr);
  dlclose(handle);
}

// Runs everywhere: what the core's "auto" transport list sees on a machine
// without GPU (or driver), so it can skip cudaipc with a reason.
TEST(CudaIpcPlugin, InitWithoutDeviceFailsWithReason) {
  ASSERT_NE(plugin(), nullptr);
  RUN_RANKS([](Link&) {
    setenv("CUDA_VISIBLE_DEVICES", "", 1);  // before any CUDA call in this process
    FakeHost host(0, "testhost");
    pb_plugin_ctx* ctx = reinterpret_cast<pb_plugin_ctx*>(&host);  // must be overwritten
    pb_status st = plugin()->init(&host.services, &ctx);
    RCHECK(st == PB_ERR_UNSUPPORTED, "init returned " << st << ": " << plugin()->last_error(nullptr));
    RCHECK(ctx == nullptr, "init failed but left a context");
    std::string why = plugin()->last_error(nullptr);
    RCHECK(why.find("no CUDA device: cudaGetDeviceCount returned") != std::string::npos, why);
  });
}

TEST(CudaIpcPlugin, InitWithWrongHostMajorFailsWithReason) {
  ASSERT_NE(plugin(), nullptr);
  FakeHost host(0, "testhost");
  host.services.abi_major = 7;
  pb_plugin_ctx* ctx = reinterpret_cast<pb_plugin_ctx*>(&host);
  EXPECT_EQ(plugin()->init(&host.services, &ctx), PB_ERR_VERSION);  // refused before any CUDA call
  EXPECT_EQ(ctx, nullptr);
  EXPECT_NE(std::string(plugin()->last_error(nullptr)).find("ABI 7."), std::string::npos)
      << plugin()->last_error(nullptr);
}

// ---- one rank ----------------------------------------------------------------

TEST(CudaIpcPlugin, PropertiesAndReachability) {
  REQUIRE_GPUS(1);
  RUN_RANKS([](Link&) {
    Rank r(0, 0);
    pb_transport_properties_v1 props{};
    props.struct_size = sizeof(props);
    RCHECK(r.t->properties(r.ctx, &props) == PB_OK, r.err());
    RCHECK(props.mem_types == uint32_t(PB_MEM_CUDA), "mem_types " << props.mem_types);
    RCHECK(props.flags == uint32_t(PB_CAP_ONE_SIDED_WRITE | PB_CAP_ATOMIC_SIGNAL | PB_CAP_NEEDS_PROXY |
                                   PB_CAP_SAME_HOST_ONLY | PB_CAP_MAPPED),
           "flags " << props.flags);
    RCHECK(props.bandwidth_gbps > 10 && props.latency_us > 0, "estimates " << props.bandwidth_gbps << " " << props.latency_us);
    RCHECK(props.max_address_size > 0 && props.max_rkey_size > 0, "sizes");

    int cost = -7;
    char reason[256] = "x";
    Peer local(0, 1, "testhost", "testhost");
    RCHECK(r.t->can_connect(r.ctx, &local.info, &cost, reason, sizeof(reason)) == PB_OK, r.err());
    RCHECK(cost == 10, "same-host cost " << cost);
    Peer remote(0, 3, "testhost", "otherhost");
    RCHECK(r.t->can_connect(r.ctx, &remote.info, &cost, reason, sizeof(reason)) == PB_OK, r.err());
    RCHECK(cost < 0, "different-host cost " << cost);
    RCHECK(std::string(reason).find("different host") != std::string::npos, reason);
    RCHECK(std::string(reason).find("otherhost") != std::string::npos, reason);
    char tiny[8];
    RCHECK(r.t->can_connect(r.ctx, &remote.info, &cost, tiny, sizeof(tiny)) == PB_OK, r.err());
    RCHECK(std::strlen(tiny) == sizeof(tiny) - 1, "reason must be truncated and terminated");
  });
}

TEST(CudaIpcPlugin, RegistrationRefusesWhatItCannotShare) {
  REQUIRE_GPUS(1);
  RUN_RANKS([](Link&) {
    Rank r(0, 0);
    pb_mr* mr = reinterpret_cast<pb_mr*>(&r);
    std::vector<char> host(4096);
    RSTATUS(r.t->register_memory(r.ctx, host.data(), host.size(), PB_MEM_HOST, &mr), PB_ERR_UNSUPPORTED, r,
            "cudaipc moves GPU memory only");
    RCHECK(mr == nullptr, "a failed registration left a handle");
    RSTATUS(r.t->register_memory(r.ctx, host.data(), host.size(), PB_MEM_CUDA, &mr), PB_ERR_INVALID, r,
            "not memory CUDA knows");
    void* pinned = nullptr;
    RCUDA(cudaMallocHost(&pinned, 4096));
    RSTATUS(r.t->register_memory(r.ctx, pinned, 4096, PB_MEM_CUDA, &mr), PB_ERR_INVALID, r, "not GPU memory");
    RCUDA(cudaFreeHost(pinned));
    uint8_t* dev = r.alloc(kMiB);
    RSTATUS(r.t->register_memory(r.ctx, dev + 4096, 4 * kMiB, PB_MEM_CUDA, &mr), PB_ERR_INVALID, r,
            "runs past the end of its CUDA allocation");
    RSTATUS(r.t->register_memory(r.ctx, nullptr, 64, PB_MEM_CUDA, &mr), PB_ERR_INVALID, r, "NULL pointer");
    void* pooled = nullptr;
    RCUDA(cudaMallocAsync(&pooled, kMiB, nullptr));
    RCUDA(cudaStreamSynchronize(nullptr));
    RSTATUS(r.t->register_memory(r.ctx, pooled, kMiB, PB_MEM_CUDA, &mr), PB_ERR_UNSUPPORTED, r,
            "stream-ordered memory pool");
    RCUDA(cudaFreeAsync(pooled, nullptr));
    RCUDA(cudaStreamSynchronize(nullptr));

    // What it can share: an interior range, the whole allocation, nothing.
    pb_mr* inner = r.reg(dev + 4096, 8192);
    pb_mr* whole = r.reg(dev, kMiB);
    pb_mr* empty = r.reg(nullptr, 0);
    uint8_t buf[512];
    size_t len = 4;
    RSTATUS(r.t->pack_rkey(r.ctx, inner, buf, &len), PB_ERR_INVALID, r, "smaller than");
    pb_transport_properties_v1 props{};
    props.struct_size = sizeof(props);
    RCHECK(r.t->properties(r.ctx, &props) == PB_OK, r.err());
    RCHECK(len == props.max_rkey_size, "a failed pack reports the size it needs: " << len);
    RCHECK(r.pack(whole).size() == props.max_rkey_size, "key size");
    RCHECK(r.pack(empty).size() == props.max_rkey_size, "key size");
    r.deregister(inner);
    RSTATUS(r.t->deregister_memory(r.ctx, inner), PB_ERR_INVALID, r, "not a region registered");
  });
}

// Two contexts of one process (two ranks as threads would be): connection
// blobs are checked, and a key from our own process maps to the exporter's
// own pointer (CUDA refuses to open a process's own IPC handles).
TEST(CudaIpcPlugin, OneProcessTwoContexts) {
  REQUIRE_GPUS(1);
  RUN_RANKS([](Link&) {
    int n = 0;
    RCUDA(cudaGetDeviceCount(&n));
    Rank r0(0, 0);
    Rank r1(1, n > 1 ? 1 : 0);
    std::vector<uint8_t> b0, b1, b2;
    pb_conn* c0 = r0.setup(1, &b0);
    pb_conn* c1 = r1.setup(0, &b1);
    RCHECK(b0.size() == b1.size() && !b0.empty(), "address sizes");

    std::vector<uint8_t> bad = b1;
    RSTATUS(r0.t->proxy_connect(c0, bad.data(), bad.size() - 1), PB_ERR_INVALID, r0, "a cudaipc address is");
    bad[0] ^= 0xff;
    RSTATUS(r0.t->proxy_connect(c0, bad.data(), bad.size()), PB_ERR_INVALID, r0, "bad magic");
    bad = b1;
    bad[16] ^= 0x5a;  // machine hash (README: address blob layout)
    RSTATUS(r0.t->proxy_connect(c0, bad.data(), bad.size()), PB_ERR_REMOTE, r0, "another machine");
    pb_conn* c2 = r0.setup(2, &b2);  // a blob of rank 0 handed to the connection for rank 1
    RSTATUS(r0.t->proxy_connect(c0, b2.data(), b2.size()), PB_ERR_REMOTE, r0, "came from rank 0");
    r0.freeConn(c2);

    uint64_t done = 7;
    RSTATUS(r0.t->flush(c0), PB_ERR_INVALID, r0, "not connected");
    RCHECK(r0.t->proxy_progress(c0, &done) == PB_OK && done == 0, "progress before any post: " << done);
    RCHECK(r0.t->proxy_connect(c0, b1.data(), b1.size()) == PB_OK, r0.err());
    RCHECK(r1.t->proxy_connect(c1, b0.data(), b0.size()) == PB_OK, r1.err());
    RCHECK(r0.t->proxy_connect(c0, b1.data(), b1.size()) == PB_OK, "a second proxy_connect: " << r0.err());

    uint8_t* target = r1.alloc(kMiB);
    RCUDA(cudaMemset(target, 0, kMiB));
    pb_mr* tmr = r1.reg(target, kMiB);
    pb_rkey* rk = r0.import(c0, r1.pack(tmr));
    RCHECK(r0.remotePointer(c0, rk) == target, "same-process import must map to the exporter's own pointer");
    uint8_t* src = r0.alloc(kMiB);
    RCUDA(cudaipc_test::fillPattern(src, kMiB, 0, 21));
    RCUDA(cudaDeviceSynchronize());
    pb_mr* smr = r0.reg(src, kMiB);
    r0.waitCompleted(c0, r0.write(c0, smr, 0, rk, 0, kMiB));
    RCHECK(r1.mismatches(target, kMiB, 0, 21) == 0, "same-process write");
    // A kernel on rank 0's GPU writes through the pointer (peer access across GPUs).
    RCUDA(cudaSetDevice(r0.device()));
    RCUDA(cudaipc_test::fillPattern(r0.remotePointer(c0, rk), 4096, 0, 22));
    RCUDA(cudaDeviceSynchronize());
    RCHECK(r1.mismatches(target, 4096, 0, 22) == 0, "same-process kernel write");
  });
}

// ---- two ranks in two processes ----------------------------------------------

class CudaIpcPairTest : public ::testing::TestWithParam<Placement> {
 protected:
  void SetUp() override {
    ASSERT_NE(plugin(), nullptr) << "cannot load " << PLUGBOARD_CUDAIPC_PLUGIN;
    REQUIRE_GPUS(std::max(GetParam().dev0, GetParam().dev1) + 1);
  }
};

TEST_P(CudaIpcPairTest, KeysImportAndMapRemotePointers) {
  Placement p = GetParam();
  RUN_RANKS(
      [p](Link& link) {
        Rank r(0, p.dev0);
        pb_conn* c = r.connect(link, 1);
        auto innerKey = link.recvBlob();
        auto wholeKey = link.recvBlob();
        pb_rkey* inner = r.import(c, innerKey);
        pb_rkey* whole = r.import(c, wholeKey);
        uint8_t* pInner = r.remotePointer(c, inner);
        uint8_t* pWhole = r.remotePointer(c, whole);
        RCHECK(pInner && pWhole, "null remote pointers");
        RCHECK(pInner == pWhole + 4096, "both keys of one allocation share one mapping, offsets kept: "
                                            << static_cast<void*>(pInner) << " vs " << static_cast<void*>(pWhole));
        pb_rkey* again = r.import(c, innerKey);
        RCHECK(r.remotePointer(c, again) == pInner, "the same key imported twice maps to the same address");
        r.release(c, again);
        r.release(c, inner);
        // The mapping lives on for the remaining key: a kernel writes through it.
        RCUDA(cudaipc_test::fillPattern(pWhole, 4096, 0, 3));
        RCUDA(cudaDeviceSynchronize());
        link.sendU64(kCheck);
        link.expect(kChecked, "checked");
        r.release(c, whole);
        pb_rkey* reopened = r.import(c, innerKey);  // closed at zero, opens again
        RCHECK(r.remotePointer(c, reopened) != nullptr, "re-import after release");

        std::vector<uint8_t> bad = innerKey;
        pb_rkey* out = nullptr;
        RSTATUS(r.t->import_rkey(c, bad.data(), bad.size() - 1, &out), PB_ERR_INVALID, r, "a cudaipc key is");
        bad[0] ^= 0xff;
        RSTATUS(r.t->import_rkey(c, bad.data(), bad.size(), &out), PB_ERR_INVALID, r, "bad magic");
        bad = innerKey;
        bad[16] ^= 0x5a;  // machine hash (README: key layout)
        RSTATUS(r.t->import_rkey(c, bad.data(), bad.size(), &out), PB_ERR_REMOTE, r, "another machine");
        bad = innerKey;
        bad[64] = 0xff;  // size far beyond the allocation
        bad[69] = 0x7f;
        RSTATUS(r.t->import_rkey(c, bad.data(), bad.size(), &out), PB_ERR_INVALID, r, "outside its allocation");
        RSTATUS(r.t->remote_pointer(c, reopened, nullptr), PB_ERR_INVALID, r, "must not be NULL");
        importerDone(r, link);
      },
      [p](Link& link) {
        Rank r(1, p.dev1);
        r.connect(link, 0);
        uint8_t* buf = r.alloc(kMiB);
        RCUDA(cudaMemset(buf, 0, kMiB));
        link.sendBlob(r.pack(r.reg(buf + 4096, 65536)));
        link.sendBlob(r.pack(r.reg(buf, kMiB)));
        link.expect(kCheck, "check");
        RCHECK(r.mismatches(buf, 4096, 0, 3) == 0, "the peer's kernel write through remote_pointer did not land");
        link.sendU64(kChecked);
        exporterDone(link);
      });
}

TEST_P(CudaIpcPairTest, WritesArriveByteForByte) {
  struct Case {
    size_t size, srcOff, dstOff;
  };
  static const Case kCases[] = {{0, 0, 0},    {1, 0, 0},           {1, 7, 13},
                                {4097, 3, 5}, {64 * kMiB, 0, 0},   {64 * kMiB - 1, 1, 63}};
  const size_t srcSize = 64 * kMiB + 16, dstSize = 64 * kMiB + 64;
  Placement p = GetParam();
  RUN_RANKS(
      [=](Link& link) {
        Rank r(0, p.dev0);
        pb_conn* c = r.connect(link, 1);
        uint8_t* src = r.alloc(srcSize);
        RCUDA(cudaipc_test::fillPattern(src, srcSize, 0, 1));
        RCUDA(cudaDeviceSynchronize());
        pb_mr* smr = r.reg(src, srcSize);
        pb_rkey* dst = r.import(c, link.recvBlob());
        for (const Case& k : kCases) {
          auto start = Clock::now();
          r.waitCompleted(c, r.write(c, smr, k.srcOff, dst, k.dstOff, k.size));
          double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
          if (k.size >= kMiB)  // for the log: what one write of this size took, post to completion
            std::fprintf(stderr, "cudaipc %s: write of %zu bytes took %.0f us (%.1f GB/s)\n", p.name, k.size, us,
                         k.size / us / 1e3);
          link.sendU64(kCheck);
          link.expect(kChecked, "checked");
        }
        importerDone(r, link);
      },
      [=](Link& link) {
        Rank r(1, p.dev1);
        r.connect(link, 0);
        uint8_t* dst = r.alloc(dstSize);
        RCUDA(cudaMemset(dst, 0xee, dstSize));
        link.sendBlob(r.pack(r.reg(dst, dstSize)));
        for (const Case& k : kCases) {
          link.expect(kCheck, "check");
          std::string what = "write of " + std::to_string(k.size) + " bytes (src+" + std::to_string(k.srcOff) +
                             " -> dst+" + std::to_string(k.dstOff) + ")";
          auto got = r.download(dst, dstSize);
          expectFill(got, 0, k.dstOff, 0xee, what);
          expectPattern(got, k.dstOff, k.size, k.srcOff, 1, what);
          expectFill(got, k.dstOff + k.size, dstSize, 0xee, what);
          RCUDA(cudaMemset(dst, 0xee, dstSize));
          RCUDA(cudaDeviceSynchronize());
          link.sendU64(kChecked);
        }
        exporterDone(link);
      });
}

// The semaphore guarantee: when the counter moves, the data written before
// the signal is all there. Rank 1 polls the counter from the host, then at
// once reads the last bytes (the copy writes them last: a big copy takes
// hundreds of microseconds, so a signal that overtook it is caught), then
// checks the whole chunk. Odd rounds use write + signal, even ones
// write_signal.
TEST_P(CudaIpcPairTest, SignalLandsAfterItsWriteHostObserver) {
  constexpr int kRounds = 100;
  constexpr size_t kChunk = 64 * kMiB;
  constexpr size_t kTail = 4096;
  Placement p = GetParam();
  RUN_RANKS(
      [=](Link& link) {
        Rank r(0, p.dev0);
        pb_conn* c = r.connect(link, 1);
        uint8_t* src = r.alloc(kChunk);
        pb_mr* smr = r.reg(src, kChunk);
        pb_rkey* data = r.import(c, link.recvBlob());
        pb_rkey* counter = r.import(c, link.recvBlob());
        uint64_t last = 0;
        for (int round = 1; round <= kRounds; ++round) {
          r.waitCompleted(c, last);  // the previous copy has read src
          RCUDA(cudaipc_test::fillPattern(src, kChunk, 0, static_cast<uint32_t>(round)));
          RCUDA(cudaDeviceSynchronize());
          if (round % 2) {
            r.write(c, smr, 0, data, 0, kChunk);
            last = r.signal(c, counter, 8, 1);
          } else {
            last = r.writeSignal(c, smr, 0, data, 0, kChunk, counter, 8, 1);
          }
          link.expect(kChecked, "round checked");
        }
        r.waitCompleted(c, last);
        importerDone(r, link);
      },
      [=](Link& link) {
        Rank r(1, p.dev1);
        r.connect(link, 0);
        uint8_t* data = r.alloc(kChunk);
        uint8_t* counter = r.alloc(64);
        RCUDA(cudaMemset(counter, 0, 64));
        link.sendBlob(r.pack(r.reg(data, kChunk)));
        link.sendBlob(r.pack(r.reg(counter, 64)));
        for (int round = 1; round <= kRounds; ++round) {
          auto deadline = Clock::now() + kWait;
          uint64_t seen = 0;
          while ((seen = r.readU64(counter + 8)) < uint64_t(round))
            RCHECK(Clock::now() < deadline, "round " << round << ": counter stuck at " << seen);
          RCHECK(seen == uint64_t(round), "round " << round << ": counter jumped to " << seen);
          auto tail = r.download(data + kChunk - kTail, kTail);
          expectPattern(tail, 0, kTail, kChunk - kTail, static_cast<uint32_t>(round),
                        "round " + std::to_string(round) + ": the end of the chunk, read as soon as its signal landed");
          RCHECK(r.mismatches(data, kChunk, 0, static_cast<uint32_t>(round)) == 0,
                 "round " << round << ": the chunk seen after its signal");
          link.sendU64(kChecked);
        }
        exporterDone(link);
      });
}

// The same guarantee as a MemoryChannel-style kernel sees it: a kernel on
// rank 1's GPU spins on the counter (acquire, system scope) and then reads
// the data.
TEST_P(CudaIpcPairTest, SignalLandsAfterItsWriteKernelObserver) {
  constexpr int kRounds = 20;
  constexpr size_t kChunk = 32 * kMiB;
  Placement p = GetParam();
  RUN_RANKS(
      [=](Link& link) {
        Rank r(0, p.dev0);
        pb_conn* c = r.connect(link, 1);
        uint8_t* src = r.alloc(kChunk);
        pb_mr* smr = r.reg(src, kChunk);
        pb_rkey* data = r.import(c, link.recvBlob());
        pb_rkey* counter = r.import(c, link.recvBlob());
        uint64_t last = 0;
        for (int round = 1; round <= kRounds; ++round) {
          r.waitCompleted(c, last);
          RCUDA(cudaipc_test::fillPattern(src, kChunk, 0, static_cast<uint32_t>(100 + round)));
          RCUDA(cudaDeviceSynchronize());
          link.expect(kReady, "observer ready");
          last = r.writeSignal(c, smr, 0, data, 0, kChunk, counter, 0, 1);
          link.expect(kChecked, "round checked");
        }
        r.waitCompleted(c, last);
        importerDone(r, link);
      },
      [=](Link& link) {
        Rank r(1, p.dev1);
        r.connect(link, 0);
        uint8_t* data = r.alloc(kChunk);
        auto* counter = reinterpret_cast<unsigned long long*>(r.alloc(64));
        auto* result = reinterpret_cast<int*>(r.alloc(sizeof(int)));
        RCUDA(cudaMemset(counter, 0, 64));
        link.sendBlob(r.pack(r.reg(data, kChunk)));
        link.sendBlob(r.pack(r.reg(counter, 64)));
        cudaStream_t stream;
        RCUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        for (int round = 1; round <= kRounds; ++round) {
          RCUDA(cudaMemsetAsync(result, 0xff, sizeof(int), stream));
          RCUDA(cudaipc_test::waitThenCheck(counter, round, data, kChunk, static_cast<uint32_t>(100 + round), result,
                                            20ull * 1000 * 1000 * 1000, stream));
          link.sendU64(kReady);  // the kernel is queued (maybe spinning) before the peer writes
          RCUDA(cudaStreamSynchronize(stream));
          int res = -1;
          RCUDA(cudaMemcpy(&res, result, sizeof(res), cudaMemcpyDeviceToHost));
          RCHECK(res != cudaipc_test::kWaitTimedOut, "round " << round << ": the kernel never saw the counter move");
          RCHECK(res == cudaipc_test::kWaitOk, "round " << round << ": the kernel saw the counter before the data ("
                                                        << res << ")");
          link.sendU64(kChecked);
        }
        RCUDA(cudaStreamDestroy(stream));
        exporterDone(link);
      });
}

TEST_P(CudaIpcPairTest, ManyWritesInFlight) {
  constexpr size_t kTotal = 64 * kMiB, kPiece = 128 * 1024, kPieces = kTotal / kPiece;
  Placement p = GetParam();
  RUN_RANKS(
      [=](Link& link) {
        Rank r(0, p.dev0);
        pb_conn* c = r.connect(link, 1);
        uint8_t* src = r.alloc(kTotal);
        RCUDA(cudaipc_test::fillPattern(src, kTotal, 0, 7));
        RCUDA(cudaDeviceSynchronize());
        pb_mr* smr = r.reg(src, kTotal);
        pb_rkey* dst = r.import(c, link.recvBlob());
        pb_rkey* counter = r.import(c, link.recvBlob());
        uint64_t done = 0, last = 0;
        // Back to front, so any reordering of whole copies could not hide.
        for (size_t i = kPieces; i-- > 0;) {
          last = r.write(c, smr, i * kPiece, dst, i * kPiece, kPiece);
          if (i % 64 == 0) {
            RCHECK(r.t->proxy_progress(c, &done) == PB_OK, r.err());
            RCHECK(done <= last, "completed " << done << " ahead of posted " << last);
          }
        }
        last = r.signal(c, counter, 0, 1);
        r.waitCompleted(c, last);
        link.expect(kChecked, "checked");
        importerDone(r, link);
      },
      [=](Link& link) {
        Rank r(1, p.dev1);
        r.connect(link, 0);
        uint8_t* dst = r.alloc(kTotal);
        uint8_t* counter = r.alloc(8);
        RCUDA(cudaMemset(dst, 0, kTotal));
        RCUDA(cudaMemset(counter, 0, 8));
        link.sendBlob(r.pack(r.reg(dst, kTotal)));
        link.sendBlob(r.pack(r.reg(counter, 8)));
        auto deadline = Clock::now() + kWait;
        while (r.readU64(counter) == 0) RCHECK(Clock::now() < deadline, "the signal after the writes never came");
        RCHECK(r.mismatches(dst, kTotal, 0, 7) == 0, "data of " << kPieces << " writes in flight");
        link.sendU64(kChecked);
        exporterDone(link);
      });
}

TEST_P(CudaIpcPairTest, BadRangesAreInvalidAndHarmless) {
  Placement p = GetParam();
  RUN_RANKS(
      [p](Link& link) {
        Rank r(0, p.dev0);
        std::vector<uint8_t> unusedBlob;
        pb_conn* idle = r.setup(1, &unusedBlob);  // never connected
        pb_conn* c = r.connect(link, 1);
        uint8_t* src = r.alloc(4096);
        RCUDA(cudaipc_test::fillPattern(src, 4096, 0, 5));
        RCUDA(cudaDeviceSynchronize());
        pb_mr* smr = r.reg(src, 4096);
        pb_rkey* dst = r.import(c, link.recvBlob());  // 1024 bytes
        RSTATUS(r.t->write(c, smr, 0, dst, 1000, 25), PB_ERR_INVALID, r, "out of range of the peer's 1024-byte");
        RSTATUS(r.t->write(c, smr, 4000, dst, 0, 97), PB_ERR_INVALID, r, "out of range of the 4096-byte source");
        RSTATUS(r.t->write(c, smr, 0, dst, SIZE_MAX, 2), PB_ERR_INVALID, r, "out of range");
        RSTATUS(r.t->signal(c, dst, 1020, 1), PB_ERR_INVALID, r, "out of range");
        RSTATUS(r.t->signal(c, dst, 4, 1), PB_ERR_INVALID, r, "not 8-byte aligned");
        RSTATUS(r.t->write_signal(c, smr, 0, dst, 0, 8, dst, 1024, 1), PB_ERR_INVALID, r, "out of range");
        RSTATUS(r.t->write(idle, smr, 0, dst, 0, 8), PB_ERR_INVALID, r, "not connected");
        uint64_t done = 99;
        RCHECK(r.t->proxy_progress(c, &done) == PB_OK && done == 0, "refused posts took sequence numbers: " << done);
        // The connection still works, and nothing refused reached the peer.
        r.waitCompleted(c, r.write(c, smr, 0, dst, 0, 1000));
        link.sendU64(kCheck);
        link.expect(kChecked, "checked");
        importerDone(r, link);
      },
      [p](Link& link) {
        Rank r(1, p.dev1);
        r.connect(link, 0);
        uint8_t* dst = r.alloc(kMiB);
        RCUDA(cudaMemset(dst, 0xee, kMiB));
        link.sendBlob(r.pack(r.reg(dst, 1024)));
        link.expect(kCheck, "check");
        auto got = r.download(dst, kMiB);
        expectPattern(got, 0, 1000, 0, 5, "the valid write");
        expectFill(got, 1000, kMiB, 0xee, "after refused writes");
        link.sendU64(kChecked);
        exporterDone(link);
      });
}

// What MemoryChannel does: kernels in the importing process load and store
// straight through the mapping of the peer's buffer.
TEST_P(CudaIpcPairTest, KernelsLoadAndStoreThroughRemotePointer) {
  constexpr size_t kHalf = 8 * kMiB;
  Placement p = GetParam();
  RUN_RANKS(
      [=](Link& link) {
        Rank r(0, p.dev0);
        pb_conn* c = r.connect(link, 1);
        pb_rkey* rk = r.import(c, link.recvBlob());
        uint8_t* remote = r.remotePointer(c, rk);
        RCHECK(r.mismatches(remote, kHalf, 0, 41) == 0, "a kernel reading the peer's first half through the mapping");
        RCUDA(cudaipc_test::fillPattern(remote + kHalf, kHalf, 0, 42));
        RCUDA(cudaDeviceSynchronize());
        link.sendU64(kCheck);
        link.expect(kChecked, "checked");
        importerDone(r, link);
      },
      [=](Link& link) {
        Rank r(1, p.dev1);
        r.connect(link, 0);
        uint8_t* buf = r.alloc(2 * kHalf);
        RCUDA(cudaipc_test::fillPattern(buf, kHalf, 0, 41));
        RCUDA(cudaMemset(buf + kHalf, 0, kHalf));
        RCUDA(cudaDeviceSynchronize());
        link.sendBlob(r.pack(r.reg(buf, 2 * kHalf)));
        link.expect(kCheck, "check");
        RCHECK(r.mismatches(buf + kHalf, kHalf, 0, 42) == 0, "the peer kernel's stores through the mapping");
        link.sendU64(kChecked);
        exporterDone(link);
      });
}

// free() with copies in flight returns once they are done (GPU copies
// cannot be abandoned), so the data is complete and nothing faults.
TEST_P(CudaIpcPairTest, FreeWithWritesInFlight) {
  constexpr size_t kSize = 64 * kMiB;
  constexpr int kWrites = 16;
  Placement p = GetParam();
  RUN_RANKS(
      [=](Link& link) {
        Rank r(0, p.dev0);
        pb_conn* c = r.connect(link, 1);
        uint8_t* src = r.alloc(kSize);
        RCUDA(cudaipc_test::fillPattern(src, kSize, 0, 9));
        RCUDA(cudaDeviceSynchronize());
        pb_mr* smr = r.reg(src, kSize);
        pb_rkey* dst = r.import(c, link.recvBlob());
        for (int i = 0; i < kWrites; ++i) r.write(c, smr, 0, dst, 0, kSize);
        r.freeConn(c);  // releases the key (waits) and frees (waits)
        link.sendU64(kCheck);
        link.expect(kChecked, "checked");
        importerDone(r, link);
      },
      [=](Link& link) {
        Rank r(1, p.dev1);
        r.connect(link, 0);
        uint8_t* dst = r.alloc(kSize);
        RCUDA(cudaMemset(dst, 0, kSize));
        link.sendBlob(r.pack(r.reg(dst, kSize)));
        link.expect(kCheck, "check");
        RCHECK(r.mismatches(dst, kSize, 0, 9) == 0, "data written before free");
        link.sendU64(kChecked);
        exporterDone(link);
      });
}

// A GPU fault in the importing process is final for the connection and
// reported as PB_ERR_SYSTEM naming cudaipc, the peer and the CUDA error;
// free and finalize still succeed.
TEST_P(CudaIpcPairTest, GpuFaultIsFinalAndNamed) {
  Placement p = GetParam();
  // Under CUDA MPS a fatal fault of one client is raised in every client of
  // the GPU, so the exporter could not stay healthy as this test requires.
  if (p.dev0 == p.dev1 && (std::getenv("CUDA_MPS_PIPE_DIRECTORY") || access("/tmp/nvidia-mps/control", F_OK) == 0))
    GTEST_SKIP() << "CUDA MPS is running: a GPU fault reaches every process on the GPU";
  RUN_RANKS(
      [p](Link& link) {
        Rank r(0, p.dev0);
        pb_conn* c = r.connect(link, 1);
        uint8_t* src = r.alloc(64 * kMiB);
        pb_mr* smr = r.reg(src, 64 * kMiB);
        pb_rkey* dst = r.import(c, link.recvBlob());
        r.write(c, smr, 0, dst, 0, 64 * kMiB);
        RCUDA(cudaipc_test::launchFault());
        cudaDeviceSynchronize();  // returns the fault; the context is dead from here on
        uint64_t done = 0;
        pb_status st = PB_OK;
        auto deadline = Clock::now() + kWait;
        while ((st = r.t->proxy_progress(c, &done)) == PB_OK && done < 1 && Clock::now() < deadline) {
        }
        // The copy may have completed before the fault: then a later post fails.
        if (st == PB_OK) st = r.t->write(c, smr, 0, dst, 0, 4096);
        RCHECK(st == PB_ERR_SYSTEM, "status " << st << " after a GPU fault: " << r.err());
        for (const char* needle : {"cudaipc", "rank 1 (host testhost)", "cudaErrorIllegalAddress", "unusable"})
          RCHECK(r.err().find(needle) != std::string::npos, "reason lacks '" << needle << "': " << r.err());
        RSTATUS(r.t->proxy_progress(c, &done), PB_ERR_SYSTEM, r, "unusable");  // final
        RSTATUS(r.t->signal(c, dst, 0, 1), PB_ERR_SYSTEM, r, "unusable");
        r.freeConn(c);
        RCHECK(r.t->finalize(r.ctx) == PB_OK, "finalize after a fault: " << r.err());
        r.ctx = nullptr;
        importerDone(r, link);
      },
      [p](Link& link) {
        Rank r(1, p.dev1);
        r.connect(link, 0);
        uint8_t* dst = r.alloc(64 * kMiB);
        link.sendBlob(r.pack(r.reg(dst, 64 * kMiB)));
        exporterDone(link);
        RCUDA(cudaDeviceSynchronize());  // the peer's fault stayed in the peer's context
      });
}

/// The driver functions the cuMem test allocates with, resolved like the
/// plugin does (the test links no libcuda either).
struct CuMemApi {
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemAddressReserve_v10020 reserve = nullptr;
  PFN_cuMemAddressFree_v10020 addressFree = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 setAccess = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 granularity = nullptr;

  CuMemApi() {
    get(create, "cuMemCreate");
    get(release, "cuMemRelease");
    get(reserve, "cuMemAddressReserve");
    get(addressFree, "cuMemAddressFree");
    get(map, "cuMemMap");
    get(unmap, "cuMemUnmap");
    get(setAccess, "cuMemSetAccess");
    get(granularity, "cuMemGetAllocationGranularity");
  }
  template <typename Fn>
  static void get(Fn& fn, const char* name) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    RCUDA(cudaGetDriverEntryPointByVersion(name, &p, 10020, cudaEnableDefault, &q));
    RCHECK(p && q == cudaDriverEntryPointSuccess, "driver lacks " << name);
    fn = reinterpret_cast<Fn>(p);
  }
};

/// A cuMemCreate allocation mapped read-write on one GPU.
struct CuMemBuffer {
  CuMemBuffer(const CuMemApi& api, int device, size_t minSize, CUmemAllocationHandleType types) : api(api) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    prop.requestedHandleTypes = types;
    size_t g = 0;
    RCU(api.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    size = (minSize + g - 1) / g * g;
    RCU(api.create(&handle, size, &prop, 0));
    RCU(api.reserve(&ptr, size, g, 0, 0));
    RCU(api.map(ptr, size, 0, handle, 0));
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    RCU(api.setAccess(ptr, size, &access, 1));
  }
  ~CuMemBuffer() {
    api.unmap(ptr, size);
    api.addressFree(ptr, size);
    api.release(handle);
  }
  uint8_t* data() const { return reinterpret_cast<uint8_t*>(ptr); }
  const CuMemApi& api;
  CUmemGenericAllocationHandle handle = 0;
  CUdeviceptr ptr = 0;
  size_t size = 0;
};

// cuMem (VMM) buffers travel as a POSIX fd fetched with pidfd_getfd. Where
// the kernel or ptrace policy refuses that, import must say so clearly
// (and this test skips); cuMem buffers made without the fd handle type are
// refused at registration.
TEST_P(CudaIpcPairTest, CuMemBuffersViaPidfd) {
  constexpr size_t kBytes = 3 * kMiB;
  Placement p = GetParam();
  RUN_RANKS(
      [=](Link& link) {
        Rank r(0, p.dev0);
        pb_conn* c = r.connect(link, 1);
        uint8_t* src = r.alloc(kBytes);
        RCUDA(cudaipc_test::fillPattern(src, kBytes, 0, 11));
        RCUDA(cudaDeviceSynchronize());
        pb_mr* smr = r.reg(src, kBytes);
        auto key = link.recvBlob();
        pb_rkey* rk = nullptr;
        pb_status st = r.t->import_rkey(c, key.data(), key.size(), &rk);
        if (st == PB_ERR_UNSUPPORTED && r.err().find("pidfd") != std::string::npos) {
          link.sendU64(kSkip);
          throw RankSkip("cuMem import refused here (as it must say): " + r.err());
        }
        RCHECK(st == PB_OK, "import of a cuMem key: status " << st << ": " << r.err());
        r.t->release_rkey(c, rk);
        rk = r.import(c, key);  // tracked from here on
        r.waitCompleted(c, r.write(c, smr, 0, rk, 0, kBytes));
        RCHECK(r.mismatches(r.remotePointer(c, rk), kBytes, 0, 11) == 0, "reading the cuMem buffer back through remote_pointer");
        link.sendU64(kCheck);
        link.expect(kChecked, "checked");
        importerDone(r, link);
      },
      [=](Link& link) {
        CuMemApi api;
        std::optional<CuMemBuffer> shared, private_;  // outlive the Rank: freed after deregistration
        Rank r(1, p.dev1);
        r.connect(link, 0);
        shared.emplace(api, p.dev1, kBytes + 4096, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        private_.emplace(api, p.dev1, kMiB, CU_MEM_HANDLE_TYPE_NONE);
        pb_mr* mr = nullptr;
        RSTATUS(r.t->register_memory(r.ctx, private_->data(), kMiB, PB_MEM_CUDA, &mr), PB_ERR_UNSUPPORTED, r,
                "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR");
        RCUDA(cudaMemset(shared->data(), 0, shared->size));
        RCUDA(cudaDeviceSynchronize());
        link.sendBlob(r.pack(r.reg(shared->data() + 4096, kBytes)));
        uint64_t msg = link.recvU64();
        if (msg == kSkip) throw RankSkip("skipped by rank 0");
        RCHECK(msg == kCheck, "unexpected message " << msg);
        RCHECK(r.mismatches(shared->data() + 4096, kBytes, 0, 11) == 0, "write into the cuMem buffer");
        link.sendU64(kChecked);
        exporterDone(link);
        r.close();
      });
}

INSTANTIATE_TEST_SUITE_P(Placements, CudaIpcPairTest,
                         ::testing::Values(Placement{"SameGpu", 0, 0}, Placement{"TwoGpus", 0, 1}),
                         [](const ::testing::TestParamInfo<Placement>& info) { return std::string(info.param.name); });

}  // namespace
