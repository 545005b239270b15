// Registered memory: registration with every capable transport, and the
// descriptor peers exchange to import it on their connection.
#include "communicator/communicator_impl.hpp"
#include "communicator/wire.hpp"
#include "plugboard/error.hpp"

namespace plugboard {
namespace {

constexpr uint64_t kMemoryMagic = 0x504247424d454d31ull;  // "PGBMEM1"

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

RegisteredMemory Communicator::registerMemory(void* data, size_t size, MemoryKind kind) {
  const char* kindName = kind == MemoryKind::Cuda ? "CUDA" : "host";
  if (!data && size > 0)
    throw Error(ErrorCode::InvalidUsage, "rank " + std::to_string(rank()) + ": registerMemory of " +
                                             std::to_string(size) + " bytes at a null pointer");
  const pb_mem_type type = kind == MemoryKind::Cuda ? PB_MEM_CUDA : PB_MEM_HOST;
  auto m = std::make_shared<RegisteredMemoryImpl>();
  m->data = data;
  m->size = size;
  m->kind = kind;
  m->rank = rank();
  for (auto& p : impl_->plugins) {
    if (!(p->properties().mem_types & type)) continue;
    pb_mr* mr = nullptr;
    p->check(p->api().register_memory(p->context(), data, size, type, &mr),
             "rank " + std::to_string(rank()) + ": register " + std::to_string(size) + " bytes of " + kindName + " memory");
    m->regs.emplace_back(p.get(), mr);
  }
  if (m->regs.empty() && size > 0) {
    std::string loaded;
    for (auto& p : impl_->plugins) loaded += (loaded.empty() ? "" : ", ") + p->name();
    throw Error(ErrorCode::InvalidUsage, "rank " + std::to_string(rank()) + ": no loaded transport can register " +
                                             kindName + " memory (loaded: " + loaded + ")");
  }
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->memories.push_back(m);
  RegisteredMemory out;
  out.impl_ = m;
  return out;
}

void Communicator::Impl::sendMemoryTagged(const RegisteredMemory& mem, int peer, int tag) {
  checkPeer(peer, "sendMemory");
  if (!mem.impl_) throw Error(ErrorCode::InvalidUsage, "sendMemory of an empty RegisteredMemory");
  BlobWriter w;
  w.u64(kMemoryMagic);
  w.i32(self.rank);
  w.u64(mem.size());
  w.u64(mem.kind() == MemoryKind::Cuda ? 1 : 0);
  std::lock_guard<std::mutex> lock(mem.impl_->mutex);
  w.u64(mem.impl_->regs.size());
  for (auto& [p, mr] : mem.impl_->regs) {
    std::vector<char> key(p->properties().max_rkey_size);
    size_t len = key.size();
    p->check(p->api().pack_rkey(p->context(), mr, key.data(), &len), "pack remote key");
    w.str(p->name());
    w.bytes(key.data(), len);
  }
  bootstrap->send(w.data().data(), w.data().size(), peer, tag);
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
  std::vector<char> blob = bootstrap->recv(peer, tag);
  BlobReader r(blob, "rank " + std::to_string(peer));
  if (r.u64() != kMemoryMagic)
    throw Error(ErrorCode::Remote, "rank " + std::to_string(peer) + " sent something that is not a memory descriptor");
  auto out = std::make_shared<RemoteMemoryImpl>();
  out->rank = r.i32();
  out->size = r.u64();
  const MemoryKind kind = r.u64() == 1 ? MemoryKind::Cuda : MemoryKind::Host;
  std::shared_ptr<ConnectionImpl> conn;
  {
    std::lock_guard<std::mutex> lock(mutex);
    conn = findConnection(peer, kind);
  }
  if (!conn)
    throw Error(ErrorCode::InvalidUsage, "rank " + std::to_string(self.rank) + ": rank " + std::to_string(peer) + " sent " +
                                             (kind == MemoryKind::Cuda ? "CUDA" : "host") + " memory but there is no connection for it over " +
                                             choiceFor(peer, kind).transport + ": connect(peer, kind) and setup() first");
  size_t n = r.count();
  std::vector<char> key;
  for (size_t i = 0; i < n; ++i) {
    std::string name = r.str();
    std::vector<char> k = r.bytes();
    if (name == conn->plugin->name()) key = k;
  }
  if (out->rank != peer) throw Error(ErrorCode::Remote, conn->describe() + ": descriptor claims to be from rank " + std::to_string(out->rank));
  if (key.empty()) throw Error(ErrorCode::Remote, conn->describe() + ": the peer's memory is not registered with " + conn->plugin->name());
  std::lock_guard<std::mutex> lock(conn->mutex);
  conn->requireOpen();
  conn->plugin->check(conn->plugin->api().import_rkey(conn->conn, key.data(), key.size(), &out->rkey),
                      conn->describe() + ": import remote key");
  out->connection = conn;
  conn->imports.push_back(out);
  RemoteMemory rm;
  rm.impl_ = out;
  return rm;
}

void Communicator::sendMemory(const RegisteredMemory& mem, int peer, int tag) {
  if (tag < 0 || tag >= (1 << 30)) throw Error(ErrorCode::InvalidUsage, "sendMemory tag " + std::to_string(tag) + " is not in [0, 2^30)");
  impl_->sendMemoryTagged(mem, peer, kTagUserMemoryBase + tag);
}

RemoteMemory Communicator::recvMemory(int peer, int tag) {
  if (tag < 0 || tag >= (1 << 30)) throw Error(ErrorCode::InvalidUsage, "recvMemory tag " + std::to_string(tag) + " is not in [0, 2^30)");
  return impl_->recvMemoryTagged(peer, kTagUserMemoryBase + tag);
}

}  // namespace plugboard
