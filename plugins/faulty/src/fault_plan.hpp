// What the faulty transport does wrong, and to which operations: the
// settings parsed once at init, and the counter that decides, operation by
// operation, whether this one is struck.
#pragma once

#include <atomic>
#include <cstdint>
#include <set>
#include <string>

namespace plugboard::faulty {

/// The fault injected (setting `fault`).
enum class Fault {
  None,          ///< pass everything through
  Delay,         ///< hold the operation (and all after it) delay_us before posting
  Drop,          ///< never post it, report it complete
  Duplicate,     ///< post it twice
  Reorder,       ///< post it after the next operation on its connection (at the next poll)
  Corrupt,       ///< writes: one wrong byte lands in the middle; signals: value + 1
  Truncate,      ///< writes: only the first half lands
  FailOp,        ///< the operation returns an error; the connection is failed
  FailRegister,  ///< register_memory returns an error
  FailConnect,   ///< proxy_connect returns an error
  Exit,          ///< the process exits (exit_code) instead of posting
};

/// Which operations count and can be struck (setting `ops`).
enum class OpFilter { All, Write, Signal };

/// The kind of a data-path operation (write_signal is both).
enum class OpKind { Write, Signal, WriteSignal };

/// The parsed settings.
struct FaultPlan {
  Fault fault = Fault::None;
  OpFilter ops = OpFilter::All;
  uint64_t after = 0;          ///< eligible events that pass before the first fault
  uint64_t count = 1;          ///< events struck; 0 = every one from then on
  bool allRanks = true;        ///< `ranks` is "all"
  std::set<int> ranks;         ///< else: the ranks that inject
  uint64_t delayUs = 1000;
  int exitCode = 17;

  /// Parses each setting's text; Error(PB_ERR_INVALID) naming the setting and
  /// the accepted values on anything else.
  static Fault parseFault(const std::string& text);
  static OpFilter parseOps(const std::string& text);
  /// "all" or a comma-separated list of ranks (e.g. "1,3").
  void parseRanks(const std::string& text);

  /// True when this rank injects at all.
  bool injectsOn(int rank) const { return fault != Fault::None && (allRanks || ranks.count(rank) > 0); }
  /// True when an operation of this kind counts towards after/count.
  bool eligible(OpKind kind) const;
  /// True for the faults that act on data-path operations.
  bool onDataPath() const;
};

/// The setting's name for a fault ("fail_op"), for messages.
const char* faultName(Fault f);

/// Counts eligible events of one rank and says which are struck: events
/// after+1 .. after+count (every event past `after` when count is 0).
/// Thread-safe: connections of one context share it.
class StrikeCounter {
 public:
  /// Takes after and count from the plan (before any event is counted).
  void configure(const FaultPlan& plan) {
    after_ = plan.after;
    count_ = plan.count;
  }
  /// Counts one event; returns its number (1-based) when it is struck, else 0.
  uint64_t next() {
    const uint64_t n = ++events_;
    if (n <= after_) return 0;
    if (count_ != 0 && n > after_ + count_) return 0;
    return n;
  }

 private:
  std::atomic<uint64_t> events_{0};
  uint64_t after_ = 0, count_ = 0;
};

}  // namespace plugboard::faulty
