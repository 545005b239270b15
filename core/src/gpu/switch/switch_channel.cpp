// SwitchChannel: the multicast backend on a group buffer of the nvls
// transport, or the peers backend on a buffer per rank that every rank
// maps through a transport that maps peer memory (cudaipc).
#include "plugboard/gpu/switch_channel.hpp"

#include <map>
#include <optional>
#include <vector>

#include "communicator/communicator_impl.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/switch/multicast_group.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {
namespace {

uint64_t roundUp16(uint64_t v) { return (v + 15) / 16 * 16; }

/// Bytes of a rank's buffer: data, then the barrier counters.
uint64_t bufferBytes(uint64_t dataBytes) { return dataBytes + 8ull * kSwitchBarrierSlots; }

/// Every rank's refusal joined ("rank 1: <why>; rank 3: <why>"), or "".
std::string gatherRefusals(Communicator& comm, const std::string& mine) {
  const auto all = comm.bootstrap().allGatherBlobs(std::vector<char>(mine.begin(), mine.end()));
  std::string joined;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty()) continue;
    if (!joined.empty()) joined += "; ";
    joined += "rank " + std::to_string(r) + ": " + std::string(all[r].begin(), all[r].end());
  }
  return joined;
}

/// This rank's failure in a set-up step, kept so every rank can hear of it.
struct StepFailure {
  std::string text;                       ///< "" when the step succeeded here.
  ErrorCode code = ErrorCode::Internal;
};

/// Runs one local set-up step; an exception becomes its StepFailure.
template <typename Fn>
StepFailure attempt(Fn&& fn) {
  try {
    fn();
    return {};
  } catch (const Error& e) {
    return {e.what(), e.code()};
  } catch (const std::exception& e) {
    return {e.what(), ErrorCode::Internal};
  }
}

/// Collective: throws on every rank when the step failed on any, naming each
/// failing rank and why, so no rank goes on with a channel another lacks.
void agreeOn(Communicator& comm, const StepFailure& mine, const std::string& step) {
  const std::string all = gatherRefusals(comm, mine.text);
  if (all.empty()) return;
  throw Error(mine.text.empty() ? ErrorCode::Remote : mine.code,
              "rank " + std::to_string(comm.rank()) + ": SwitchChannel " + step + " failed: " + all);
}

/// Collective: every rank asked for the same size, else all throw.
void agreeOnSize(Communicator& comm, uint64_t dataBytes) {
  std::vector<uint64_t> all(comm.size(), 0);
  all[comm.rank()] = dataBytes;
  comm.bootstrap().allGather(all.data(), sizeof(uint64_t));
  std::string sizes;
  bool same = true;
  for (int r = 0; r < comm.size(); ++r) {
    same = same && all[r] == dataBytes;
    sizes += (r ? ", " : "") + std::string("rank ") + std::to_string(r) + ": " + std::to_string(all[r]);
  }
  if (!same)
    throw Error(ErrorCode::InvalidUsage, "rank " + std::to_string(comm.rank()) +
                                             ": SwitchChannel sizes differ between ranks (bytes, rounded to 16: " +
                                             sizes + "); every rank must ask for the same");
}

}  // namespace

struct SwitchChannel::Impl {
  Communicator& comm;
  SwitchBackend backend = SwitchBackend::Peers;
  uint64_t dataBytes = 0;
  std::string refusal;
  std::optional<MulticastGroup> group;  // multicast backend
  char* buffer = nullptr;               // peers backend: this rank's buffer
  RegisteredMemory local;
  std::vector<RemoteMemory> remotes;    // by rank (empty for self)
  char** peerTable = nullptr;           // device [nranks]
  uint64_t* expected = nullptr;         // device [kSwitchBarrierSlots]
  SwitchChannelDeviceHandle handle;
  bool ready = false;  // construction finished on every rank: destruction meets them

  explicit Impl(Communicator& c) : comm(c) {}
  ~Impl();
  void createMulticast(int device);
  void createPeers();
  /// Receives every peer's descriptor and maps its buffer (createPeers' second half).
  void mapPeers(const std::map<int, std::shared_ptr<Connection>>& connections, uint64_t total);
  /// "" when every pair of this rank maps peer memory, else the first that does not.
  std::string unmappedPair(const std::map<int, std::shared_ptr<Connection>>& connections) const;
};

const char* switchBackendName(SwitchBackend backend) {
  return backend == SwitchBackend::Multicast ? "multicast" : "peers";
}

bool SwitchChannel::supports(DataType type, ReduceOp op) {
  if (type == DataType::Float32) return op == ReduceOp::Sum;
  if (type == DataType::Float16 || type == DataType::BFloat16)
    return op == ReduceOp::Sum || op == ReduceOp::Min || op == ReduceOp::Max;
  return false;
}

std::string SwitchChannel::multicastRefusalFor(Communicator& comm) {
  int device = 0;
  PB_CUDA_CHECK(cudaGetDevice(&device));
  return gatherRefusals(comm, MulticastGroup::localRefusal(comm, device, 1 << 20));
}

void SwitchChannel::Impl::createMulticast(int device) {
  // group_create fails on every rank together (the plugin exchanges each
  // phase's status); the zeroing after it is local, so agree on it.
  group.emplace(comm, *MulticastGroup::findTransport(comm), device, bufferBytes(dataBytes));
  agreeOn(comm, attempt([&] {
            const pb_group_view_v1& v = group->view();
            // The counters must start at zero on every rank before anyone arrives.
            PB_CUDA_CHECK(cudaMemset(static_cast<char*>(v.unicast) + dataBytes, 0, 8ull * kSwitchBarrierSlots));
            PB_CUDA_CHECK(cudaDeviceSynchronize());
            handle.multicast = static_cast<char*>(v.multicast);
            handle.local = static_cast<char*>(v.unicast);
          }),
          "multicast buffer set-up");
}

std::string SwitchChannel::Impl::unmappedPair(const std::map<int, std::shared_ptr<Connection>>& connections) const {
  for (const auto& [peer, conn] : connections)
    if (!conn->mapsPeerMemory())
      return "rank " + std::to_string(comm.rank()) + " -> rank " + std::to_string(peer) + " (" + comm.hostOf(peer) +
             ") uses " + conn->transport() + ", which does not map peer memory";
  return "";
}

void SwitchChannel::Impl::createPeers() {
  const int rank = comm.rank(), nranks = comm.size();
  const auto connections = comm.connectAll(MemoryKind::Cuda);
  // Every rank must know before any exchange starts, or some would wait.
  const std::string unmapped = gatherRefusals(comm, unmappedPair(connections));
  if (!unmapped.empty())
    throw Error(ErrorCode::InvalidUsage, "rank " + std::to_string(rank) +
                                            ": SwitchChannel's peers backend needs every pair to map peer memory "
                                            "(cudaipc): " + unmapped);
  const uint64_t total = bufferBytes(dataBytes);
  agreeOn(comm, attempt([&] {
            PB_CUDA_CHECK(cudaMalloc(&buffer, total));
            PB_CUDA_CHECK(cudaMemset(buffer, 0, total));
            PB_CUDA_CHECK(cudaDeviceSynchronize());
            local = comm.registerMemory(buffer, total, MemoryKind::Cuda);
          }),
          "buffer allocation");
  for (int p = 0; p < nranks; ++p)
    if (p != rank) comm.impl_->sendMemoryTagged(local, p, kTagSwitchChannel);
  agreeOn(comm, attempt([&] { mapPeers(connections, total); }), "peer mapping");
}

void SwitchChannel::Impl::mapPeers(const std::map<int, std::shared_ptr<Connection>>& connections, uint64_t total) {
  const int rank = comm.rank(), nranks = comm.size();
  remotes.resize(nranks);
  std::vector<char*> table(nranks, nullptr);
  table[rank] = buffer;
  for (int p = 0; p < nranks; ++p) {
    if (p == rank) continue;
    remotes[p] = comm.impl_->recvMemoryTagged(p, kTagSwitchChannel);
    if (remotes[p].size() < total)
      throw Error(ErrorCode::Remote, "rank " + std::to_string(rank) + ": SwitchChannel buffer of rank " +
                                         std::to_string(p) + " is smaller than ours");
    table[p] = static_cast<char*>(connections.at(p)->remotePointer(remotes[p]));
  }
  PB_CUDA_CHECK(cudaMalloc(&peerTable, nranks * sizeof(char*)));
  PB_CUDA_CHECK(cudaMemcpy(peerTable, table.data(), nranks * sizeof(char*), cudaMemcpyHostToDevice));
  handle.local = buffer;
  handle.peers = peerTable;
}

SwitchChannel::Impl::~Impl() {
  // Peers' kernels may still store into this rank's buffer until every rank
  // got here: synchronise, then meet, then release. A construction that
  // failed (on every rank: see agreeOn) has no such kernels and no meeting.
  cudaDeviceSynchronize();
  if (ready && !comm.aborted()) {
    try {
      comm.bootstrap().barrier();
    } catch (...) {  // a peer died: its mappings died with it
    }
  }
  group.reset();
  remotes.clear();
  local = RegisteredMemory();
  if (buffer) cudaFree(buffer);
  if (peerTable) cudaFree(peerTable);
  if (expected) cudaFree(expected);
}

SwitchChannel::SwitchChannel(Communicator& comm, size_t bytes, SwitchMode mode) : impl_(std::make_unique<Impl>(comm)) {
  Impl& m = *impl_;
  if (bytes == 0)
    throw Error(ErrorCode::InvalidUsage, "rank " + std::to_string(comm.rank()) + ": SwitchChannel of 0 bytes");
  int device = 0;
  PB_CUDA_CHECK(cudaGetDevice(&device));
  m.dataBytes = roundUp16(bytes);
  agreeOnSize(comm, m.dataBytes);
  m.refusal = mode == SwitchMode::Peers ? "not asked for (SwitchMode::Peers)"
                                        : gatherRefusals(comm, MulticastGroup::localRefusal(comm, device, bufferBytes(m.dataBytes)));
  if (mode == SwitchMode::Multicast && !m.refusal.empty())
    throw Error(ErrorCode::Plugin, "rank " + std::to_string(comm.rank()) +
                                            ": SwitchChannel: multicast asked for but unavailable: " + m.refusal);
  m.backend = m.refusal.empty() ? SwitchBackend::Multicast : SwitchBackend::Peers;
  agreeOn(comm, attempt([&] {
            PB_CUDA_CHECK(cudaMalloc(&m.expected, 8ull * kSwitchBarrierSlots));
            PB_CUDA_CHECK(cudaMemset(m.expected, 0, 8ull * kSwitchBarrierSlots));
          }),
          "barrier state allocation");
  if (m.backend == SwitchBackend::Multicast) m.createMulticast(device);
  else m.createPeers();
  m.handle.dataBytes = m.dataBytes;
  m.handle.expected = m.expected;
  m.handle.rank = comm.rank();
  m.handle.nranks = comm.size();
  // No rank may arrive at a barrier before every counter is zeroed.
  comm.bootstrap().barrier();
  m.ready = true;
  PB_LOG(Info, "COLL", "rank " << comm.rank() << ": SwitchChannel of " << m.dataBytes << " bytes, backend "
                               << switchBackendName(m.backend)
                               << (m.refusal.empty() ? "" : " (no multicast: " + m.refusal + ")"));
}

SwitchChannel::~SwitchChannel() = default;

SwitchBackend SwitchChannel::backend() const { return impl_->backend; }
size_t SwitchChannel::bytes() const { return impl_->dataBytes; }
const std::string& SwitchChannel::multicastRefusal() const { return impl_->refusal; }
SwitchChannelDeviceHandle SwitchChannel::deviceHandle() const { return impl_->handle; }

}  // namespace plugboard
