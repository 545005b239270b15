// The faulty plugin's context: the core's services, the fault plan, the
// wrapped transport's context, and the rank-wide strike counter.
#pragma once

#include <plugboard/transport_cxx.hpp>

#include <atomic>
#include <memory>
#include <string>

#include "fault_plan.hpp"
#include "inner.hpp"

namespace plugboard::faulty {

/// One per init(); the core's pb_plugin_ctx*.
class Context : public transport_cxx::ErrorSlot {
 public:
  /// Declares faulty's settings, reads them, loads and initialises the inner transport.
  explicit Context(const pb_host_services_v1* host);

  const FaultPlan& plan() const { return plan_; }
  InnerTransport& inner() { return *inner_; }
  int rank() const { return host_.rank(); }
  const std::string& hostname() const { return host_.hostname(); }
  /// Strikes on this rank: the next eligible event's fate (0 = not struck).
  uint64_t strike() { return injects_ ? counter_.next() : 0; }
  /// For the struck event's kind: the plan applies to it (ops filter).
  bool eligible(OpKind kind) const { return plan_.eligible(kind); }
  /// True when this rank injects the plan's fault.
  bool injects() const { return injects_; }
  /// Logs one line through the core.
  void log(pb_log_level level, const std::string& message) const { host_.log(level, message); }
  /// "faulty: injected <fault> at <what> #n on rank R (host H)", for errors and logs.
  std::string describe(const std::string& what, uint64_t n) const;
  /// For plugboard-info (the describe entry): the inner transport, the
  /// fault this rank injects (or that it injects none), then the inner
  /// transport's own description.
  std::string report() const;
  /// Counts live connections, so finalize can refuse while any remain.
  void connectionOpened() { ++connections_; }
  void connectionClosed() { --connections_; }
  int connections() const { return connections_.load(); }

 private:
  /// "injecting fault '<f>' on rank R over <inner> (after A, count C)".
  std::string injectionText() const;
  void declareSettings() const;
  void readSettings();

  transport_cxx::HostServices host_;
  FaultPlan plan_;
  StrikeCounter counter_;
  bool injects_ = false;
  std::atomic<int> connections_{0};
  std::unique_ptr<InnerTransport> inner_;
};

}  // namespace plugboard::faulty
