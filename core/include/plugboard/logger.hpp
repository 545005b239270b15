/// @file logger.hpp
/// The one logger of Plugboard, configured from the environment:
///  - PLUGBOARD_DEBUG: NONE, WARN (default), INFO or TRACE.
///  - PLUGBOARD_DEBUG_SUBSYS: comma list of subsystems to show (e.g.
///    "INIT,NET"); a leading '^' shows all but those. Default: all.
///  - PLUGBOARD_DEBUG_FILE: write to this file instead of stderr; "%h" is
///    replaced by the host name and "%p" by the process id.
///  - PLUGBOARD_DEBUG_TIMESTAMPS: 1 (true, yes, on) starts every line with
///    the local wall-clock time, "[2026-11-29 14:05:38.123456] ".
#pragma once

#include <sstream>
#include <string>

namespace plugboard {

/// Verbosity levels, from quietest to loudest.
enum class LogLevel { None = 0, Warn = 1, Info = 2, Trace = 3 };

/// Parses "NONE"/"WARN"/"INFO"/"TRACE" (any case). Throws Error(Config) otherwise.
LogLevel parseLogLevel(const std::string& text);

/// True when a message of this level and subsystem would be written.
bool logEnabled(LogLevel level, const char* subsys);

/// Writes one line "host:pid:tid [rank] plugboard LEVEL SUBSYS message"
/// (after the time when timestamps are on). Thread-safe.
void logWrite(LogLevel level, const char* subsys, const std::string& message);

/// Sets the rank shown in every line (-1: none). Called by the communicator.
void logSetRank(int rank);

/// Re-reads the PLUGBOARD_DEBUG* variables (tests use it after setenv).
void logReconfigure();

/// Applies resolved settings (the registry's debug, debug_subsys,
/// debug_file and debug_timestamps), so a YAML file can set them too.
void logConfigure(const std::string& level, const std::string& subsys, const std::string& file,
                  bool timestamps);

}  // namespace plugboard

/// Logs a streamed message if enabled: PB_LOG(Info, "INIT", "x=" << x).
#define PB_LOG(level, subsys, expr)                                          \
  do {                                                                       \
    if (::plugboard::logEnabled(::plugboard::LogLevel::level, subsys)) {     \
      std::ostringstream pb_log_os_;                                         \
      pb_log_os_ << expr;                                                    \
      ::plugboard::logWrite(::plugboard::LogLevel::level, subsys,            \
                            pb_log_os_.str());                               \
    }                                                                        \
  } while (0)
