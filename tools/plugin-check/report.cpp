#include "report.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>

namespace plugboard::check {
namespace {

/// What a supervising parent needs to know of the checking process, and a
/// signal handler may write: the running check, and whether the process
/// reported its own end (a FAIL line, or the summary).
struct CheckState {
  char current[256];
  volatile sig_atomic_t reported;
};
CheckState gLocalState{};
/// Points into a shared page once shareCheckState() ran.
CheckState* gState = &gLocalState;
#define gCurrent (gState->current)

/// Sets gCurrent (truncated), or clears it for an empty name.
void setCurrent(const std::string& name) {
  size_t n = std::min(name.size(), sizeof(gCurrent) - 1);
  std::memcpy(gCurrent, name.data(), n);
  gCurrent[n] = '\0';
}

/// One background thread that exits the process when a check overruns.
class Watchdog {
 public:
  /// The process-wide watchdog (started on first use, never stopped).
  static Watchdog& instance() {
    static Watchdog* w = new Watchdog();  // leaked on purpose: runs until exit
    return *w;
  }

  /// Starts the clock for the check called name.
  void arm(const std::string& name, double seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    name_ = name;
    seconds_ = seconds;
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
    armed_ = true;
    cv_.notify_all();
  }

  /// Stops the clock.
  void disarm() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = false;
  }

 private:
  Watchdog() { std::thread([this] { loop(); }).detach(); }

  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (!armed_) {
        cv_.wait(lock);
        continue;
      }
      if (cv_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ &&
          std::chrono::steady_clock::now() >= deadline_) {
        std::printf("FAIL %s: did not finish within %.0f s (a plugin call blocked or never completed)\n",
                    name_.c_str(), seconds_);
        gState->reported = 1;
        std::fflush(stdout);
        _exit(1);
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;
  std::string name_;
  double seconds_ = 0;
  std::chrono::steady_clock::time_point deadline_;
};

/// Writes s to stdout with async-signal-safe calls only.
void writeRaw(const char* s) {
  ssize_t ignored = ::write(STDOUT_FILENO, s, std::strlen(s));
  (void)ignored;
}

void onCrash(int sig) {
  gState->reported = 1;
  writeRaw("FAIL ");
  writeRaw(gCurrent[0] ? gCurrent : "(between checks)");
  writeRaw(": crashed with signal ");
  writeRaw(sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : sig == SIGILL ? "SIGILL"
           : sig == SIGFPE ? "SIGFPE" : "SIGABRT");
  writeRaw("\n");
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

void shareCheckState() {
  void* page = mmap(nullptr, sizeof(CheckState), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return;  // unsupervised then: the checks still run
  gState = new (page) CheckState{};
}

void markReported() { gState->reported = 1; }

bool reportAbruptEnd(int waitStatus) {
  if (gState->reported) return false;
  const std::string check = gCurrent[0] ? gCurrent : "(between checks)";
  if (WIFEXITED(waitStatus))
    std::printf("FAIL %s: the process ended with exit status %d inside the plugin (exit or _exit called "
                "during the check)\n", check.c_str(), WEXITSTATUS(waitStatus));
  else if (WIFSIGNALED(waitStatus))
    std::printf("FAIL %s: the process was killed by signal %d during the check\n", check.c_str(),
                WTERMSIG(waitStatus));
  std::printf("plugboard-plugin-check: stopped at %s\n", check.c_str());
  std::fflush(stdout);
  return true;
}

void installCrashHandler() {
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) signal(sig, onCrash);
}

Report::Report(double watchdogSeconds) : watchdogSeconds_(watchdogSeconds) {}

bool Report::run(const std::string& name, const std::function<void()>& body) {
  setCurrent(name);
  Watchdog::instance().arm(name, watchdogSeconds_);
  bool ok = false;
  try {
    body();
    pass(name);
    ok = true;
  } catch (const CheckSkipped& e) {
    skip(name, e.what());
  } catch (const CheckFailed& e) {
    fail(name, e.what());
  } catch (const std::exception& e) {
    fail(name, std::string("unexpected error in the checker: ") + e.what());
  }
  Watchdog::instance().disarm();
  setCurrent("");
  return ok;
}

void Report::pass(const std::string& name) {
  ++passed_;
  std::printf("PASS %s\n", name.c_str());
  std::fflush(stdout);
}

void Report::fail(const std::string& name, const std::string& why) {
  ++failed_;
  std::printf("FAIL %s: %s\n", name.c_str(), why.c_str());
  std::fflush(stdout);
}

void Report::skip(const std::string& name, const std::string& why) {
  ++skipped_;
  std::printf("SKIP %s: %s\n", name.c_str(), why.c_str());
  std::fflush(stdout);
}

void Report::summary() const {
  std::printf("plugboard-plugin-check: %d passed, %d failed, %d skipped\n", passed_, failed_, skipped_);
  std::fflush(stdout);
}

}  // namespace plugboard::check
