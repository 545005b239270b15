// Byte layouts the cudaipc transport puts in the blobs the core carries
// between ranks (setup's address, pack_rkey's key). Every integer is
// little-endian and every layout has a fixed size; the structs are the
// decoded forms.
#pragma once

#include <plugboard/transport_cxx.hpp>

#include <array>
#include <cstddef>
#include <cstdint>

namespace plugboard::cudaipc::wire {

/// Format version shared by both layouts; bumped on any change.
constexpr uint32_t kVersion = 1;
/// "PBCA": address blob from setup().
constexpr uint32_t kAddressMagic = 0x41434250;
/// "PBCR": packed remote key.
constexpr uint32_t kRkeyMagic = 0x52434250;

using plugboard::transport_cxx::loadLE;
using plugboard::transport_cxx::storeLE;

/// setup()'s address blob: who this rank is and which GPU it drives.
/// 64 bytes: magic u32 | version u32 | rank i32 | pid u32 | machine u64 |
/// pid_namespace u64 | gpu_uuid 16 bytes | pci_bus_id 16 bytes (NUL-padded
/// text, e.g. "0000:18:00.0").
struct AddressBlob {
  uint32_t magic = kAddressMagic;
  uint32_t version = kVersion;
  int32_t rank = -1;
  uint32_t pid = 0;
  uint64_t machine = 0;       ///< Hash of the kernel's boot id: equal on one machine.
  uint64_t pidNamespace = 0;  ///< Inode of /proc/self/ns/pid.
  std::array<uint8_t, 16> gpuUuid{};
  std::array<char, 16> pciBusId{};

  static constexpr size_t kSize = 64;
  /// Writes the 64-byte wire form to out.
  void encode(uint8_t* out) const;
  /// Reads the wire form; the caller has checked the length.
  static AddressBlob decode(const uint8_t* in);
};

/// How a region is exported.
enum class ExportKind : uint32_t {
  Empty = 0,   ///< A zero-byte region with no allocation behind it.
  Legacy = 1,  ///< cudaMalloc memory: a cudaIpcMemHandle_t.
  CuMemFd = 2  ///< cuMemCreate memory: a POSIX fd in the exporter, fetched with pidfd_getfd.
};

/// pack_rkey()'s blob. 136 bytes: magic u32 | version u32 | kind u32 |
/// pid u32 (exporter) | machine u64 | pid_namespace u64 | export_id u64 |
/// alloc_base u64 (exporter's address of the allocation) | alloc_size u64 |
/// offset u64 (registered pointer - alloc_base) | size u64 (registered bytes) |
/// handle 64 bytes (Legacy: the cudaIpcMemHandle_t; CuMemFd: the fd as i32,
/// then zeros).
struct PackedRkey {
  uint32_t magic = kRkeyMagic;
  uint32_t version = kVersion;
  ExportKind kind = ExportKind::Empty;
  uint32_t pid = 0;
  uint64_t machine = 0;
  uint64_t pidNamespace = 0;
  uint64_t exportId = 0;  ///< Unique per export in the exporter (never reused).
  uint64_t allocBase = 0;
  uint64_t allocSize = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  std::array<uint8_t, 64> handle{};

  static constexpr size_t kSize = 136;
  /// Writes the 136-byte wire form to out.
  void encode(uint8_t* out) const;
  /// Reads the wire form; the caller has checked the length.
  static PackedRkey decode(const uint8_t* in);
};

}  // namespace plugboard::cudaipc::wire
