// The set-up handshake. Every rank sends the same kind of report and runs
// the same checks on the same gathered reports, so a problem on any rank
// fails every rank at once, with the same message, instead of a hang.
#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "communicator/communicator_impl.hpp"
#include "communicator/wire.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {
namespace {

struct TransportId {
  std::string name, abi, version;
  uint32_t memTypes = 0;
};

struct Identity {
  bool ok = true;
  std::string error;
  ErrorCode code = ErrorCode::Internal;
  std::string version, abi, host, settings;
  uint32_t cores = 0;
  std::vector<TransportId> transports;
};

Identity parseIdentity(const std::vector<char>& blob, int rank) {
  BlobReader r(blob, "rank " + std::to_string(rank));
  Identity id;
  id.ok = r.i32() != 0;
  id.error = r.str();
  id.code = static_cast<ErrorCode>(r.i32());
  id.version = r.str();
  id.abi = r.str();
  id.host = r.str();
  id.settings = r.str();
  size_t n = r.count();
  for (size_t i = 0; i < n; ++i) {
    TransportId t;
    t.name = r.str();
    t.abi = r.str();
    t.version = r.str();
    t.memTypes = static_cast<uint32_t>(r.u64());
    id.transports.push_back(t);
  }
  // Last and optional: a core from before session 45 sends none and counts
  // one core. (Mixed with newer cores, its ranks may disagree on which
  // messages travel direct, which fails that call naming the pair.)
  id.cores = r.done() ? 1u : static_cast<uint32_t>(std::max<int32_t>(1, r.i32()));
  return id;
}

void checkFailures(const std::vector<Identity>& ids) {
  std::string msg;
  ErrorCode code = ErrorCode::Internal;
  for (size_t r = 0; r < ids.size(); ++r) {
    if (ids[r].ok) continue;
    if (msg.empty()) code = ids[r].code;
    msg += (msg.empty() ? "" : "\n") + std::string("rank ") + std::to_string(r) + " (host " + ids[r].host +
           ") failed to initialise: " + ids[r].error;
  }
  if (!msg.empty()) throw Error(code, msg);
}

std::set<std::string> lines(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.insert(l);
  return out;
}

void checkSettings(const std::vector<Identity>& ids) {
  std::string diff;
  std::set<std::string> base = lines(ids[0].settings);
  for (size_t r = 1; r < ids.size(); ++r) {
    if (ids[r].settings == ids[0].settings) continue;
    std::set<std::string> other = lines(ids[r].settings);
    for (const auto& l : base)
      if (!other.count(l)) diff += "\n  rank 0 has   " + l;
    for (const auto& l : other)
      if (!base.count(l)) diff += "\n  rank " + std::to_string(r) + " has   " + l;
  }
  if (!diff.empty())
    throw Error(ErrorCode::Config, "settings differ between ranks (every rank must use the same values):" + diff);
}

void checkVersions(const std::vector<Identity>& ids) {
  std::map<std::string, std::pair<int, std::string>> abis;  // transport -> first rank, abi
  for (size_t r = 0; r < ids.size(); ++r) {
    if (ids[r].version != ids[0].version || ids[r].abi != ids[0].abi)
      throw Error(ErrorCode::Config, "Plugboard versions differ: rank 0 runs " + ids[0].version + " (ABI " + ids[0].abi +
                                         "), rank " + std::to_string(r) + " runs " + ids[r].version + " (ABI " + ids[r].abi + ")");
    for (const auto& t : ids[r].transports) {
      auto [it, fresh] = abis.emplace(t.name, std::make_pair(static_cast<int>(r), t.abi));
      if (!fresh && it->second.second != t.abi)
        throw Error(ErrorCode::Config, "transport " + t.name + " ABI differs: rank " + std::to_string(it->second.first) +
                                           " has " + it->second.second + ", rank " + std::to_string(r) + " has " + t.abi);
    }
  }
}

}  // namespace

void Communicator::Impl::exchangeIdentity(const std::string& localError, ErrorCode localCode) {
  BlobWriter w;
  w.i32(localError.empty() ? 1 : 0);
  w.str(localError);
  w.i32(static_cast<int32_t>(localCode));
  w.str(libraryVersion());
  w.str(coreAbiVersion());
  w.str(self.host);
  w.str(config ? config->sharedSettingsText() : "");
  w.u64(plugins.size());
  for (const auto& p : plugins) {
    w.str(p->name());
    w.str(p->abiVersion());
    w.str(p->version());
    w.u64(advertisedMemTypes(p->properties().mem_types, coreCanStageCuda()));
  }
  w.i32(static_cast<int32_t>(std::min(std::max(1u, std::thread::hardware_concurrency()), 1u << 30)));
  auto blobs = bootstrap->allGatherBlobs(w.data());
  std::vector<Identity> ids;
  for (size_t r = 0; r < blobs.size(); ++r) ids.push_back(parseIdentity(blobs[r], static_cast<int>(r)));
  checkFailures(ids);
  checkVersions(ids);
  checkSettings(ids);
  views.assign(ids.size(), RankView{});
  for (size_t r = 0; r < ids.size(); ++r) {
    views[r].host = ids[r].host;
    views[r].cores = std::max(1u, ids[r].cores);
    for (const auto& t : ids[r].transports) {
      views[r].transports.push_back(t.name);
      views[r].memTypes[t.name] = t.memTypes;
    }
  }
  std::map<std::string, int> perHost;
  for (const auto& v : views) ++perHost[v.host];
  for (auto& v : views) v.ranksOnHost = perHost[v.host];
  checkRulesUseLoaded(config->rules(), views);
}

int Communicator::Impl::ranksOnHostOf(int rank) const { return std::max(1, views[rank].ranksOnHost); }

int Communicator::Impl::localRanks() const { return ranksOnHostOf(self.rank); }

pb_peer_info_v1 Communicator::Impl::peerInfo(int peer) const {
  return {sizeof(pb_peer_info_v1), self.rank, peer, self.host.c_str(), views[peer].host.c_str(),
          self.host == views[peer].host, 0, localRanks()};
}

void Communicator::Impl::exchangeReach() {
  BlobWriter w;
  w.u64(views.size() - 1);
  for (int peer = 0; peer < static_cast<int>(views.size()); ++peer) {
    if (peer == self.rank) continue;
    w.i32(peer);
    w.u64(plugins.size());
    const pb_peer_info_v1 info = peerInfo(peer);
    for (const auto& p : plugins) {
      int cost = -1;
      char reason[256] = {0};
      pb_status st = p->api().can_connect(p->context(), &info, &cost, reason, sizeof(reason));
      w.str(p->name());
      w.i32(st == PB_OK ? cost : -1);
      w.str(st == PB_OK ? std::string(reason) : "can_connect failed: " + p->lastError());
    }
  }
  auto blobs = bootstrap->allGatherBlobs(w.data());
  for (size_t r = 0; r < blobs.size(); ++r) {
    BlobReader rd(blobs[r], "rank " + std::to_string(r));
    size_t peers = rd.count();
    for (size_t i = 0; i < peers; ++i) {
      int peer = rd.i32();
      size_t n = rd.count();
      for (size_t k = 0; k < n; ++k) {
        std::string name = rd.str();
        Reach reach;
        reach.cost = rd.i32();
        reach.reason = rd.str();
        views[r].reach[peer][name] = reach;
      }
    }
  }
  selectAllKinds();
  for (int peer = 0; peer < static_cast<int>(views.size()); ++peer) {
    if (peer == self.rank) continue;
    for (auto& [kind, table] : choices) {
      const PairChoice& c = choiceFor(peer, kind);
      PB_LOG(Info, "INIT", "rank " << self.rank << " -> rank " << peer << " via " << c.transport << " for "
                                   << (kind == MemoryKind::Cuda ? "CUDA" : "host") << " memory (" << c.why << ")");
    }
  }
}

void Communicator::Impl::selectAllKinds() {
  // Host memory always; CUDA memory when some rank loaded a transport for it
  // (natively, or staged through host memory by a core built with CUDA).
  // A kind no transport can serve is an error only when it is used, unless
  // no kind works at all: then set-up fails now, on every rank alike.
  bool anyCuda = false;
  for (const auto& v : views)
    for (const auto& [t, m] : v.memTypes) anyCuda = anyCuda || (m & (PB_MEM_CUDA | kMemCudaStaged));
  std::string firstError;
  for (MemoryKind kind : {MemoryKind::Host, MemoryKind::Cuda}) {
    if (kind == MemoryKind::Cuda && !anyCuda) continue;
    try {
      choices[kind] = selectTransports(views, config->rules(), kind == MemoryKind::Cuda ? PB_MEM_CUDA : PB_MEM_HOST);
    } catch (const Error& e) {
      selectionErrors[kind] = e.what();
      if (firstError.empty()) firstError = e.what();
    }
  }
  if (choices.empty() && views.size() > 1) throw Error(ErrorCode::Config, firstError);
}

}  // namespace plugboard
