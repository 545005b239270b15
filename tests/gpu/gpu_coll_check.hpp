// Shared pieces of the GPU collectives tests: forked ranks with a
// communicator and GpuCollectives each, device buffers, and checks of every
// collective against the host reference (tools/perf/collective_reference.hpp).
// Host code only (no kernels), included by each *_test.cu that needs it.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <stdexcept>
#include <thread>
#include <string>
#include <vector>

#include "collective_reference.hpp"
#include "comm_fixture.hpp"
#include "multiproc.hpp"
#include "plugboard/gpu/collectives.hpp"

namespace plugboard::test {
namespace {

using Settings = std::map<std::string, std::string>;

/// Small scratch and thresholds so short vectors cover the three allreduce
/// and reduce paths (LL below 4 KiB / (ranks - 1), e.g. 1009 floats on 2
/// ranks, 7 on any; one-shot below 32 KiB / (ranks - 1), e.g. 3000 floats
/// on 2 and 3 ranks; two-shot above, e.g. 100003), both send/recv paths (LL
/// below 4 KiB per direction, e.g. 1009 halves; pipeline from 2048 halves) and
/// every pipeline wraps its slots (4 blocks x 4 slots of 4 KiB per peer).
const Settings kSmall = {{"gpu_allreduce_small_bytes", "4096"}, {"gpu_allreduce_oneshot_bytes", "32768"},
                         {"gpu_blocks_small_bytes", "4096"},    {"gpu_p2p_small_bytes", "4096"},
                         {"gpu_scratch_bytes", "65536"},        {"gpu_blocks", "4"},
                         {"gpu_threads", "256"},                {"gpu_chunk_bytes", "4096"}};

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

/// A device buffer of at least one byte.
struct DevBuf {
  char* p = nullptr;
  size_t bytes = 0;
  explicit DevBuf(size_t n) : bytes(n) { check(cudaMalloc(&p, n ? n : 1), "cudaMalloc"); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  // The collectives run on a non-blocking stream, which does not wait for
  // the legacy stream: a pageable cudaMemcpy or a cudaMemset may still be in
  // flight when they return, so both end with a device synchronisation.
  void upload(const std::vector<char>& h, size_t at = 0) const {
    check(cudaMemcpy(p + at, h.data(), h.size(), cudaMemcpyHostToDevice), "upload");
    check(cudaDeviceSynchronize(), "upload sync");
  }
  std::vector<char> download(size_t at, size_t n) const {
    std::vector<char> h(n);
    check(cudaMemcpy(h.data(), p + at, n, cudaMemcpyDeviceToHost), "download");
    return h;
  }
  void poison() const {
    check(cudaMemset(p, kPoisonByte, bytes ? bytes : 1), "memset");
    check(cudaDeviceSynchronize(), "memset sync");
  }
};

using RankFn = std::function<void(GpuCollectives&, int rank, int n, cudaStream_t)>;
/// Per-rank set-up in the forked rank, before its communicator exists:
/// may change the environment and the rank's setting overrides.
using RankSetup = std::function<void(int rank, Settings& overrides)>;

/// n forked ranks, each with a communicator (CUDA memory over cudaipc
/// unless setup says otherwise), GpuCollectives with the given settings
/// and a stream.
void runGpuRanks(int n, const Settings& settings, const RankFn& fn, std::chrono::seconds timeout = std::chrono::seconds(110),
                 const RankSetup& setup = nullptr) {
  auto results = runRanks(n, timeout, [&](int rank, int nranks, const UniqueId& id) {
    int devices = 0;
    check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
    check(cudaSetDevice(rank % devices), "cudaSetDevice");
    setenv("PLUGBOARD_TRANSPORTS", "cudaipc,ethernet", 1);
    CommunicatorOptions options;
    options.overrides = settings;
    if (setup) setup(rank, options.overrides);
    Communicator comm(loopbackBootstrap(rank, nranks, id), options);
    cudaStream_t stream;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    {
      GpuCollectives coll(comm);
      fn(coll, rank, nranks, stream);
    }
    cudaStreamDestroy(stream);
  });
  expectAllPassed(results);
}

std::vector<char> inputs(size_t count, size_t first, int rank, DataType t, ReduceOp op) {
  std::vector<char> h(count * dataTypeSize(t));
  fillInputs(h.data(), count, first, rank, t, op);
  return h;
}

std::string describe(const char* coll, DataType t, ReduceOp op, size_t count, bool inPlace) {
  return std::string(coll) + " " + dataTypeName(t) + " " + reduceOpName(op) + " count " + std::to_string(count) +
         (inPlace ? " in place" : " out of place");
}

/// Throws at the first element of got (count elements) that is not want(i).
void expectValues(const std::vector<char>& got, size_t count, DataType t, ReduceOp op,
                  const std::function<double(size_t)>& want, const std::string& what) {
  for (size_t i = 0; i < count; ++i) {
    const double g = loadValue(got.data(), i, t), w = want(i);
    if (!sameValue(g, w, t, op))
      throw std::runtime_error(what + ": element " + std::to_string(i) + " is " + std::to_string(g) + ", want " +
                               std::to_string(w));
  }
}

/// The bounded wait of GpuCollectives (never cudaStreamSynchronize: a
/// kernel that is never scheduled would hang the test).
void sync(cudaStream_t s, GpuCollectives& g) { g.synchronize(s); }

enum class Reducing { AllReduce, ReduceScatter, Reduce };

/// One reducing call against the reference; root only matters for Reduce.
void checkReducing(GpuCollectives& g, Reducing kind, DataType t, ReduceOp op, size_t count, bool inPlace, int root,
                   int rank, int n, cudaStream_t s) {
  const size_t E = dataTypeSize(t), inCount = kind == Reducing::ReduceScatter ? n * count : count;
  DevBuf in(inCount * E), out(count * E);
  in.upload(inputs(inCount, 0, rank, t, op));
  out.poison();
  const char* name = kind == Reducing::AllReduce ? "allreduce" : kind == Reducing::Reduce ? "reduce" : "reducescatter";
  const std::string what = "rank " + std::to_string(rank) + ": " + describe(name, t, op, count, inPlace);
  char* recv = inPlace ? (kind == Reducing::ReduceScatter ? in.p + rank * count * E : in.p) : out.p;
  if (kind == Reducing::AllReduce) g.allReduce(in.p, recv, count, t, op, s);
  else if (kind == Reducing::ReduceScatter) g.reduceScatter(in.p, recv, count, t, op, s);
  else g.reduce(in.p, recv, count, t, op, root, s);
  sync(s, g);
  if (count == 0) return;
  const size_t first = kind == Reducing::ReduceScatter ? rank * count : 0;
  const std::vector<char> got = inPlace ? in.download(first * E, count * E) : out.download(0, count * E);
  if (kind == Reducing::Reduce && rank != root) {
    if (!inPlace && got != std::vector<char>(count * E, static_cast<char>(kPoisonByte))) throw std::runtime_error(what + ": non-root recv was written");
    return;
  }
  expectValues(got, count, t, op, [&](size_t i) { return expectedValue(first + i, n, t, op); }, what);
}

/// Every reducing collective x the given types, ops and counts, both placements.
void reducingMatrix(GpuCollectives& g, int rank, int n, cudaStream_t s, const std::vector<DataType>& types,
                    const std::vector<ReduceOp>& ops, const std::vector<size_t>& counts) {
  for (Reducing kind : {Reducing::AllReduce, Reducing::ReduceScatter, Reducing::Reduce})
    for (DataType t : types)
      for (ReduceOp op : ops)
        for (size_t count : counts)
          for (bool inPlace : {false, true}) checkReducing(g, kind, t, op, count, inPlace, n - 1, rank, n, s);
}

enum class Moving { AllGather, Broadcast, AllToAll };

void checkMoving(GpuCollectives& g, Moving kind, DataType t, size_t count, bool inPlace, int root, int rank, int n,
                 cudaStream_t s) {
  const size_t E = dataTypeSize(t);
  const ReduceOp op = ReduceOp::Sum;  // the reference's input values for a plain copy
  const char* name = kind == Moving::AllGather ? "allgather" : kind == Moving::Broadcast ? "broadcast" : "alltoall";
  const std::string what = "rank " + std::to_string(rank) + ": " + describe(name, t, op, count, inPlace) +
                           (kind == Moving::Broadcast ? " root " + std::to_string(root) : "");
  if (kind == Moving::AllGather) {
    DevBuf in(count * E), out(n * count * E);
    out.poison();
    in.upload(inputs(count, 0, rank, t, op));
    if (inPlace) out.upload(inputs(count, 0, rank, t, op), rank * count * E);
    g.allGather(inPlace ? out.p + rank * count * E : in.p, out.p, count, t, s);
    sync(s, g);
    const auto got = out.download(0, n * count * E);
    expectValues(got, n * count, t, op, [&](size_t i) { return inputValue(static_cast<int>(i / count), i % count, t, op); }, what);
  } else if (kind == Moving::Broadcast) {
    DevBuf in(count * E), out(count * E);
    out.poison();
    in.upload(inputs(count, 0, rank, t, op));
    char* recv = inPlace && rank == root ? in.p : out.p;
    g.broadcast(rank == root ? in.p : nullptr, recv, count, t, root, s);
    sync(s, g);
    const auto got = inPlace && rank == root ? in.download(0, count * E) : out.download(0, count * E);
    expectValues(got, count, t, op, [&](size_t i) { return inputValue(root, i, t, op); }, what);
  } else {
    DevBuf in(n * count * E), out(n * count * E);
    out.poison();
    in.upload(inputs(n * count, 0, rank, t, op));
    g.allToAll(in.p, inPlace ? in.p : out.p, count, t, s);
    sync(s, g);
    const auto got = (inPlace ? in : out).download(0, n * count * E);
    expectValues(got, n * count, t, op,
                 [&](size_t i) { return inputValue(static_cast<int>(i / count), rank * count + i % count, t, op); }, what);
  }
}

void movingMatrix(GpuCollectives& g, int rank, int n, cudaStream_t s, const std::vector<DataType>& types,
                  const std::vector<size_t>& counts) {
  for (DataType t : types)
    for (size_t count : counts)
      for (bool inPlace : {false, true}) {
        checkMoving(g, Moving::AllGather, t, count, inPlace, 0, rank, n, s);
        checkMoving(g, Moving::AllToAll, t, count, inPlace, 0, rank, n, s);
        for (int root : {0, n - 1}) checkMoving(g, Moving::Broadcast, t, count, inPlace, root, rank, n, s);
      }
}

/// Every ordered pair exchanges count elements with send/recv, pairs in a global order.
void sendRecvPairs(GpuCollectives& g, int rank, int n, cudaStream_t s, DataType t, size_t count) {
  const size_t E = dataTypeSize(t);
  DevBuf buf(count * E);
  auto exchange = [&](int from, int to) {
    if (rank == from) {
      buf.upload(inputs(count, 0, rank, t, ReduceOp::Sum));
      g.send(buf.p, count, t, to, s);
      sync(s, g);
    } else if (rank == to) {
      buf.poison();
      g.recv(buf.p, count, t, from, s);
      sync(s, g);
      expectValues(buf.download(0, count * E), count, t, ReduceOp::Sum,
                   [&](size_t i) { return inputValue(from, i, t, ReduceOp::Sum); },
                   "rank " + std::to_string(rank) + ": recv of " + std::to_string(count) + " from " + std::to_string(from));
    }
  };
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) {
      exchange(a, b);
      exchange(b, a);
    }
}


/// One ring sendRecv (send to rank + 1, receive from rank - 1) against the
/// reference. Out of place rank r sends base + r elements, so the two
/// directions of a call differ in length (base 0: some are empty); in place
/// every rank sends base elements from, and receives them into, one buffer.
void checkSendRecvRing(GpuCollectives& g, int rank, int n, cudaStream_t s, DataType t, size_t base, bool inPlace) {
  const size_t E = dataTypeSize(t);
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  const size_t sendCount = inPlace ? base : base + rank, recvCount = inPlace ? base : base + prev;
  DevBuf in(sendCount * E), out(recvCount * E);
  in.upload(inputs(sendCount, 0, rank, t, ReduceOp::Sum));
  out.poison();
  const DevBuf& result = inPlace ? in : out;
  g.sendRecv(in.p, sendCount, next, result.p, recvCount, prev, t, s);
  sync(s, g);
  expectValues(result.download(0, recvCount * E), recvCount, t, ReduceOp::Sum,
               [&](size_t i) { return inputValue(prev, i, t, ReduceOp::Sum); },
               "rank " + std::to_string(rank) + ": ring sendrecv of " + std::to_string(recvCount) + " from " +
                   std::to_string(prev) + (inPlace ? " in place" : " out of place"));
}

/// Each direction of a sendRecv pairs with a plain recv / send of the same
/// count: rank 0 sends with sendRecv (receiving nothing) to rank 1's recv,
/// then receives with sendRecv (sending nothing) from rank 1's send.
void checkSendRecvMeetsSendAndRecv(GpuCollectives& g, int rank, cudaStream_t s, DataType t, size_t count) {
  const size_t E = dataTypeSize(t);
  if (rank > 1) return;
  DevBuf buf(count * E);
  const std::string what = "rank " + std::to_string(rank) + ": sendrecv against plain ";
  for (int sender : {0, 1}) {
    if (rank == sender) buf.upload(inputs(count, 0, rank, t, ReduceOp::Sum));
    else buf.poison();
    if (rank == 0 && sender == 0) g.sendRecv(buf.p, count, 1, nullptr, 0, 1, t, s);
    else if (rank == 0) g.sendRecv(nullptr, 0, 1, buf.p, count, 1, t, s);
    else if (sender == 0) g.recv(buf.p, count, t, 0, s);
    else g.send(buf.p, count, t, 0, s);
    sync(s, g);
    if (rank != sender)
      expectValues(buf.download(0, count * E), count, t, ReduceOp::Sum,
                   [&](size_t i) { return inputValue(sender, i, t, ReduceOp::Sum); }, what + (sender ? "send" : "recv"));
  }
}

/// Ring sendRecv for every count, both placements, each followed by
/// send/recv between every pair and a pipelined allreduce on the same
/// object (they share the pipes' sequence counters), then sendRecv against
/// plain send/recv.
void sendRecvRingMatrix(GpuCollectives& g, int rank, int n, cudaStream_t s, DataType t, const std::vector<size_t>& counts) {
  for (size_t count : counts)
    for (bool inPlace : {false, true}) {
      checkSendRecvRing(g, rank, n, s, t, count, inPlace);
      sendRecvPairs(g, rank, n, s, t, 3000);
      checkReducing(g, Reducing::AllReduce, DataType::Float32, ReduceOp::Sum, 30011, false, 0, rank, n, s);
    }
  checkSendRecvMeetsSendAndRecv(g, rank, s, t, 100003);
  checkSendRecvRing(g, rank, n, s, t, 1009, false);
}

/// Captures LL-sized and pipelined allreduces, an allgather, a ring sendRecv
/// and two small ring sendRecvs (the second forwards what the first got) in
/// a CUDA graph and replays it with fresh inputs each time (float32 sum).
/// (With a PortChannel pair both allreduces are two-shot and the small
/// sendRecvs pipelined.)
void checkGraphReplays(GpuCollectives& g, int rank, int n, cudaStream_t s) {
  const DataType t = DataType::Float32;
  const ReduceOp op = ReduceOp::Sum;
  const size_t small = 500, large = 50000, gather = 3000, E = 4;
  const int prev = (rank + n - 1) % n;
  DevBuf a(small * E), b(large * E), c(gather * E), cOut(n * gather * E), ring(gather * E);
  DevBuf hop0(small * E), hop1(small * E), hop2(small * E);
  const int next = (rank + 1) % n, prev2 = (rank + 2 * n - 2) % n;
  cudaGraph_t graph;
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture");
  g.allReduce(a.p, a.p, small, t, op, s);  // LL path, in place
  g.allReduce(b.p, b.p, large, t, op, s);  // two-shot path, in place
  g.allGather(c.p, cOut.p, gather, t, s);
  g.sendRecv(c.p, gather, next, ring.p, gather, prev, t, s);
  g.sendRecv(hop0.p, small, next, hop1.p, small, prev, t, s);
  g.sendRecv(hop1.p, small, next, hop2.p, small, prev, t, s);
  g.allReduce(a.p, a.p, small, t, op, s);  // a second LL call in the same replay (next flag)
  check(cudaStreamEndCapture(s, &graph), "end capture");
  cudaGraphExec_t exec;
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  for (int replay = 0; replay < 6; ++replay) {
    // a: allreduced twice, so start from inputs whose double reduction is known: x then n * x.
    a.upload(inputs(small, replay, rank, t, op));
    b.upload(inputs(large, replay, rank, t, op));
    c.upload(inputs(gather, replay, rank, t, op));
    hop0.upload(inputs(small, replay, rank, t, op));
    check(cudaGraphLaunch(exec, s), "graph launch");
    sync(s, g);
    const std::string what = "rank " + std::to_string(rank) + " replay " + std::to_string(replay);
    expectValues(a.download(0, small * E), small, t, op, [&](size_t i) { return n * expectedValue(i + replay, n, t, op); },
                 what + " LL allreduce");
    expectValues(b.download(0, large * E), large, t, op, [&](size_t i) { return expectedValue(i + replay, n, t, op); },
                 what + " two-shot allreduce");
    expectValues(cOut.download(0, n * gather * E), n * gather, t, op,
                 [&](size_t i) { return inputValue(static_cast<int>(i / gather), i % gather + replay, t, op); },
                 what + " allgather");
    expectValues(ring.download(0, gather * E), gather, t, op, [&](size_t i) { return inputValue(prev, i + replay, t, op); },
                 what + " ring sendrecv");
    expectValues(hop2.download(0, small * E), small, t, op, [&](size_t i) { return inputValue(prev2, i + replay, t, op); },
                 what + " two small sendrecv hops");
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

/// A call that one rank skips: name (as the error says it) and how the
/// others launch it on buf (n * count floats, in place).
struct SkippedCall {
  const char* name;
  size_t count;
  std::function<void(GpuCollectives&, char* buf, size_t count, int rank, cudaStream_t)> launch;
};

std::vector<SkippedCall> skippableCalls() {
  const DataType F = DataType::Float32;
  const ReduceOp S = ReduceOp::Sum;
  return {
      {"allreduce", 100, [=](GpuCollectives& g, char* b, size_t k, int, cudaStream_t s) { g.allReduce(b, b, k, F, S, s); }},
      {"allreduce", 100003, [=](GpuCollectives& g, char* b, size_t k, int, cudaStream_t s) { g.allReduce(b, b, k, F, S, s); }},
      {"allgather", 1000,
       [=](GpuCollectives& g, char* b, size_t k, int r, cudaStream_t s) { g.allGather(b + r * k * 4, b, k, F, s); }},
      {"broadcast", 1000, [=](GpuCollectives& g, char* b, size_t k, int, cudaStream_t s) { g.broadcast(b, b, k, F, 0, s); }},
      {"alltoall", 1000, [=](GpuCollectives& g, char* b, size_t k, int, cudaStream_t s) { g.allToAll(b, b, k, F, s); }},
      {"reducescatter", 1000,
       [=](GpuCollectives& g, char* b, size_t k, int r, cudaStream_t s) { g.reduceScatter(b, b + r * k * 4, k, F, S, s); }},
      {"reduce", 50000, [=](GpuCollectives& g, char* b, size_t k, int, cudaStream_t s) { g.reduce(b, b, k, F, S, 0, s); }},
  };
}

/// The bound every test below holds the library to: gpu_wait_timeout.
constexpr double kTestWaitTimeout = 2.0;

/// Runs fn, which must throw Error(Timeout) holding every fragment, or,
/// where peers may tell (more than two ranks), a peer's failure notice:
/// Error(Remote) saying it told its peers and holding the fragments from
/// the second on (the first names this rank's own wait).
template <typename Fn>
void requireTimeoutOrNotice(Fn fn, int n, const std::vector<std::string>& fragments) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string m = e.what();
    const bool notice = n > 2 && e.code() == ErrorCode::Remote && m.find("told its peers") != std::string::npos;
    if (e.code() != ErrorCode::Timeout && !notice)
      throw std::runtime_error(std::string("wrong error kind ") + errorCodeName(e.code()) + ": " + m);
    for (size_t i = notice ? 1 : 0; i < fragments.size(); ++i)
      if (m.find(fragments[i]) == std::string::npos) throw std::runtime_error("error lacks '" + fragments[i] + "': " + m);
    return;
  }
  throw std::runtime_error("expected an error, got none");
}

/// The last of n ranks never joins `call`: every other rank's synchronize()
/// must end in Error(Timeout) naming itself and the collective within the
/// documented bound (a device wait gives up after gpu_wait_timeout, so the
/// stream is done soon after; synchronize() itself gives up at twice that),
/// or, with three ranks or more, in the failure notice of a rank that timed
/// out first; and the next call must throw at once.
/// (mustSay: more fragments the timeout's message must hold.)
void expectTimeoutWhenARankSkips(const Settings& base, int n, const SkippedCall& call, const RankSetup& setup = nullptr,
                                 const std::vector<std::string>& mustSay = {}) {
  Settings settings = base;
  settings["gpu_wait_timeout"] = std::to_string(kTestWaitTimeout);
  runGpuRanks(n, settings, [&call, &mustSay](GpuCollectives& g, int rank, int n, cudaStream_t s) {
    if (rank == n - 1) return;  // never joins the call
    DevBuf buf(n * call.count * 4);
    const auto start = std::chrono::steady_clock::now();
    call.launch(g, buf.p, call.count, rank, s);
    std::vector<std::string> fragments = {"rank " + std::to_string(rank), std::string("timed out in ") + call.name,
                                          "gpu_wait_timeout=2 s"};
    fragments.insert(fragments.end(), mustSay.begin(), mustSay.end());
    requireTimeoutOrNotice([&] { g.synchronize(s); }, n, fragments);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (took < 0.9 * kTestWaitTimeout || took > 2 * kTestWaitTimeout + 1)
      throw std::runtime_error(std::string(call.name) + ": the timeout took " + std::to_string(took) + " s, want " +
                               std::to_string(kTestWaitTimeout) + " s to " + std::to_string(2 * kTestWaitTimeout + 1) + " s");
    requireTimeoutOrNotice([&] { call.launch(g, buf.p, call.count, rank, s); }, n, {"", "timed out"});
  }, std::chrono::seconds(55), setup);
}

/// The last of n ranks never joins `call` (it aborts its communicator at
/// once); another thread of every other rank calls Communicator::abort()
/// 300 ms after the launch. Their
/// synchronize() must end in Error(Aborted) long before gpu_wait_timeout
/// (30 s here; the bound is 2 s), the next call must throw Error(Aborted)
/// at once, and the GPU must still run work afterwards.
void expectAbortEndsASkippedCall(const Settings& base, int n, const SkippedCall& call, const RankSetup& setup = nullptr) {
  Settings settings = base;
  settings["gpu_wait_timeout"] = "30";
  runGpuRanks(n, settings, [&call](GpuCollectives& g, int rank, int n, cudaStream_t s) {
    if (rank == n - 1) {  // never joins the call; aborts too, as a job's ranks all would
      g.communicator().abort();
      return;
    }
    DevBuf buf(n * call.count * 4);
    call.launch(g, buf.p, call.count, rank, s);
    std::chrono::steady_clock::time_point abortedAt;
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      abortedAt = std::chrono::steady_clock::now();
      g.communicator().abort();
    });
    try {
      requireError([&] { g.synchronize(s); }, ErrorCode::Aborted, {"rank " + std::to_string(rank), "aborted"});
    } catch (...) {
      aborter.join();
      throw;
    }
    aborter.join();
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - abortedAt).count();
    std::printf("%s: synchronize() ended %.1f ms after abort()\n", call.name, took * 1e3);
    if (took > 2.0) throw std::runtime_error(std::string(call.name) + ": synchronize() ended " + std::to_string(took) +
                                             " s after abort(), want < 2 s");
    requireError([&] { call.launch(g, buf.p, call.count, rank, s); }, ErrorCode::Aborted, {"aborted"});
    // The GPU itself is fine: plain work on the stream runs and completes.
    if (cudaMemsetAsync(buf.p, 0, 4, s) != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess)
      throw std::runtime_error("the GPU did not run a memset after the abort");
  }, std::chrono::seconds(55), setup);
}

/// Two ranks: the LL and the pipelined allreduce; three ranks: every other
/// collective (each case a fresh communicator: a timeout ends its use).
void expectTimeoutsWhenARankSkipsACall(const Settings& base) {
  const std::vector<SkippedCall> calls = skippableCalls();
  for (size_t i = 0; i < calls.size(); ++i) expectTimeoutWhenARankSkips(base, i < 2 ? 2 : 3, calls[i]);
}

}  // namespace
}  // namespace plugboard::test
