// How plugboard-plugin-check reports: one line per check (PASS / FAIL / SKIP),
// checks that fail by throwing, and a watchdog for calls that never return.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace plugboard::check {

/// Thrown inside a check to fail it; what() is the precise reason.
class CheckFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Thrown inside a check to skip it; what() says why it does not apply.
class CheckSkipped : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Fails the running check with why unless cond holds.
inline void expect(bool cond, const std::string& why) {
  if (!cond) throw CheckFailed(why);
}

/// Skips the running check with why.
[[noreturn]] inline void skip(const std::string& why) { throw CheckSkipped(why); }

/// Counts and prints results. Each line goes to stdout at once (flushed), so
/// a crash or a hang still leaves every earlier line behind.
class Report {
 public:
  /// watchdogSeconds bounds each check; a check that runs longer is reported
  /// as FAIL ("did not return") and the process exits with status 1.
  explicit Report(double watchdogSeconds);

  /// Runs body as check `name`: PASS if it returns, FAIL on CheckFailed or
  /// any other exception, SKIP on CheckSkipped. Returns true on PASS.
  bool run(const std::string& name, const std::function<void()>& body);
  /// Records a result without running anything.
  void pass(const std::string& name);
  /// Records a failure with its reason.
  void fail(const std::string& name, const std::string& why);
  /// Records a skipped check with its reason.
  void skip(const std::string& name, const std::string& why);

  /// Number of FAIL lines so far.
  int failures() const { return failed_; }
  /// Prints "plugboard-plugin-check: N passed, M failed, K skipped".
  void summary() const;

 private:
  int passed_ = 0;
  int failed_ = 0;
  int skipped_ = 0;
  double watchdogSeconds_;
};

/// Prints FAIL for the running check and exits if the process crashes
/// (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) while a check runs.
void installCrashHandler();

/// Moves the running check's name and the "reported" flag into memory
/// shared with children forked later, so a supervising parent can name the
/// check during which a checking child ended without a word.
void shareCheckState();
/// Records that the process reported its own end (its summary was printed).
void markReported();
/// In the supervisor: prints FAIL for the check during which the child
/// ended (waitStatus from waitpid), unless the child reported it; true
/// when it did (the child ended abruptly).
bool reportAbruptEnd(int waitStatus);

}  // namespace plugboard::check
