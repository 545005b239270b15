// Registered memory: registration with every capable transport, and the
// descriptor peers exchange to import it on their connection.
#include <algorithm>

#include "communicator/communicator_impl.hpp"
#include "communicator/memory_descriptor.hpp"
#include "plugboard/error.hpp"

namespace plugboard {
namespace {

/// Drops the expired entries of v when its size reaches a power of two from
/// 64 (per-call registrations come and go: the lists must not grow
/// forever); true when it looked.
template <typename T>
bool pruneExpired(std::vector<std::weak_ptr<T>>& v) {
  if (v.size() < 64 || (v.size() & (v.size() - 1)) != 0) return false;
  v.erase(std::remove_if(v.begin(), v.end(), [](const std::weak_ptr<T>& w) { return w.expired(); }), v.end());
  return true;
}

}  // namespace

pb_mr* RegisteredMemoryImpl::handleFor(const TransportPlugin* plugin) {
  std::lock_guard<std::mutex> lock(mutex);
  for (auto& [p, mr] : regs)
    if (p == plugin) return mr;
  return nullptr;
}

void RegisteredMemoryImpl::release() {
  std::lock_guard<std::mutex> lock(mutex);
  for (auto& [p, mr] : regs) p->api().deregister_memory(p->context(), mr);
  regs.clear();
}

void* RegisteredMemory::data() const { return impl_ ? impl_->data : nullptr; }
MemoryKind RegisteredMemory::kind() const { return impl_ ? impl_->kind : MemoryKind::Host; }
size_t RegisteredMemory::size() const { return impl_ ? impl_->size : 0; }
size_t RemoteMemory::size() const { return impl_ ? impl_->size : 0; }
int RemoteMemory::rank() const { return impl_ ? impl_->rank : -1; }

std::shared_ptr<RegisteredMemoryImpl> Communicator::Impl::registerRegion(void* data, size_t size, MemoryKind kind,
                                                                       const std::string& only) {
  const std::string who = "rank " + std::to_string(self.rank);
  const char* kindName = kind == MemoryKind::Cuda ? "CUDA" : "host";
  if (!data && size > 0)
    throw Error(ErrorCode::InvalidUsage, who + ": registerMemory of " + std::to_string(size) + " bytes at a null pointer");
  const pb_mem_type type = kind == MemoryKind::Cuda ? PB_MEM_CUDA : PB_MEM_HOST;
  auto m = std::make_shared<RegisteredMemoryImpl>();
  m->data = data;
  m->size = size;
  m->kind = kind;
  m->rank = self.rank;
  bool onlyFound = only.empty();
  for (auto& p : plugins) {
    if (!only.empty() && p->name() != only) continue;
    onlyFound = true;
    if (!(p->properties().mem_types & type)) continue;
    pb_mr* mr = nullptr;
    p->check(p->api().register_memory(p->context(), data, size, type, &mr),
             who + ": register " + std::to_string(size) + " bytes of " + kindName + " memory");
    m->regs.emplace_back(p.get(), mr);
  }
  if (!onlyFound) throw Error(ErrorCode::InvalidUsage, who + ": registerMemory with " + only + ", which is not loaded");
  // CUDA memory no transport takes is still usable through staging.
  const bool stageable = kind == MemoryKind::Cuda && coreCanStageCuda();
  if (m->regs.empty() && size > 0 && !stageable) {
    std::string loaded;
    for (auto& p : plugins) loaded += (loaded.empty() ? "" : ", ") + p->name();
    throw Error(ErrorCode::InvalidUsage, who + ": no loaded transport can register " + kindName +
                                             " memory (loaded: " + loaded + ")");
  }
  std::lock_guard<std::mutex> lock(mutex);
  m->id = nextRegionId++;
  memories.push_back(m);
  regionsById[m->id] = m;
  if (pruneExpired(memories)) {
    for (auto it = regionsById.begin(); it != regionsById.end();) it = it->second.expired() ? regionsById.erase(it) : ++it;
  }
  return m;
}

std::shared_ptr<RegisteredMemoryImpl> Communicator::Impl::findRegion(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = regionsById.find(id);
  return it == regionsById.end() ? nullptr : it->second.lock();
}

RegisteredMemory Communicator::registerMemory(void* data, size_t size, MemoryKind kind) {
  RegisteredMemory out;
  out.impl_ = impl_->registerRegion(data, size, kind);
  return out;
}

RegisteredMemory Communicator::registerMemory(void* data, size_t size, MemoryKind kind, const std::string& transport) {
  if (transport.empty()) throw Error(ErrorCode::InvalidUsage, "registerMemory: empty transport name");
  RegisteredMemory out;
  out.impl_ = impl_->registerRegion(data, size, kind, transport);
  return out;
}

std::vector<char> Communicator::serializeMemory(const RegisteredMemory& mem) {
  if (!mem.impl_) throw Error(ErrorCode::InvalidUsage, "serializeMemory of an empty RegisteredMemory");
  return impl_->describeMemory(*mem.impl_);
}

RemoteMemory Communicator::deserializeMemory(const std::vector<char>& descriptor, int peer) {
  impl_->checkPeer(peer, "deserializeMemory");
  RemoteMemory rm;
  rm.impl_ = impl_->importMemory(descriptor, peer, nullptr);
  return rm;
}

std::vector<char> Communicator::Impl::describeMemory(RegisteredMemoryImpl& mem) {
  MemoryDescriptor d;
  d.rank = self.rank;
  d.size = mem.size;
  d.kind = mem.kind;
  d.regionId = mem.id;
  std::lock_guard<std::mutex> lock(mem.mutex);
  for (auto& [p, mr] : mem.regs) {
    std::vector<char> key(p->properties().max_rkey_size);
    size_t len = key.size();
    p->check(p->api().pack_rkey(p->context(), mr, key.data(), &len), "pack remote key");
    key.resize(len);
    d.keys.emplace_back(p->name(), std::move(key));
  }
  return encodeMemoryDescriptor(d);
}

void Communicator::Impl::sendMemoryTagged(const RegisteredMemory& mem, int peer, int tag) {
  checkPeer(peer, "sendMemory");
  if (!mem.impl_) throw Error(ErrorCode::InvalidUsage, "sendMemory of an empty RegisteredMemory");
  std::vector<char> blob = describeMemory(*mem.impl_);
  bootstrap->send(blob.data(), blob.size(), peer, tag);
}

namespace {

/// Picks conn's key out of a descriptor's per-transport keys, or marks the
/// region staged when conn stages CUDA memory; then imports it.
void importOnConnection(ConnectionImpl& conn, RemoteMemoryImpl& out, const MemoryDescriptor& d) {
  const std::vector<char>* key = nullptr;
  for (const auto& [name, k] : d.keys)
    if (name == conn.plugin->name()) key = &k;
  if (out.kind == MemoryKind::Cuda && !key && conn.stager) {
    out.staged = true;
    return;
  }
  if (!key)
    throw Error(ErrorCode::Remote, conn.describe() + ": the peer's " + (out.kind == MemoryKind::Cuda ? "CUDA" : "host") +
                                       " memory is not registered with " + conn.plugin->name() +
                                       (out.kind == MemoryKind::Cuda ? " and this connection does not stage CUDA memory "
                                                                       "(connect(peer, MemoryKind::Cuda) and setup() first)"
                                                                     : ""));
  std::lock_guard<std::mutex> lock(conn.mutex);
  conn.requireOpen();
  const pb_status st = conn.plugin->api().import_rkey(conn.conn, key->data(), key->size(), &out.rkey);
  if (st != PB_OK) conn.plugin->check(st, conn.describe() + ": import remote key");
}

}  // namespace

std::shared_ptr<RemoteMemoryImpl> Communicator::Impl::importMemory(const std::vector<char>& blob, int peer,
                                                                   std::shared_ptr<ConnectionImpl> conn) {
  const MemoryDescriptor d = decodeMemoryDescriptor(blob, "rank " + std::to_string(peer));
  auto out = std::make_shared<RemoteMemoryImpl>();
  out->rank = d.rank;
  out->size = d.size;
  out->kind = d.kind;
  out->regionId = d.regionId;
  if (!conn) {
    std::lock_guard<std::mutex> lock(mutex);
    conn = findConnection(peer, out->kind);
  }
  if (!conn)
    throw Error(ErrorCode::InvalidUsage, "rank " + std::to_string(self.rank) + ": rank " + std::to_string(peer) + " sent " +
                                             (out->kind == MemoryKind::Cuda ? "CUDA" : "host") +
                                             " memory but there is no connection for it over " +
                                             choiceFor(peer, out->kind).transport + ": connect(peer, kind) and setup() first");
  if (out->rank != peer)
    throw Error(ErrorCode::Remote, conn->describe() + ": descriptor claims to be from rank " + std::to_string(out->rank));
  importOnConnection(*conn, *out, d);
  out->connection = conn;
  if (out->rkey) {
    std::lock_guard<std::mutex> lock(conn->mutex);
    conn->imports.push_back(out);
    pruneExpired(conn->imports);
  }
  return out;
}

RemoteMemory Communicator::Impl::recvMemoryTagged(int peer, int tag) {
  checkPeer(peer, "recvMemory");
  bool anyConnection = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& [key, c] : connections) anyConnection = anyConnection || key.first == peer;
  }
  if (!anyConnection)
    throw Error(ErrorCode::InvalidUsage, "rank " + std::to_string(self.rank) + ": recvMemory from rank " +
                                             std::to_string(peer) + " needs a connection to it: connect() and setup() first");
  RemoteMemory rm;
  rm.impl_ = importMemory(bootstrap->recv(peer, tag), peer, nullptr);
  return rm;
}

void Communicator::sendMemory(const RegisteredMemory& mem, int peer, int tag) {
  if (tag < 0 || tag >= (1 << 30)) throw Error(ErrorCode::InvalidUsage, "sendMemory tag " + std::to_string(tag) + " is not in [0, 2^30)");
  impl_->throwIfAborted("sendMemory()");
  impl_->sendMemoryTagged(mem, peer, kTagUserMemoryBase + tag);
}

RemoteMemory Communicator::recvMemory(int peer, int tag) {
  if (tag < 0 || tag >= (1 << 30)) throw Error(ErrorCode::InvalidUsage, "recvMemory tag " + std::to_string(tag) + " is not in [0, 2^30)");
  impl_->throwIfAborted("recvMemory()");
  return impl_->recvMemoryTagged(peer, kTagUserMemoryBase + tag);
}

}  // namespace plugboard
