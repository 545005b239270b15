#include "plugins/plugin_probe.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "plugboard/error.hpp"

namespace plugboard {
namespace {

/// Exit status of a probe child whose plugin refused with an error.
constexpr int kRefused = 121;

[[noreturn]] void runProbeChild(const std::string& path, Config& config, const LocalIdentity& self) {
  // Crash handlers the parent inherited from other libraries (UCX, MPI)
  // would turn the plugin's crash into an exit: let the signal end us.
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP}) signal(sig, SIG_DFL);
  int code = 0;
  try {
    TransportPlugin plugin(path, config, self);  // load, check, init; finalize on scope exit
  } catch (...) {
    code = kRefused;
  }
  _exit(code);  // no atexit handlers or static destructors of the parent's image
}

std::string describeEnd(int status, double timeoutSeconds, bool killed) {
  char text[160];
  if (killed)
    std::snprintf(text, sizeof(text), "did not finish loading and initialising within %g s (plugin_probe_timeout; "
                  "killed in its probe process)", timeoutSeconds);
  else if (WIFSIGNALED(status))
    std::snprintf(text, sizeof(text), "crashed with signal %d (%s) while loading or initialising (in a probe process)",
                  WTERMSIG(status), strsignal(WTERMSIG(status)));
  else
    std::snprintf(text, sizeof(text), "ended its process with exit(%d) while loading or initialising (in a probe "
                  "process)", WEXITSTATUS(status));
  return text;
}

}  // namespace

std::string probePlugin(const std::string& path, Config& config, const LocalIdentity& self,
                        std::chrono::milliseconds timeout) {
  const pid_t pid = fork();
  if (pid < 0) throw Error(ErrorCode::System, "fork for the probe of " + path + " failed: " + std::strerror(errno));
  if (pid == 0) runProbeChild(path, config, self);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  bool killed = false;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return "";  // reaped elsewhere (a SIGCHLD handler): no verdict
    if (std::chrono::steady_clock::now() >= deadline && !killed) {
      kill(pid, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(killed ? 1 : 5));
  }
  if (!killed && WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == kRefused)) return "";
  return describeEnd(status, std::chrono::duration<double>(timeout).count(), killed);
}

}  // namespace plugboard
