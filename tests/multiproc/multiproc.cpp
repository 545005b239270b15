#include "multiproc.hpp"

#include <dlfcn.h>
#include <execinfo.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <ucontext.h>

namespace plugboard::test {
namespace {

constexpr size_t kMaxMessage = 4096;

/// "0x... (libfoo.so+0x1234 symbol)" for a code address (dladdr: not
/// async-signal-safe, acceptable in a test process that is dying anyway).
void describeAddress(const char* label, const void* pc) {
  char line[512];
  Dl_info info{};
  const bool known = pc && dladdr(pc, &info) && info.dli_fname;
  const int n = known ? std::snprintf(line, sizeof(line), "%s %p (%s+%#lx %s)\n", label, pc, info.dli_fname,
                                      static_cast<unsigned long>(static_cast<const char*>(pc) -
                                                                 static_cast<const char*>(info.dli_fbase)),
                                      info.dli_sname ? info.dli_sname : "?")
                      : std::snprintf(line, sizeof(line), "%s %p (no object)\n", label, pc);
  ssize_t ignored = ::write(2, line, static_cast<size_t>(std::max(n, 0)));
  (void)ignored;
}

/// A rank that crashes prints where to stderr (the test's log): the
/// faulting pc and address, the word on top of the stack (the caller, when
/// the fault is a call through a null pointer) and a backtrace; then it dies
/// of the same signal.
void printCrashAndDie(int sig, siginfo_t* info, void* context) {
  const auto* uc = static_cast<const ucontext_t*>(context);
  const void* pc = reinterpret_cast<const void*>(uc->uc_mcontext.gregs[REG_RIP]);
  const void* top = *reinterpret_cast<void* const*>(uc->uc_mcontext.gregs[REG_RSP]);
  char head[128];
  const int n = std::snprintf(head, sizeof(head), "rank process crashed: signal %d at address %p\n", sig, info->si_addr);
  ssize_t ignored = ::write(2, head, static_cast<size_t>(std::max(n, 0)));
  (void)ignored;
  describeAddress("  pc", pc);
  describeAddress("  top of stack", top);
  auto* const* stack = reinterpret_cast<void* const*>(uc->uc_mcontext.gregs[REG_RSP]);
  for (int i = 1; i < 24; ++i)
    if (Dl_info di{}; stack[i] && dladdr(stack[i], &di) && di.dli_fname) describeAddress("  stack word", stack[i]);
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void installCrashReport() {
  void* warm[1];
  backtrace(warm, 1);  // loads the unwinder now, not inside the handler
  struct sigaction sa {};
  sa.sa_sigaction = printCrashAndDie;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::sigaction(sig, &sa, nullptr);
}

// Child side: run the body, write the failure text to the pipe, exit.
[[noreturn]] void runChild(int rank, int nranks, const UniqueId& id, const RankBody& body, int fd) {
  installCrashReport();
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

std::chrono::milliseconds scaledTestTimeout(std::chrono::milliseconds timeout) {
  const char* text = std::getenv("PB_TEST_TIMEOUT_SCALE");
  if (!text || !*text) return timeout;
  char* end = nullptr;
  const double scale = std::strtod(text, &end);
  if (*end != '\0' || !(scale >= 1 && scale <= 100))
    throw std::runtime_error(std::string("PB_TEST_TIMEOUT_SCALE must be a number from 1 to 100, got '") + text + "'");
  return std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(timeout.count()) * scale));
}

std::vector<RankResult> runRanksEach(const std::vector<RankBody>& bodies, std::chrono::milliseconds timeout) {
  const int nranks = static_cast<int>(bodies.size());
  const std::chrono::milliseconds limit = scaledTestTimeout(timeout);  // before any rank starts: it may throw
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
  auto deadline = std::chrono::steady_clock::now() + limit;
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
