// The conformance checks, by group. Each group prints one line per check
// through the Report and never throws.
#pragma once

#include <plugboard/transport.h>

#include <memory>

#include "loader.hpp"
#include "options.hpp"
#include "report.hpp"

namespace plugboard::check {

/// The plugin as the static checks leave it for the connection checks.
struct LoadedPlugin {
  std::unique_ptr<PluginLibrary> library;     ///< Open for the whole run.
  const pb_transport_v1* table = nullptr;     ///< nullptr when it cannot be used.
  pb_transport_properties_v1 props{};         ///< Valid when propsOk.
  bool propsOk = false;                       ///< properties() worked.
  bool sameHostReachable = false;             ///< can_connect accepted a same-host peer.
  std::string unreachableReason;              ///< Why not, when it did not.
  std::string unsupported;                    ///< init's reason when it said PB_ERR_UNSUPPORTED
                                              ///< (this machine lacks what the transport needs).
};

/// exports.*: the ELF dynamic symbol table holds the entry symbol only.
void runExportChecks(const Options& o, Report& r);
/// abi.*: dlopen, entry symbol, versions both ways, table, required
/// functions, init against other hosts. Fills p.library and p.table.
void runAbiChecks(const Options& o, Report& r, LoadedPlugin& p);
/// properties.* and can_connect.*: invariants of the declared facts.
void runPropertyChecks(const Options& o, Report& r, LoadedPlugin& p);
/// settings.*: declarations well formed and stable across init.
void runSettingChecks(const Options& o, Report& r, const LoadedPlugin& p);
/// connect.*, memory.*, write.*, signal.*, flush, free.*, finalize: one
/// connection to a peer process.
void runConnectionChecks(const Options& o, Report& r, const LoadedPlugin& p);
/// lifecycle.*: dlopen/init/finalize/dlclose cycles, no leaked fds/threads.
void runLifecycleChecks(const Options& o, Report& r);

}  // namespace plugboard::check
