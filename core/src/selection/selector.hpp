// Per-peer-pair transport choice. A pure function of data that every rank
// holds identically after the handshake, so every rank computes the same
// answer without further messages.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "plugboard/config.hpp"

namespace plugboard {

/// Whether a rank can reach a peer with one transport, from its can_connect.
struct Reach {
  int cost = -1;       ///< >= 0: reachable, lower is better.
  std::string reason;  ///< Why not, when cost < 0.
};

/// What one rank told the others during the handshake.
struct RankView {
  std::string host;                               ///< Host identity.
  unsigned cores = 1;                             ///< Hardware threads its process saw on the host.
  int ranksOnHost = 1;                            ///< Ranks of the communicator on that host (itself included).
  std::vector<std::string> transports;            ///< Loaded, in load order.
  std::map<std::string, uint32_t> memTypes;       ///< transport -> pb_mem_type bits it moves.
  std::map<int, std::map<std::string, Reach>> reach;  ///< peer -> transport -> reach.
};

/// Core-only bit in RankView::memTypes (outside the ABI's pb_mem_type
/// range): the rank's core can carry CUDA memory over this host-memory
/// transport by staging it through pinned host buffers.
constexpr uint32_t kMemCudaStaged = 1u << 16;

/// The memory types a rank advertises for a transport: the plugin's own,
/// plus kMemCudaStaged for a host-only transport when the core can stage.
uint32_t advertisedMemTypes(uint32_t pluginMemTypes, bool coreCanStage);

/// True when this build of the core can stage CUDA memory (built with CUDA).
bool coreCanStageCuda();

/// The transport of one pair and why.
struct PairChoice {
  std::string transport;  ///< Chosen transport name.
  std::string why;        ///< e.g. "rule config.yaml:4 same-host; cudaipc: different host".
  bool staged = false;    ///< CUDA memory goes through pinned host buffers (transport moves host memory only).
  /// The other transports that work for the pair, in the order they would
  /// have been chosen (the rule's, or rising cost): where the "failover"
  /// setting takes the pair when its transport fails.
  std::vector<std::string> fallbacks;
};

/// Chooses a transport for every unordered pair (a < b), among those that
/// move memory of memType (a pb_mem_type bit) on both ranks; key is {a, b}.
/// The first rule whose peers match decides the candidates in its order;
/// without a matching rule the candidate with the lowest summed cost wins
/// (ties: rank 0's load order). For CUDA memory a transport that moves it
/// natively always beats one that would stage it (kMemCudaStaged); staging
/// is the fallback, marked in PairChoice::staged and in the reason. Throws Error(Config) naming the pair and
/// every candidate's reason when no transport works for it.
std::map<std::pair<int, int>, PairChoice> selectTransports(const std::vector<RankView>& ranks,
                                                           const std::vector<Rule>& rules, uint32_t memType);

/// "host" or "CUDA" for a pb_mem_type bit, for messages.
const char* memTypeName(uint32_t memType);

/// Throws Error(Config) with the rule's file:line when a rule names a
/// transport that no rank loaded.
void checkRulesUseLoaded(const std::vector<Rule>& rules, const std::vector<RankView>& ranks);

/// True when rule peers match the pair (a, b) in either direction.
bool peersMatch(const PeerMatch& m, int a, int b, const std::string& hostA, const std::string& hostB);

}  // namespace plugboard
