#include "communicator/memory_descriptor.hpp"

#include <set>

#include "communicator/wire.hpp"
#include "plugboard/error.hpp"

namespace plugboard {
namespace {

constexpr uint64_t kMemoryMagic = 0x504247424d454d31ull;  // "PGBMEM1"
constexpr uint64_t kHostKind = 0, kCudaKind = 1;

[[noreturn]] void malformed(const std::string& from, const std::string& what) {
  throw Error(ErrorCode::Remote, "malformed memory descriptor from " + from + ": " + what);
}

}  // namespace

std::vector<char> encodeMemoryDescriptor(const MemoryDescriptor& d) {
  BlobWriter w;
  w.u64(kMemoryMagic);
  w.i32(d.rank);
  w.u64(d.size);
  w.u64(d.kind == MemoryKind::Cuda ? kCudaKind : kHostKind);
  w.u64(d.regionId);
  w.u64(d.keys.size());
  for (const auto& [name, key] : d.keys) {
    w.str(name);
    w.bytes(key.data(), key.size());
  }
  return w.data();
}

MemoryDescriptor decodeMemoryDescriptor(const std::vector<char>& blob, const std::string& from) {
  BlobReader r(blob, from);
  if (r.u64() != kMemoryMagic)
    throw Error(ErrorCode::Remote, from + " sent something that is not a memory descriptor");
  MemoryDescriptor d;
  d.rank = r.i32();
  d.size = r.u64();
  const uint64_t kind = r.u64();
  if (kind != kHostKind && kind != kCudaKind) malformed(from, "memory kind " + std::to_string(kind));
  d.kind = kind == kCudaKind ? MemoryKind::Cuda : MemoryKind::Host;
  d.regionId = r.u64();
  const size_t n = r.count();
  std::set<std::string> seen;
  for (size_t i = 0; i < n; ++i) {
    std::string name = r.str();
    std::vector<char> key = r.bytes();
    if (!seen.insert(name).second) malformed(from, "transport '" + name + "' named twice");
    d.keys.emplace_back(std::move(name), std::move(key));
  }
  if (!r.done()) malformed(from, "bytes after the last key");
  return d;
}

}  // namespace plugboard
