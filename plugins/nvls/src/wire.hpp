// The record every rank contributes to each all_gather of group_create:
// how its last phase went (so one rank's failure unwinds every rank) and
// what the next phase needs from it (handle support, granularity, the
// exported handle). Fixed size and little-endian, as the core's all_gather
// moves bytes between processes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace plugboard::nvls {

/// The steps of group_create, each closed by one all_gather of Reports.
enum class Phase : uint32_t {
  Agree = 1,        ///< Device, primary context, handle support; requested size.
  Granularity = 2,  ///< Multicast and allocation granularity for the chosen handle kind.
  Create = 3,       ///< Rank 0: cuMulticastCreate and export.
  Join = 4,         ///< Others import; every rank cuMulticastAddDevice. Its gather is the barrier before any bind.
  Bind = 5,         ///< cuMemCreate and cuMulticastBindMem.
  Map = 6           ///< Unicast and multicast views mapped; its gather is the barrier before any use.
};

/// "allocating and binding memory", for messages.
const char* phaseName(Phase phase);

/// One rank's record for one phase. Fields a phase does not use stay 0.
struct Report {
  static constexpr uint32_t kMagic = 0x564e4250;  ///< "PBNV"
  static constexpr uint32_t kVersion = 1;
  static constexpr size_t kWhatBytes = 184;       ///< Room for the failure text, NUL included.
  static constexpr size_t kSize = 320;            ///< Packed size.

  Phase phase = Phase::Agree;
  int32_t status = 0;            ///< pb_status of the phase on this rank (PB_OK = 0).
  int32_t groupRank = -1;        ///< Sender's group rank.
  int32_t nranks = 0;            ///< Sender's idea of the group size.
  int32_t device = -1;           ///< Sender's CUDA ordinal.
  uint32_t handlePreference = 0; ///< HandlePreference as an integer (Agree).
  uint32_t fabric = 0;           ///< 1: the GPU exports fabric handles (Agree).
  uint32_t posixFd = 0;          ///< 1: the GPU exports POSIX fds (Agree).
  uint32_t pid = 0;              ///< Rank 0's process id (Create, posix_fd).
  int32_t fd = -1;               ///< Rank 0's exported descriptor there (Create, posix_fd).
  uint64_t bytes = 0;            ///< Bytes the sender was asked for (Agree).
  uint64_t mcGranularity = 0;    ///< cuMulticastGetGranularity (Granularity).
  uint64_t ucGranularity = 0;    ///< cuMemGetAllocationGranularity (Granularity).
  std::array<uint8_t, 64> fabricHandle{};  ///< CUmemFabricHandle (Create, fabric).
  std::string what;              ///< Failure text when status != 0 (truncated to fit).

  /// Writes kSize bytes to out.
  void pack(uint8_t* out) const;
  /// Reads kSize bytes. Throws Error(PB_ERR_REMOTE) for a wrong magic or
  /// version (a rank speaking something else, or ranks out of step).
  static Report unpack(const uint8_t* in);
};

}  // namespace plugboard::nvls
