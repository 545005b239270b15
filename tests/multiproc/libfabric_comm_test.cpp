// The communicator and host collectives over the libfabric plugin, 2 and 4
// forked ranks on loopback (PLUGBOARD_TRANSPORTS=libfabric, provider tcp,
// iface lo). Skipped, with the reason, where the plugin was not built or
// no tcp provider is usable.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <plugboard/transport.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>

#include "collective_reference.hpp"
#include "close_check.hpp"
#include "comm_fixture.hpp"
#include "multiproc.hpp"
#include "plugboard/host_collectives.hpp"

using namespace plugboard;
using namespace plugboard::test;

namespace {

constexpr auto kTestTimeout = std::chrono::seconds(90);
const std::string kPlugin = std::string(PLUGBOARD_TEST_PLUGIN_DIR) + "/libplugboard-libfabric.so";

/// Minimal host services for the probe: provider tcp on lo, defaults else.
struct ProbeHost {
  std::map<std::string, std::string> values{{"provider", "tcp"}, {"iface", "lo"}};
  static pb_status declare(void* core, const pb_setting_decl_v1* d) {
    auto& v = static_cast<ProbeHost*>(core)->values;
    v.emplace(d->key, d->default_value ? d->default_value : "");
    return PB_OK;
  }
  static pb_status get(void* core, const char* key, char* buf, size_t len, size_t* needed) {
    const std::string& v = static_cast<ProbeHost*>(core)->values[key];
    *needed = v.size() + 1;
    if (*needed > len) return PB_ERR_NOMEM;
    std::memcpy(buf, v.c_str(), *needed);
    return PB_OK;
  }
};

/// Why the libfabric plugin cannot run these tests ("" when it can). The
/// probe runs in a child process, so this process never initialises
/// libfabric before the ranks fork.
const std::string& unusableReason() {
  static const std::string reason = []() -> std::string {
    struct stat st{};
    if (stat(kPlugin.c_str(), &st) != 0) return kPlugin + " was not built (no libfabric-dev?)";
    int fds[2];
    if (pipe(fds) != 0) return "pipe failed";
    pid_t child = fork();
    if (child == 0) {
      close(fds[0]);
      std::string why;
      void* lib = dlopen(kPlugin.c_str(), RTLD_NOW | RTLD_LOCAL);
      auto entry = lib ? reinterpret_cast<pb_transport_entry_v1_fn>(dlsym(lib, PB_TRANSPORT_ENTRY_SYMBOL_V1)) : nullptr;
      const pb_transport_v1* t = entry ? entry(PB_TRANSPORT_ABI_MAJOR, PB_TRANSPORT_ABI_MINOR) : nullptr;
      if (!t) {
        why = "cannot load " + kPlugin + ": " + (lib ? "no usable entry symbol" : dlerror());
      } else {
        ProbeHost probe;
        pb_host_services_v1 host{};
        host.struct_size = sizeof(host);
        host.abi_major = PB_TRANSPORT_ABI_MAJOR;
        host.abi_minor = PB_TRANSPORT_ABI_MINOR;
        host.core = &probe;
        host.declare_setting = &ProbeHost::declare;
        host.get_setting = &ProbeHost::get;
        host.hostname = "probe";
        pb_plugin_ctx* ctx = nullptr;
        if (t->init(&host, &ctx) == PB_OK)
          t->finalize(ctx);
        else
          why = std::string("libfabric provider tcp is not usable here: ") + t->last_error(nullptr);
      }
      ssize_t ignored = write(fds[1], why.data(), why.size());
      (void)ignored;
      _exit(0);
    }
    close(fds[1]);
    std::string why;
    char buf[512];
    for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) why.append(buf, size_t(n));
    close(fds[0]);
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status)) return "the libfabric probe process crashed (status " + std::to_string(status) + ")";
    return why;
  }();
  return reason;
}

/// Environment of every rank: libfabric only, tcp on loopback.
void useLibfabric(const char* signal = "auto") {
  setenv("PLUGBOARD_TRANSPORTS", "libfabric", 1);
  setenv("PLUGBOARD_LIBFABRIC_PROVIDER", "tcp", 1);
  setenv("PLUGBOARD_LIBFABRIC_IFACE", "lo", 1);
  setenv("PLUGBOARD_LIBFABRIC_SIGNAL", signal, 1);
}

/// Two lanes for writes from 64 KiB (plugins/libfabric/README.md "Lanes";
/// `auto` opens none on CI's 2 cores).
void useTwoLanes() {
  setenv("PLUGBOARD_LIBFABRIC_LANES", "2", 1);
  setenv("PLUGBOARD_LIBFABRIC_LANE_BYTES", "65536", 1);
}

uint8_t patternByte(int writer, int reader, size_t i) {
  return static_cast<uint8_t>((writer * 131 + reader * 31 + i * 7 + (i >> 8)) & 0xff);
}

// The all-to-all of communicator_test.cpp: rank w writes slot w of rank
// r's buffer, signals r, and r checks every slot after nranks-1 signals.
void allToAllWrites(Communicator& comm, size_t slot) {
  const int n = comm.size(), me = comm.rank();
  std::vector<uint8_t> inbox(slot * n, 0), outbox(slot * n);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < slot; ++i) outbox[r * slot + i] = patternByte(me, r, i);
  auto conns = comm.connectAll();
  RegisteredMemory in = comm.registerMemory(inbox.data(), inbox.size());
  RegisteredMemory out = comm.registerMemory(outbox.data(), outbox.size());
  std::map<int, RemoteMemory> remote;
  std::map<int, std::unique_ptr<Host2HostSemaphore>> sems;
  for (auto& [p, c] : conns) comm.sendMemory(in, p);
  for (auto& [p, c] : conns) remote[p] = comm.recvMemory(p);
  for (auto& [p, c] : conns) sems[p] = std::make_unique<Host2HostSemaphore>(comm, c);
  for (auto& [p, c] : conns) {
    if (c->transport() != "libfabric") throw std::runtime_error("rank " + std::to_string(me) + " uses " + c->transport());
    c->write(remote[p], me * slot, out, p * slot, slot);
    sems[p]->signal();
  }
  for (auto& [p, c] : conns) c->flush();
  for (auto& [p, s] : sems) s->wait();
  for (int w = 0; w < n; ++w) {
    if (w == me) continue;
    for (size_t i = 0; i < slot; ++i)
      if (inbox[w * slot + i] != patternByte(w, me, i))
        throw std::runtime_error("rank " + std::to_string(me) + ": byte " + std::to_string(i) + " from rank " +
                                 std::to_string(w) + " is wrong");
  }
  comm.bootstrap().barrier();  // no rank tears down while a peer still reads
}

void runAllToAll(int nranks, size_t slot, const char* signal, bool lanes = false) {
  auto results = runRanks(nranks, kTestTimeout, [&](int rank, int n, const UniqueId& id) {
    useLibfabric(signal);
    if (lanes) useTwoLanes();
    Communicator comm(loopbackBootstrap(rank, n, id));
    allToAllWrites(comm, slot);
  });
  expectAllPassed(results);
}

// AllReduce over libfabric for a few types, ops and counts (0, 1, a prime,
// and past the one-step threshold so the pipelined path runs).
void runAllReduce(int nranks) {
  auto results = runRanks(nranks, kTestTimeout, [&](int rank, int n, const UniqueId& id) {
    useLibfabric();
    setenv("PLUGBOARD_HOST_CHUNK_BYTES", "4096", 1);
    setenv("PLUGBOARD_ALLREDUCE_SMALL_BYTES", "4096", 1);
    Communicator comm(loopbackBootstrap(rank, n, id));
    for (int p = 0; p < n; ++p)
      if (p != rank && comm.transportFor(p) != "libfabric")
        throw std::runtime_error("rank " + std::to_string(rank) + " reaches rank " + std::to_string(p) + " over " +
                                 comm.transportFor(p));
    HostCollectives hc(comm);
    for (DataType type : {DataType::Float32, DataType::Int64, DataType::BFloat16})
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max})
        for (size_t count : {size_t(0), size_t(1), size_t(1009), size_t(12347)}) {
          size_t es = dataTypeSize(type);
          std::vector<char> send(count * es + 1), recv(count * es + 1);
          fillInputs(send.data(), count, 0, rank, type, op);
          hc.allReduce(send.data(), recv.data(), count, type, op);
          for (size_t i = 0; i < count; ++i) {
            double got = loadValue(recv.data(), i, type), want = expectedValue(i, n, type, op);
            if (!sameValue(got, want, type, op))
              throw std::runtime_error("allreduce " + std::string(dataTypeName(type)) + " " + reduceOpName(op) +
                                       " count " + std::to_string(count) + " rank " + std::to_string(rank) +
                                       ": element " + std::to_string(i) + " is " + std::to_string(got) +
                                       ", expected " + std::to_string(want));
          }
        }
    comm.bootstrap().barrier();
  });
  expectAllPassed(results);
}

class LibfabricComm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!unusableReason().empty()) GTEST_SKIP() << unusableReason();
  }
};

}  // namespace

TEST_F(LibfabricComm, TwoRanksAllToAll) { runAllToAll(2, 4097, "auto"); }
TEST_F(LibfabricComm, FourRanksAllToAll) { runAllToAll(4, 1 << 20, "auto"); }
TEST_F(LibfabricComm, TwoRanksAllToAllWithMessageSignals) { runAllToAll(2, 1 << 16, "message"); }
TEST_F(LibfabricComm, FourRanksAllToAllOverLanes) { runAllToAll(4, (1 << 20) + 4097, "auto", true); }
TEST_F(LibfabricComm, HostAllReduceTwoRanks) { runAllReduce(2); }
TEST_F(LibfabricComm, HostAllReduceFourRanks) { runAllReduce(4); }

// A peer that has finished its call may free memory that a late signal
// (a slot return it no longer needs) still targets: the signal fails and
// so does the connection, but a wait for the operations posted before it
// still succeeds, so the sender's call does not fail on it; flush(), which
// waits for the signal too, throws.
TEST_F(LibfabricComm, WaitForEarlierWritesSucceedsAfterALaterSignalToFreedMemoryFailed) {
  expectAllPassed(runRanks(2, kTestTimeout, [&](int rank, int n, const UniqueId& id) {
    useLibfabric();
    auto boot = loopbackBootstrap(rank, n, id);
    Communicator comm(boot);
    auto conn = comm.connectAll().at(1 - rank);
    constexpr int kFreed = 77, kDone = 78;
    std::vector<uint64_t> counter(1, 0);
    std::vector<char> data(4096, char(rank + 1));
    const char byte = 1;
    if (rank == 1) {
      RegisteredMemory counterMem = comm.registerMemory(counter.data(), 8);
      RegisteredMemory dataMem = comm.registerMemory(data.data(), data.size());
      comm.sendMemory(counterMem, 0);
      comm.sendMemory(dataMem, 0);
      boot->barrier();               // rank 0's write has landed
      counterMem = RegisteredMemory();  // the counter's registration is gone
      boot->send(&byte, 1, 0, kFreed);
      boot->recv(0, kDone);
      return;
    }
    RemoteMemory peerCounter = comm.recvMemory(1), peerData = comm.recvMemory(1);
    RegisteredMemory src = comm.registerMemory(data.data(), data.size());
    conn->write(peerData, 0, src, 0, data.size());
    const uint64_t writes = conn->posted();
    conn->waitCompleted(writes);
    boot->barrier();
    boot->recv(1, kFreed);
    conn->signal(peerCounter, 0, 1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    bool failed = false;
    while (!failed && std::chrono::steady_clock::now() < deadline) {
      try {
        conn->progress();
      } catch (const Error&) {
        failed = true;
      }
    }
    boot->send(&byte, 1, 1, kDone);
    if (!failed) throw std::runtime_error("a signal into a deregistered region did not fail the connection in 10 s");
    conn->waitCompleted(writes);  // must not throw: those completed before the failure
    try {
      conn->flush();
    } catch (const Error&) {
      return;
    }
    throw std::runtime_error("flush() succeeded though the signal failed");
  }));
}

// Closing waits for a peer still in its last call (close_check.hpp), with
// direct transfers (cheap registration) and in chunks.
TEST_F(LibfabricComm, ASenderThatLeavesAtOnceDoesNotFailItsLateReceiver) {
  for (const std::string direct : {"0", "4096"}) {
    SCOPED_TRACE("host_direct_bytes " + direct);
    expectAllPassed(runRanks(2, kTestTimeout, [&](int rank, int n, const UniqueId& id) {
      useLibfabric();
      senderLeavesAtOnce(rank, n, id, {{"host_direct_bytes", direct}});
    }));
  }
}

// A peer that dies before large writes reach it over the lanes: the lanes
// connect on their first write, ofi_rxm keeps retrying the refused connect
// with the writes held, and nothing fails by itself; the writer's flush
// ends by the configured timeout with an error naming the dead rank, its
// host and the transport, and closing afterwards does not hang (the lanes'
// threads stop with their writes abandoned).
TEST_F(LibfabricComm, APeerThatDiesDuringLaneWritesIsNamed) {
  expectAllPassed(runRanks(2, kTestTimeout, [&](int rank, int n, const UniqueId& id) {
    useLibfabric();
    useTwoLanes();
    setenv("PLUGBOARD_TIMEOUT", "2", 1);
    auto boot = loopbackBootstrap(rank, n, id);
    Communicator comm(boot);
    auto conn = comm.connectAll().at(1 - rank);
    std::vector<char> data(size_t(16) << 20, char(rank + 1));
    RegisteredMemory mem = comm.registerMemory(data.data(), data.size());
    comm.sendMemory(mem, 1 - rank);
    RemoteMemory peer = comm.recvMemory(1 - rank);
    boot->barrier();
    if (rank == 1) _exit(0);  // the kernel resets its sockets; nothing is closed in step
    const auto start = std::chrono::steady_clock::now();
    try {
      for (int i = 0; i < 200; ++i) conn->write(peer, 0, mem, 0, data.size());
      conn->flush();
    } catch (const Error& e) {
      const std::string what = e.what();
      for (const char* part : {"rank 1 (host ", "libfabric"})
        if (what.find(part) == std::string::npos)
          throw std::runtime_error(std::string("the error lacks '") + part + "': " + what);
      if (std::chrono::steady_clock::now() - start > std::chrono::seconds(10))
        throw std::runtime_error("the dead peer was named only after 10 s (timeout 2 s): " + what);
      return;
    }
    throw std::runtime_error("3.2 GB of writes to a dead peer completed");
  }));
}
