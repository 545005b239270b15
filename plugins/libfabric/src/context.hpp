// The plugin context: host services, settings, the chosen provider and the
// libfabric objects built on it (fabric, domain, completion queue, address
// vector, one RDM endpoint), the registry of local regions, the control
// message buffers and the last error. One per loaded plugin per
// communicator; the core's pb_plugin_ctx*.
//
// Locking: one mutex per context (mutex()) guards every libfabric call and
// all mutable state here and in the connections. Every connection shares
// the endpoint and its completion queue, so progress on one connection may
// complete operations of another; a single lock keeps that simple.
#pragma once

#include <plugboard/transport_cxx.hpp>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "endpoint.hpp"
#include "fid.hpp"
#include "lane.hpp"
#include "memory.hpp"
#include "provider.hpp"
#include "wire.hpp"

namespace plugboard::libfabric {

class Connection;

/// Resolved values of the plugin's settings (see Context::declareSettings).
struct Settings {
  std::string provider;        ///< FI_PROVIDER-style list; "" = default order.
  std::string iface;           ///< Domain names, NCCL_SOCKET_IFNAME syntax; "" = any.
  std::string signal = "auto"; ///< auto, atomic or message.
  uint64_t fragmentBytes = 0;  ///< Largest fabric write; 0 = provider's limit.
  /// Largest write_signal sent as messages (README "Operations"): a 128 KiB
  /// chunk and the 64-byte header the host collectives put before it.
  uint64_t messageWriteBytes = 131136;
  /// Lanes to open (README "Lanes"); -1 = auto.
  int lanes = -1;
  /// Smallest write cut into one piece per lane.
  uint64_t laneBytes = 1048576;
};

/// The largest message ofi_rxm sends eagerly here, and where rxm's settings
/// came from ("FI_OFI_RXM_BUFFER_SIZE=33024 (set by the plugin), ...").
struct RxmEager {
  uint64_t bytes = 0;
  std::string source;
};

/// How signal() reaches the peer's counter.
enum class SignalMode {
  Atomic,  ///< fi_atomic FI_SUM on FI_UINT64, applied by the provider.
  Message  ///< A control message the target's plugin applies itself.
};

/// The far end of a connection (the adapter's).
using PeerInfo = transport_cxx::PeerInfo;

/// What the context keeps for one fabric operation in flight. Its address
/// (of fiCtx, the first member) is the operation's context, so completions
/// find it; FI_CONTEXT and FI_CONTEXT2 modes are satisfied by fiCtx.
struct OpRecord {
  /// Kinds of operation.
  enum class Kind : uint8_t { Write, Signal, Hello, Recv, Wake };
  fi_context2 fiCtx{};  ///< Provider scratch space; must stay first.
  Kind kind = Kind::Write;
  uint64_t conn = 0;  ///< Local connection id (0 for receives).
  uint64_t seq = 0;   ///< Sequence number of the write/signal it belongs to.
  int slot = -1;      ///< Control-message slot it uses, or -1.
};

/// State shared by every connection and region of one plugin instance.
class Context : public transport_cxx::ErrorSlot {
 public:
  /// Checks the host table, declares and reads the settings, chooses a
  /// provider and opens the endpoint; throws Error (PB_ERR_UNSUPPORTED
  /// when no provider fits, naming those fi_getinfo offers).
  explicit Context(const pb_host_services_v1* host);
  /// Closes every libfabric object; never throws.
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  /// This process's rank.
  int rank() const { return host_.rank(); }
  /// This host's name as the core identifies it.
  const std::string& hostname() const { return host_.hostname(); }
  /// The settings read at init.
  const Settings& settings() const { return settings_; }
  /// The chosen provider, fabric and domain.
  const ProviderChoice& provider() const { return choice_; }
  /// How signals are applied.
  SignalMode signalMode() const { return signalMode_; }
  /// True when CUDA memory can be registered (FI_HMEM).
  bool hmem() const { return hmem_; }
  /// True when registering host memory costs about a table entry: the tcp
  /// core provider pins nothing (0.25 us measured for 4 KiB - 16 MiB);
  /// providers that pin pages (verbs, efa, ...) are not claimed.
  bool registersCheaply() const { return choice_.core() == "tcp"; }
  /// Largest single fabric write.
  uint64_t maxFragment() const { return maxFragment_; }
  /// Largest payload a WRITE_SIGNAL message carries here: wire::kInlineWriteMax,
  /// less where the provider's max_msg_size is smaller.
  uint64_t inlineWriteMax() const { return inlineWriteMax_; }
  /// Largest write of a write_signal into host memory that travels as
  /// WRITE_SIGNAL messages (inlineWriteMax() bytes each); 0: none.
  uint64_t messageWriteMax() const { return messageWriteMax_; }
  /// The provider's mr_mode bits.
  uint64_t mrMode() const { return mrMode_; }
  /// This endpoint's name (fi_getname) and address format.
  const std::vector<uint8_t>& endpointName() const { return endpoint_.name; }
  uint32_t addrFormat() const { return addrFormat_; }
  /// "rank N (host H)" for this process.
  std::string describeSelf() const;
  /// For plugboard-info (describe): provider, fabric, domain, signals,
  /// progress, message sizes and lanes, a line each.
  std::string describe() const;
  /// Why peer cannot be reached from this endpoint, or "" when it can.
  std::string whyUnreachable(const PeerInfo& peer) const;

  /// The lock guarding every libfabric call and all mutable state.
  std::mutex& mutex() { return mu_; }
  /// The endpoint; use with mutex() held.
  fid_ep* ep() { return endpoint_.ep.get(); }
  /// This context's lanes (README "Lanes"); fixed after construction.
  size_t laneCount() const { return lanes_.size(); }
  /// Lane i (< laneCount()).
  Lane& lane(size_t i) { return *lanes_[i]; }
  /// setup()'s address blob for connection conn: our endpoint and lanes.
  wire::AddressBlob addressBlob(uint64_t conn) const;
  /// Smallest write cut into one piece per lane.
  uint64_t laneBytes() const { return settings_.laneBytes; }

  // ---- with mutex() held ---------------------------------------------------

  /// Registers [ptr, ptr + size) of the given type; throws Error.
  LocalRegion* registerMemory(void* ptr, size_t size, pb_mem_type type);
  /// Deregisters region (found by address: a stale handle is PB_ERR_INVALID).
  /// Operations still queued in a connection with their source in it are
  /// dropped, failing that connection: they are never read again.
  void deregisterMemory(LocalRegion* region);
  /// Live regions.
  size_t regionCount() const { return regions_.size(); }

  /// Registers conn and returns its id (never 0, never reused).
  uint64_t addConnection(Connection* conn);
  /// Forgets the connection with this id; its operations still in flight
  /// are dropped when they complete.
  void removeConnection(uint64_t id);
  /// Live connections.
  int connections() const { return static_cast<int>(connections_.size()); }

  /// Inserts a peer's endpoint name into the address vector (counted, so
  /// two connections to one peer share the entry); throws Error.
  fi_addr_t insertAddress(const std::vector<uint8_t>& name, const std::string& who);
  /// Drops one reference to addr; removes it from the vector at zero.
  void removeAddress(fi_addr_t addr) noexcept;

  /// A new record for an operation about to be posted (owned here until
  /// dropOp, or until the context closes).
  OpRecord* newOp(OpRecord::Kind kind, uint64_t conn, uint64_t seq, int slot);
  /// Frees a record made by newOp (and its slot, if any).
  void dropOp(OpRecord* op);

  /// A free control-message slot (wire::kMessageBytes of registered memory), or -1.
  int takeSlot();
  /// Returns a slot taken with takeSlot().
  void releaseSlot(int slot);
  /// The slot's bytes.
  uint8_t* slot(int slot);
  /// fi_mr_desc of the slots' memory (may be NULL).
  void* slotDesc() const { return sendSlab_.desc; }

  /// Reads the completion queue and dispatches every entry: completions and
  /// errors to their connections, incoming control messages to the
  /// connection they name. Throws Error if the queue itself fails.
  void progressLocked();

  // ---- thread-safe ---------------------------------------------------------

  /// Logs one line through the core.
  void log(pb_log_level level, const std::string& message) const { host_.log(level, message); }

 private:
  /// Declares the settings through the host table.
  void declareSettings() const;
  /// Why this context should not start ("" when it should): loaded only
  /// for `transports: auto` (host services' loaded_by_auto), no provider
  /// asked for (setting or FI_PROVIDER), and no fabric device here.
  std::string reasonToDecline() const;
  /// Reads and checks every setting; throws Error(PB_ERR_INVALID).
  Settings readSettings() const;
  /// Opens fabric, domain, CQ, AV and endpoint on info.
  void openEndpoint(const fi_info* info);
  /// Keeps every lane progressing long enough for bytes to arrive on them.
  void wakeLanes(uint64_t bytes);
  /// Opens the lanes the settings ask for ("auto": 4 over the tcp provider
  /// on more than 4 cores, else none).
  void openLanes();
  /// Completions and failures from a lane's thread (takes the mutex).
  void onLaneEvents(std::vector<LaneEvent>& events);
  /// Picks the signal mode from the setting and fi_atomicvalid.
  void chooseSignalMode();
  /// Registers the control-message buffers and posts the receives.
  void setUpMessages();
  /// Posts receive slot i; false when the provider said -FI_EAGAIN.
  bool postReceive(size_t i);
  /// Reposts receives that could not be posted earlier.
  void repostReceives();
  /// One completion from the queue.
  void complete(const fi_cq_msg_entry& entry);
  /// One error entry from the queue.
  void completeWithError();
  /// An incoming control message in receive slot i (len bytes).
  void handleMessage(size_t i, size_t len);
  /// Applies a signal message addressed to conn.
  void applySignal(Connection& conn, const wire::Message& m);
  /// Stores a WRITE_SIGNAL message's payload (after its checks), then
  /// applies its signal; a bad target fails the connection.
  void applyWriteSignal(Connection& conn, const wire::Message& m, const uint8_t* ext, size_t extAndPayload);
  /// Tells the core a signal landed (host service, minor 1).
  void signalLanded() const;
  /// The connection with this id, or NULL.
  Connection* findConnection(uint64_t id) const;

  transport_cxx::HostServices host_;
  Settings settings_;
  ProviderChoice choice_;
  std::string summary_;  // what set-up chose, "; "-separated (logged once, and describe())
  SignalMode signalMode_ = SignalMode::Message;
  bool hmem_ = false;
  uint64_t maxFragment_ = 0;
  uint64_t inlineWriteMax_ = 0;
  uint64_t messageWriteMax_ = 0;
  uint64_t mrMode_ = 0;
  uint32_t addrFormat_ = 0;

  std::mutex mu_;
  // Declaration order is creation order; the destructor closes in reverse.
  std::unique_ptr<fi_info, void (*)(fi_info*)> info_{nullptr, fi_freeinfo};
  Endpoint endpoint_;  // fabric, domain, queue, AV, endpoint and its name
  Registration sendSlab_;  // kSlots control-message slots: signal operands and outgoing messages
  Registration recvSlab_;  // kReceives buffers the peers' messages land in
  std::vector<uint8_t> sendBytes_, recvBytes_;
  std::vector<int> freeSlots_;
  std::vector<OpRecord> receives_;      // one per receive buffer, reused
  std::vector<size_t> unpostedReceives_;

  std::unordered_set<OpRecord*> ops_;  // records of operations in flight
  RegionRegistry regions_;
  std::unordered_map<uint64_t, Connection*> connections_;
  uint64_t nextConnection_ = 1;
  std::map<fi_addr_t, int> addressRefs_;
  uint64_t nextKey_ = 1;  // requested MR keys (unless FI_MR_PROV_KEY), small for short mr_key_size
  std::vector<std::unique_ptr<Lane>> lanes_;  // opened last, stopped first

};

}  // namespace plugboard::libfabric
