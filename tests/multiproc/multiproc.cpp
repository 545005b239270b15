#include "multiproc.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>

namespace plugboard::test {
namespace {

constexpr size_t kMaxMessage = 4096;

// Child side: run the body, write the failure text to the pipe, exit.
[[noreturn]] void runChild(int rank, int nranks, const UniqueId& id, const RankBody& body, int fd) {
  std::string failure;
  try {
    body(rank, nranks, id);
    if (::testing::Test::HasFailure()) failure = "gtest assertion failed in rank " + std::to_string(rank);
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "unknown exception";
  }
  if (!failure.empty()) {
    ssize_t ignored = ::write(fd, failure.data(), std::min(failure.size(), kMaxMessage));
    (void)ignored;
  }
  ::close(fd);
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(failure.empty() ? 0 : 1);
}

std::string drain(int fd) {
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

}  // namespace

std::vector<RankResult> runRanksEach(const std::vector<RankBody>& bodies, std::chrono::milliseconds timeout) {
  const int nranks = static_cast<int>(bodies.size());
  UniqueId id = TcpBootstrap::createUniqueId("lo");
  std::vector<pid_t> pids(nranks, -1);
  std::vector<int> pipes(nranks, -1);
  std::vector<RankResult> results(nranks);
  for (int r = 0; r < nranks; ++r) {
    results[r].rank = r;
    if (!bodies[r]) { results[r].exitCode = 0; continue; }
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    std::fflush(stdout);
    std::fflush(stderr);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      runChild(r, nranks, id, bodies[r], fds[1]);
    }
    ::close(fds[1]);
    pids[r] = pid;
    pipes[r] = fds[0];
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int running = 0;
  for (pid_t p : pids) running += p > 0;
  while (running > 0) {
    for (int r = 0; r < nranks; ++r) {
      if (pids[r] <= 0) continue;
      int status = 0;
      if (::waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        if (WIFEXITED(status)) results[r].exitCode = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) results[r].signal = WTERMSIG(status);
        pids[r] = -1;
        --running;
      }
    }
    if (running == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < nranks; ++r) {
        if (pids[r] <= 0) continue;
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], nullptr, 0);
        results[r].timedOut = true;
        pids[r] = -1;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int r = 0; r < nranks; ++r) {
    if (pipes[r] < 0) continue;
    results[r].message = drain(pipes[r]);
    ::close(pipes[r]);
  }
  return results;
}

std::vector<RankResult> runRanks(int nranks, std::chrono::milliseconds timeout, const RankBody& body) {
  return runRanksEach(std::vector<RankBody>(static_cast<size_t>(nranks), body), timeout);
}

void expectAllPassed(const std::vector<RankResult>& results) {
  for (const auto& r : results) {
    EXPECT_FALSE(r.timedOut) << "rank " << r.rank << " was killed after the test timeout";
    EXPECT_EQ(r.signal, 0) << "rank " << r.rank << " died of signal " << r.signal << ": " << r.message;
    EXPECT_EQ(r.exitCode, 0) << "rank " << r.rank << " failed: " << r.message;
  }
}

}  // namespace plugboard::test
