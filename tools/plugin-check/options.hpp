// Command line of plugboard-plugin-check.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace plugboard::check {

/// A bad command line; what() says which argument and why.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Everything the command line says.
struct Options {
  std::string plugin;                          ///< Path of libplugboard-<name>.so.
  std::map<std::string, std::string> settings; ///< --set key=value, served by the fake host.
  double timeoutSeconds = 30;                  ///< Bound of every wait (--timeout).
  int reloadCycles = 20;                       ///< dlopen/dlclose rounds (--reload).
  bool verbose = false;                        ///< Echo plugin log lines (--verbose).
  int peerFd = -1;                             ///< Internal: run as the peer process on this socket.
};

/// Parses argv. Throws UsageError.
Options parseOptions(int argc, char** argv);

/// The arguments that make a re-executed copy of this program the peer
/// process of o, talking over socket fd (argv[0] excluded).
std::vector<std::string> peerArguments(const Options& o, int fd);

/// The --help text.
const char* usageText();

}  // namespace plugboard::check
