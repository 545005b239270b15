// gloo_bench: times Gloo's allreduce (float sum) and allgather over Gloo's TCP
// transport on loopback, for comparison with plugboard-perf. Not part of the
// Plugboard build; bench/run-host-bench.sh compiles it with
//   g++ -O2 -std=c++17 gloo_bench.cpp -lgloo -lpthread
//
// It forks N ranks. Each rank rendezvouses through a gloo FileStore in a fresh
// temporary directory, connects a full mesh over gloo::transport::tcp bound to
// 127.0.0.1, and for every size -b..-e (times -f) runs warmup + timed
// iterations. The reported time is each rank's mean time per iteration,
// averaged over ranks (as plugboard-perf does). After timing, the output buffer
// is poisoned, the collective is run once more and every element is checked;
// any wrong value makes the program exit non-zero.
//
// Size conventions follow plugboard-perf: allreduce size = count * 4 bytes;
// allgather size = TOTAL gathered bytes (each rank sends size / nranks).
// Sizes whose per-rank element count would be 0 are skipped.
//
// Output CSV (to --csv FILE, else stdout): library,collective,nranks,size_bytes,time_us
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Options {
  int nranks = 4;
  size_t minBytes = 8;
  size_t maxBytes = 1 << 20;
  double factor = 2.0;
  int iters = 20;
  int warmup = 5;
  std::vector<std::string> collectives = {"allreduce", "allgather"};
  std::string csv;
  int timeoutSec = 600;
  gloo::AllreduceOptions::Algorithm algorithm = gloo::AllreduceOptions::Algorithm::RING;
};

[[noreturn]] void usage(int rc) {
  std::fprintf(rc ? stderr : stdout,
               "usage: gloo_bench [--nranks N] [-b SIZE] [-e SIZE] [-f F] [-n ITERS] [-w WARMUP]\n"
               "                  [-C allreduce,allgather] [--algorithm ring|bcube] [--csv FILE] [--timeout SEC]\n"
               "  SIZE accepts K/M/G suffixes. Defaults: 4 ranks, 8..1M, factor 2, 20 iters, 5 warmup,\n"
               "  allreduce algorithm ring (gloo's default for AllreduceOptions::UNSPECIFIED).\n");
  std::exit(rc);
}

size_t parseSize(const std::string& s) {
  if (s.empty()) usage(2);
  size_t mult = 1;
  std::string digits = s;
  switch (s.back()) {
    case 'K': case 'k': mult = 1ull << 10; digits.pop_back(); break;
    case 'M': case 'm': mult = 1ull << 20; digits.pop_back(); break;
    case 'G': case 'g': mult = 1ull << 30; digits.pop_back(); break;
    default: break;
  }
  char* end = nullptr;
  unsigned long long v = std::strtoull(digits.c_str(), &end, 10);
  if (digits.empty() || *end) usage(2);
  return static_cast<size_t>(v) * mult;
}

int parseInt(const std::string& s, int lo) {
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end || v < lo) usage(2);
  return static_cast<int>(v);
}

Options parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    if (f == "-h" || f == "--help") usage(0);
    if (i + 1 >= argc) usage(2);
    std::string v = argv[++i];
    if (f == "--nranks" || f == "-N") o.nranks = parseInt(v, 1);
    else if (f == "-b") o.minBytes = parseSize(v);
    else if (f == "-e") o.maxBytes = parseSize(v);
    else if (f == "-f") { o.factor = std::strtod(v.c_str(), nullptr); if (o.factor <= 1.0) usage(2); }
    else if (f == "-n") o.iters = parseInt(v, 1);
    else if (f == "-w") o.warmup = parseInt(v, 0);
    else if (f == "--timeout") o.timeoutSec = parseInt(v, 1);
    else if (f == "--csv") o.csv = v;
    else if (f == "--algorithm") {
      if (v == "ring") o.algorithm = gloo::AllreduceOptions::Algorithm::RING;
      else if (v == "bcube") o.algorithm = gloo::AllreduceOptions::Algorithm::BCUBE;
      else usage(2);
    }
    else if (f == "-C") {
      o.collectives.clear();
      std::stringstream ss(v);
      for (std::string c; std::getline(ss, c, ',');) {
        if (c != "allreduce" && c != "allgather") usage(2);
        o.collectives.push_back(c);
      }
    } else usage(2);
  }
  if (o.minBytes == 0 || o.minBytes > o.maxBytes) usage(2);
  return o;
}

std::vector<size_t> sweep(const Options& o) {
  std::vector<size_t> sizes;
  for (size_t b = o.minBytes; b <= o.maxBytes;) {
    sizes.push_back(b);
    size_t next = static_cast<size_t>(static_cast<double>(b) * o.factor);
    b = next > b ? next : b + 1;
  }
  return sizes;
}

using Clock = std::chrono::steady_clock;

class Rank {
 public:
  Rank(std::shared_ptr<gloo::Context> ctx, const Options& o) : ctx_(std::move(ctx)), o_(o) {}

  void barrier() {
    gloo::BarrierOptions opts(ctx_);
    opts.setTag(kControlTag);
    gloo::barrier(opts);
  }

  /// Element-wise sum over ranks of `mine` (used for times and wrong counts).
  std::vector<double> sumOverRanks(std::vector<double> mine) {
    std::vector<double> out(mine.size());
    gloo::AllreduceOptions opts(ctx_);
    opts.setTag(kControlTag);
    opts.setInput(mine.data(), mine.size());
    opts.setOutput(out.data(), out.size());
    opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<double>));
    gloo::allreduce(opts);
    return out;
  }

  /// Times one collective at one size; returns {mean time us over ranks, wrong elements over ranks}.
  std::pair<double, double> measure(const std::string& coll, size_t count) {
    const int n = ctx_->size, r = ctx_->rank;
    std::vector<float> in, out;
    if (coll == "allreduce") {
      in.resize(count);
      out.resize(count);
      for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>((r + 1) * static_cast<int>(i % 13 + 1));
    } else {  // allgather: count elements per rank
      in.resize(count);
      out.resize(count * static_cast<size_t>(n));
      for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(r * 4096 + static_cast<int>(i % 4096));
    }
    auto runOnce = [&] {
      if (coll == "allreduce") {
        gloo::AllreduceOptions opts(ctx_);
        opts.setTag(kDataTag);
        opts.setAlgorithm(o_.algorithm);
        opts.setInput(in.data(), count);
        opts.setOutput(out.data(), count);
        opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
        gloo::allreduce(opts);
      } else {
        gloo::AllgatherOptions opts(ctx_);
        opts.setTag(kDataTag);
        opts.setInput(in.data(), count);
        opts.setOutput(out.data(), out.size());
        gloo::allgather(opts);
      }
    };
    for (int i = 0; i < o_.warmup; ++i) runOnce();
    barrier();
    auto t0 = Clock::now();
    for (int i = 0; i < o_.iters; ++i) runOnce();
    double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / o_.iters;

    // Check: poison the output, run once more, compare every element.
    std::fill(out.begin(), out.end(), -1.0f);
    runOnce();
    double wrong = 0;
    if (coll == "allreduce") {
      const int rankSum = n * (n + 1) / 2;
      for (size_t i = 0; i < count; ++i)
        if (out[i] != static_cast<float>(rankSum * static_cast<int>(i % 13 + 1))) ++wrong;
    } else {
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < count; ++i)
          if (out[static_cast<size_t>(p) * count + i] != static_cast<float>(p * 4096 + static_cast<int>(i % 4096)))
            ++wrong;
    }
    std::vector<double> sums = sumOverRanks({us, wrong});
    return {sums[0] / n, sums[1]};
  }

 private:
  static constexpr uint32_t kDataTag = 1;
  static constexpr uint32_t kControlTag = 2;
  std::shared_ptr<gloo::Context> ctx_;
  const Options& o_;
};

int rankMain(int rank, const Options& o, const std::string& storeDir) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  attr.ai_family = AF_INET;
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(storeDir);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, o.nranks);
  ctx->setTimeout(std::chrono::seconds(o.timeoutSec));
  ctx->connectFullMesh(store, dev);

  Rank me(ctx, o);
  const bool leader = rank == 0;
  std::ostringstream csv;
  csv << "library,collective,nranks,size_bytes,time_us\n";
  double totalWrong = 0;
  if (leader)
    std::printf("# gloo_bench: %d ranks, gloo tcp transport on 127.0.0.1, float, iters %d, warmup %d, allreduce %s\n"
                "# %-10s %12s %12s %10s %8s\n",
                o.nranks, o.iters, o.warmup,
                o.algorithm == gloo::AllreduceOptions::Algorithm::BCUBE ? "bcube" : "ring", "collective", "size(B)", "count/rank", "time(us)", "#wrong");
  for (const std::string& coll : o.collectives) {
    size_t last = 0;
    for (size_t bytes : sweep(o)) {
      size_t elems = bytes / sizeof(float);
      size_t count = coll == "allgather" ? elems / static_cast<size_t>(o.nranks) : elems;
      if (count == 0) continue;  // plugboard-perf would report size 0: nothing to move
      size_t size = coll == "allgather" ? count * static_cast<size_t>(o.nranks) * sizeof(float) : count * sizeof(float);
      if (size == last) continue;
      last = size;
      auto [us, wrong] = me.measure(coll, count);
      totalWrong += wrong;
      if (leader) {
        std::printf("  %-10s %12zu %12zu %10.2f %8.0f\n", coll.c_str(), size, count, us, wrong);
        std::fflush(stdout);
        char line[160];
        std::snprintf(line, sizeof(line), "gloo,%s,%d,%zu,%.3f\n", coll.c_str(), o.nranks, size, us);
        csv << line;
      }
    }
  }
  if (leader) {
    std::printf("# wrong values: %.0f %s\n", totalWrong, totalWrong == 0 ? "OK" : "FAILED");
    if (o.csv.empty()) {
      std::cout << csv.str();
    } else {
      std::ofstream f(o.csv);
      f << csv.str();
      if (!f) { std::fprintf(stderr, "gloo_bench: cannot write %s\n", o.csv.c_str()); return 1; }
    }
    std::cout.flush();
  }
  me.barrier();
  return totalWrong == 0 ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parseOptions(argc, argv);
  char tmpl[] = "/tmp/gloo_bench.XXXXXX";
  if (!mkdtemp(tmpl)) { std::perror("gloo_bench: mkdtemp"); return 1; }
  const std::string storeDir = tmpl;

  std::vector<pid_t> pids;
  for (int r = 0; r < o.nranks; ++r) {
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) { std::perror("gloo_bench: fork"); return 1; }
    if (pid == 0) {
      int rc = 1;
      try {
        rc = rankMain(r, o, storeDir);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "gloo_bench: rank %d: %s\n", r, e.what());
      }
      std::fflush(stdout);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  // Wait for every rank; once one fails, give the rest 15 s, then stop them
  // (a dead peer otherwise leaves them blocked until the gloo timeout).
  int worst = 0;
  size_t running = pids.size();
  Clock::time_point killAt = Clock::time_point::max();
  while (running > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
      if (rc != 0 && worst == 0) killAt = Clock::now() + std::chrono::seconds(15);
      if (rc > worst) worst = rc;
      for (auto& p : pids)
        if (p == pid) p = -1;
      --running;
      continue;
    }
    if (Clock::now() > killAt) {
      std::fprintf(stderr, "gloo_bench: a rank failed; stopping the %zu still running\n", running);
      for (auto& p : pids)
        if (p > 0) { kill(p, SIGKILL); waitpid(p, nullptr, 0); p = -1; }
      break;
    }
    usleep(10000);
  }
  std::error_code ec;
  std::filesystem::remove_all(storeDir, ec);
  if (worst) std::fprintf(stderr, "gloo_bench: a rank exited with status %d\n", worst);
  return worst;
}
