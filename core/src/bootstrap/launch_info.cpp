#include <cerrno>
#include <cstdlib>
#include <string>

#include "plugboard/bootstrap.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {
namespace {

// The variables one launcher sets.
struct LauncherVars {
  const char* name;
  const char* rank;
  const char* size;
  const char* localRank;
};

constexpr LauncherVars kLaunchers[] = {
    {"Plugboard", "PLUGBOARD_RANK", "PLUGBOARD_NRANKS", "PLUGBOARD_LOCAL_RANK"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// Parses a whole decimal integer; throws Error(Config) naming the variable.
long parseNumber(const char* var, const char* text) {
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0')
    throw Error(ErrorCode::Config, std::string("bootstrap: environment variable ") + var + "='" + text +
                                       "' is not a whole number");
  return v;
}

long requireNumber(const LauncherVars& l, const char* var) {
  const char* v = env(var);
  if (!v)
    throw Error(ErrorCode::Config, std::string("bootstrap: ") + l.name + " launch detected (" + l.rank + " or " +
                                       l.size + " is set) but " + var + " is missing");
  return parseNumber(var, v);
}

// Fills rank, nranks and localRank from the first launcher whose variables
// are present; returns it, or nullptr when none is.
const LauncherVars* readRanks(LaunchInfo& info) {
  for (const auto& l : kLaunchers) {
    if (!env(l.rank) && !env(l.size)) continue;
    long rank = requireNumber(l, l.rank), nranks = requireNumber(l, l.size);
    if (nranks < 1 || nranks > (1 << 24) || rank < 0 || rank >= nranks)
      throw Error(ErrorCode::Config, std::string("bootstrap: ") + l.rank + "=" + env(l.rank) + " and " + l.size +
                                         "=" + env(l.size) + " do not describe a rank: need 0 <= rank < size");
    info.rank = static_cast<int>(rank);
    info.nranks = static_cast<int>(nranks);
    if (const char* local = env(l.localRank)) info.localRank = static_cast<int>(parseNumber(l.localRank, local));
    return &l;
  }
  return nullptr;
}

// Open MPI on one host: every rank derives the same port from the job id.
std::string ompiSingleHostAddress() {
  const char* job = env("OMPI_MCA_ess_base_jobid");
  if (!job) job = env("PMIX_NAMESPACE");
  if (!job)
    throw Error(ErrorCode::Config, "bootstrap: Open MPI launch without PLUGBOARD_BOOTSTRAP_ADDR or MASTER_ADDR, and "
                                   "neither OMPI_MCA_ess_base_jobid nor PMIX_NAMESPACE is set to derive a port from; "
                                   "set PLUGBOARD_BOOTSTRAP_ADDR=host:port");
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const char* p = job; *p; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
  return "127.0.0.1:" + std::to_string(20000 + h % 10000);
}

std::string masterAddress() {
  const char* port = env("MASTER_PORT");
  if (!port) throw Error(ErrorCode::Config, "bootstrap: MASTER_ADDR is set but MASTER_PORT is missing");
  long p = parseNumber("MASTER_PORT", port);
  if (p < 1 || p > 65534)
    throw Error(ErrorCode::Config, std::string("bootstrap: MASTER_PORT='") + port +
                                       "' is not a port in 1-65534 (the bootstrap uses MASTER_PORT + 1)");
  std::string host = env("MASTER_ADDR");
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";  // bare IPv6
  return host + ":" + std::to_string(p + 1);
}

/// LaunchInfo::jobKey: the first job identity the environment offers.
std::string jobKeyFromEnvironment() {
  if (const char* v = env("PLUGBOARD_JOB_ID")) return std::string("PLUGBOARD_JOB_ID=") + v;
  if (const char* v = env("TORCHELASTIC_RUN_ID"); v && std::string(v) != "none")
    return std::string("TORCHELASTIC_RUN_ID=") + v;
  if (const char* v = env("SLURM_JOB_ID")) {
    const char* step = env("SLURM_STEP_ID");
    return std::string("SLURM_JOB_ID=") + v + (step ? std::string(".") + step : "");
  }
  if (const char* v = env("PMIX_NAMESPACE")) return std::string("PMIX_NAMESPACE=") + v;
  if (const char* v = env("OMPI_MCA_ess_base_jobid")) return std::string("OMPI_MCA_ess_base_jobid=") + v;
  return "";
}

}  // namespace

LaunchInfo launchInfoFromEnvironment() {
  LaunchInfo info;
  const LauncherVars* l = readRanks(info);
  if (!l)
    throw Error(ErrorCode::Config, "bootstrap: no launcher found in the environment: set PLUGBOARD_RANK and "
                                   "PLUGBOARD_NRANKS, or run under torchrun (RANK, WORLD_SIZE), Open MPI "
                                   "(OMPI_COMM_WORLD_RANK) or Slurm (SLURM_PROCID)");
  std::string where;
  if (const char* addr = env("PLUGBOARD_BOOTSTRAP_ADDR")) {
    info.rootAddress = addr, where = "PLUGBOARD_BOOTSTRAP_ADDR";
  } else if (env("MASTER_ADDR")) {
    info.rootAddress = masterAddress(), where = "MASTER_ADDR, MASTER_PORT + 1";
  } else if (info.nranks == 1) {
    info.rootAddress = "127.0.0.1:0", where = "single rank, any local port";
  } else if (std::string(l->name) == "Open MPI" && env("OMPI_COMM_WORLD_LOCAL_SIZE") &&
             std::string(env("OMPI_COMM_WORLD_LOCAL_SIZE")) == env("OMPI_COMM_WORLD_SIZE")) {
    info.rootAddress = ompiSingleHostAddress(), where = "Open MPI single host, port from the job id";
  } else {
    throw Error(ErrorCode::Config, std::string("bootstrap: ") + l->name + " launch of " +
                                       std::to_string(info.nranks) + " ranks, but nothing says where rank 0 "
                                       "listens: set PLUGBOARD_BOOTSTRAP_ADDR=host:port (or MASTER_ADDR and "
                                       "MASTER_PORT) to an address of rank 0's host");
  }
  info.jobKey = jobKeyFromEnvironment();
  info.source = std::string(l->name) + " (" + l->rank + ", " + l->size + "; root from " + where +
                (info.jobKey.empty() ? "" : "; job " + info.jobKey) + ")";
  PB_LOG(Info, "BOOTSTRAP", "launch: rank " << info.rank << " of " << info.nranks << ", root "
                                            << info.rootAddress << ", from " << info.source);
  return info;
}

}  // namespace plugboard
