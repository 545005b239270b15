#include "launch.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>
#include <vector>

#include "plugboard/error.hpp"

namespace plugboard::perf {

bool launchedByLauncher() {
  for (const char* v : {"PLUGBOARD_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"})
    if (std::getenv(v)) return true;
  return false;
}

std::shared_ptr<Bootstrap> bootstrapFromEnvironment() {
  LaunchInfo info = launchInfoFromEnvironment();
  return std::make_shared<TcpBootstrap>(info.rank, info.nranks, TcpBootstrap::uniqueIdFromAddress(info.rootAddress, info.jobKey));
}

int localRankOf(const Bootstrap& bootstrap) {
  if (launchedByLauncher()) {
    int local = launchInfoFromEnvironment().localRank;
    if (local >= 0) return local;
  }
  return bootstrap.rank();
}

namespace {

int childExit(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace

int runLocalRanks(int n, const RankMain& body) {
  UniqueId id = TcpBootstrap::createUniqueId("lo");
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    std::cout.flush();
    pid_t pid = fork();
    if (pid < 0) throw Error(ErrorCode::System, "fork failed while starting rank " + std::to_string(r));
    if (pid == 0) {
      int rc = 1;
      try {
        rc = body(std::make_shared<TcpBootstrap>(r, n, id, std::chrono::seconds(60), "lo"));
      } catch (const std::exception& e) {
        std::cerr << "plugboard-perf: rank " << r << ": " << e.what() << std::endl;
      }
      std::cout.flush();
      _exit(rc);
    }
    pids.push_back(pid);
  }
  int worst = 0, running = n;
  std::chrono::steady_clock::time_point killAt = std::chrono::steady_clock::time_point::max();
  while (running > 0) {
    for (auto& pid : pids) {
      int status = 0;
      if (pid > 0 && waitpid(pid, &status, WNOHANG) == pid) {
        int rc = childExit(status);
        if (rc != 0 && worst == 0) killAt = std::chrono::steady_clock::now() + std::chrono::seconds(15);
        worst = std::max(worst, rc);
        pid = -1;
        --running;
      }
    }
    if (running > 0 && std::chrono::steady_clock::now() > killAt) {
      std::cerr << "plugboard-perf: a rank failed; stopping the " << running << " still running\n";
      for (auto& pid : pids)
        if (pid > 0) { kill(pid, SIGKILL); waitpid(pid, nullptr, 0); pid = -1; }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return worst;
}

}  // namespace plugboard::perf
