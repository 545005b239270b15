#include "options.hpp"

#include <cstdlib>
#include <cstring>
#include <iostream>

#include "plugboard/error.hpp"

namespace plugboard::perf {
namespace {

[[noreturn]] void bad(const std::string& flag, const std::string& value, const std::string& why) {
  throw Error(ErrorCode::InvalidUsage, "option " + flag + " '" + value + "': " + why + " (see --help)");
}

long long parseInt(const std::string& text, const std::string& flag, long long lo, long long hi) {
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end) bad(flag, text, "not an integer");
  if (v < lo || v > hi) bad(flag, text, "out of range " + std::to_string(lo) + ".." + std::to_string(hi));
  return v;
}

bool parseCompare(const std::string& v) {
  if (v == "nccl") return true;
  bad("--compare", v, "the only library to compare with is 'nccl'");
}

}  // namespace

MemMode parseMemMode(const std::string& text) {
  if (text == "gpu") return MemMode::Gpu;
  if (text == "host") return MemMode::Host;
  if (text == "auto") return MemMode::Auto;
  bad("--mem", text, "expected gpu, host or auto");
}

const char* memModeName(MemMode mode) {
  switch (mode) {
    case MemMode::Gpu: return "gpu";
    case MemMode::Host: return "host";
    case MemMode::Auto: return "auto";
  }
  return "?";
}

const char* usageText() {
  return "usage: plugboard-perf [options]\n"
         "  -C, --collective NAME  allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv\n"
         "  -b, --minbytes SIZE    smallest message (e.g. 8, 1K, 16M)           default 32M\n"
         "  -e, --maxbytes SIZE    largest message                              default 32M\n"
         "  -f, --stepfactor F     multiply the size by F each step\n"
         "  -i, --stepbytes SIZE   or add SIZE each step (when -f is not given)  default 1M\n"
         "  -n, --iters N          timed iterations per size                     default 20\n"
         "  -w, --warmup_iters N   untimed iterations per size                   default 5\n"
         "  -c, --check 0/1        check every result against a reference       default 1\n"
         "  -d, --datatype T       int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double\n"
         "                         f8e4m3 f8e5m2 (host buffers)                 default float\n"
         "  -o, --op OP            sum prod min max avg premulsum (GPU: a PreMulSum of scalar 1) default sum\n"
         "  -r, --root R           root of broadcast/reduce                      default 0\n"
         "  -G N                   GPU: capture the -n iterations in a CUDA graph and time N launches\n"
         "  -z, -t, -g             accepted for nccl-tests compatibility (one thread, one GPU per rank)\n"
         "  --nranks N             start N local ranks (otherwise: mpirun/torchrun/Slurm env, or 1)\n"
         "  --mem gpu|host|auto    device buffers (GpuCollectives, rank r on GPU localRank % GPUs) or\n"
         "                         host buffers (HostCollectives); auto: gpu when built with CUDA and a\n"
         "                         CUDA device is present                         default auto\n"
         "  --compare nccl         GPU: run the same sweep through NCCL (dlopen) and add its time,\n"
         "                         busbw, #wrong and x_nccl = our time / NCCL's time to every row\n"
         "  --nccl-lib PATH        the NCCL library (else $PLUGBOARD_NCCL_LIB, else libnccl.so.2 from\n"
         "                         the dynamic linker, then <site-packages>/nvidia/nccl/lib)\n"
         "  --nccl-symmetric       with --compare nccl: NCCL's own buffers from ncclMemAlloc, registered\n"
         "                         with ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC) for its symmetric\n"
         "                         kernels (NCCL 2.27 or later; an error names the library otherwise)\n"
         "  --plan FILE            run the collective through this execution plan (docs/execution-plans.md)\n"
         "                         instead of the built-in algorithm (GPU: GpuPlanExecutor; host: HostPlanExecutor)\n"
         "  --find-nccl            print the NCCL --compare nccl would load (version, path) and exit;\n"
         "                         exit status 1 and every path tried when there is none\n"
         "  --csv FILE             also write the table as CSV\n"
         "  --plot FILE.svg        draw bus bandwidth and time against size\n";
}

size_t parseSize(const std::string& text, const std::string& flag) {
  if (text.empty()) bad(flag, text, "empty size");
  size_t mult = 1;
  std::string digits = text;
  switch (text.back()) {
    case 'K': case 'k': mult = 1ull << 10; digits.pop_back(); break;
    case 'M': case 'm': mult = 1ull << 20; digits.pop_back(); break;
    case 'G': case 'g': mult = 1ull << 30; digits.pop_back(); break;
    default: break;
  }
  long long v = parseInt(digits, flag, 0, (1ll << 40));
  return static_cast<size_t>(v) * mult;
}

Options parseOptions(int argc, char** argv) {
  Options o;
  bool factorGiven = false;
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    if (f == "-h" || f == "--help") { std::cout << usageText(); std::exit(0); }
    if (f == "--find-nccl") { o.findNccl = true; continue; }
    if (f == "--nccl-symmetric") { o.ncclSymmetric = true; continue; }
    if (i + 1 >= argc) bad(f, "", "needs a value");
    std::string v = argv[++i];
    if (f == "-b" || f == "--minbytes") o.minBytes = parseSize(v, f);
    else if (f == "-e" || f == "--maxbytes") o.maxBytes = parseSize(v, f);
    else if (f == "-f" || f == "--stepfactor") {
      char* end = nullptr;
      o.stepFactor = std::strtod(v.c_str(), &end);
      if (*end || o.stepFactor <= 1.0) bad(f, v, "must be a number > 1");
      factorGiven = true;
    } else if (f == "-i" || f == "--stepbytes") o.stepBytes = parseSize(v, f);
    else if (f == "-n" || f == "--iters") o.iters = static_cast<int>(parseInt(v, f, 1, 1000000));
    else if (f == "-w" || f == "--warmup_iters") o.warmup = static_cast<int>(parseInt(v, f, 0, 1000000));
    else if (f == "-c" || f == "--check") o.check = parseInt(v, f, 0, 1) != 0;
    else if (f == "-d" || f == "--datatype") o.type = parseDataType(v);
    else if (f == "-o" || f == "--op") {
      o.preMul = v == "premulsum";
      o.op = o.preMul ? ReduceOp::Sum : parseReduceOp(v);
    }
    else if (f == "-r" || f == "--root") o.root = static_cast<int>(parseInt(v, f, 0, 1 << 20));
    else if (f == "-C" || f == "--collective") o.collective = v;
    else if (f == "--nranks") o.nranks = static_cast<int>(parseInt(v, f, 1, 256));
    else if (f == "--csv") o.csv = v;
    else if (f == "--plan") o.plan = v.empty() ? throw Error(ErrorCode::InvalidUsage, "option --plan: empty path") : v;
    else if (f == "--plot") o.plot = v;
    else if (f == "-z" || f == "-a") parseInt(v, f, 0, 3);
    else if (f == "-t" || f == "-g") parseInt(v, f, 1, 1);  // one thread, one device per rank
    else if (f == "-G" || f == "--cudagraph") o.graphLaunches = static_cast<int>(parseInt(v, f, 0, 1000000));
    else if (f == "--mem") o.mem = parseMemMode(v);
    else if (f == "--compare") o.compareNccl = parseCompare(v);
    else if (f == "--nccl-lib") o.ncclLib = v.empty() ? throw Error(ErrorCode::InvalidUsage, "option --nccl-lib: empty path") : v;
    else bad(f, v, "unknown option");
  }
  if (o.minBytes > o.maxBytes) bad("-b", std::to_string(o.minBytes), "larger than -e " + std::to_string(o.maxBytes));
  if (o.ncclSymmetric && !o.compareNccl) bad("--nccl-symmetric", "", "needs --compare nccl");
  if (o.preMul && o.mem == MemMode::Host) bad("-o", "premulsum", "is a GPU op (NCCL's PreMulSum): not with --mem host");
  if (!factorGiven) o.stepFactor = 1.0;
  if (!factorGiven && o.stepBytes == 0) bad("-i", "0", "step must be positive");
  return o;
}

}  // namespace plugboard::perf
