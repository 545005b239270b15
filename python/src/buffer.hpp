/// @file buffer.hpp
/// A buffer as the Python layer hands it to the native module, and the
/// argument checks every collective binding shares.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugboard/datatype.hpp"

namespace plugboard::python {

/// One buffer: its address, element count and type. The Python layer has
/// checked that it is contiguous, in the right memory (host for the host
/// collectives, CUDA for the GPU ones), and writable where it is written.
struct Buffer {
  uintptr_t address = 0;  ///< First element.
  size_t count = 0;       ///< Elements.
  DataType type = DataType::Uint8;

  void* data() const { return reinterpret_cast<void*>(address); }
};

/// Who calls, for the checks' messages: "all_reduce on rank 1 of 4".
struct CallSite {
  const char* call;
  int rank;
  int nranks;
};

/// Throws Error(InvalidUsage) naming the call unless the types match.
void requireSameType(const CallSite& at, const Buffer& send, const Buffer& recv);
/// Throws Error(InvalidUsage) naming the call and the buffer when its
/// count is not the expected one.
void requireCount(const CallSite& at, const char* which, const Buffer& buf, size_t expected);
/// Throws Error(InvalidUsage) naming the call unless peer is a rank.
void requirePeer(const CallSite& at, const char* what, int peer);
/// Throws Error(InvalidUsage) unless count splits into nranks equal blocks.
void requireBlocks(const CallSite& at, const Buffer& buf);

}  // namespace plugboard::python
