// Starts two ranks of a GPU microbenchmark as forked processes (before any
// CUDA call in the parent) and returns the worse exit status.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include "plugboard/bootstrap.hpp"

namespace plugboard::bench {

/// Runs body(rank, id) in two forked processes sharing a loopback unique
/// id; a body that throws prints the reason and exits 1.
inline int runTwoRanks(const std::function<int(int rank, const UniqueId& id)>& body) {
  UniqueId id = TcpBootstrap::createUniqueId("lo");
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      int rc = 1;
      try {
        rc = body(r, id);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
      }
      std::fflush(stdout);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  int worst = 0;
  for (pid_t p : pids) {
    int status = 0;
    waitpid(p, &status, 0);
    worst = std::max(worst, WIFEXITED(status) ? WEXITSTATUS(status) : 1);
  }
  return worst;
}

}  // namespace plugboard::bench
