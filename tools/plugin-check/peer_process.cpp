#include "peer_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "timing.hpp"

namespace plugboard::check {
namespace {

/// This program's own file, for re-executing it as the peer.
std::string selfExe() {
  std::vector<char> buf(4096);
  ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) throw CheckFailed(std::string("readlink(/proc/self/exe): ") + std::strerror(errno));
  return std::string(buf.data(), size_t(n));
}

/// "exit status N" / "killed by signal N" / "" for a clean exit.
std::string describeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status) == 0 ? "" : "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

}  // namespace

PeerProcess::PeerProcess(const Options& o) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    throw CheckFailed(std::string("socketpair: ") + std::strerror(errno));
  // Everything exec needs is built before fork: the child may only make
  // async-signal-safe calls until exec.
  std::string exe = selfExe();
  std::vector<std::string> args = peerArguments(o, fds[1]);
  args.insert(args.begin(), exe);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  std::fflush(stdout);
  pid_ = fork();
  if (pid_ < 0) {
    close(fds[0]);
    close(fds[1]);
    throw CheckFailed(std::string("fork: ") + std::strerror(errno));
  }
  if (pid_ == 0) {
    fcntl(fds[1], F_SETFD, 0);  // keep the peer's end across exec
    if (devnull >= 0) dup2(devnull, STDOUT_FILENO);  // only the checker prints results
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  if (devnull >= 0) close(devnull);
  close(fds[1]);
  channel_ = std::make_unique<Channel>(fds[0]);
}

std::string PeerProcess::waitExit(double seconds) {
  if (pid_ < 0) return "";
  channel_.reset();  // EOF tells the peer to go
  Deadline deadline(seconds);
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (deadline.expired()) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      pid_ = -1;
      return "did not exit within " + std::to_string(int(seconds)) + " s (killed)";
    }
    usleep(2000);
  }
  pid_ = -1;
  return describeStatus(status);
}

PeerProcess::~PeerProcess() { waitExit(5); }

}  // namespace plugboard::check
