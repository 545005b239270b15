// RAII for libfabric objects.
#pragma once

#include <rdma/fabric.h>

#include <memory>

namespace plugboard::libfabric {

/// Closes a libfabric object with fi_close (errors ignored: used on
/// teardown paths that must not throw).
struct FidCloser {
  template <typename T>
  void operator()(T* p) const noexcept {
    if (p) fi_close(&p->fid);
  }
};

/// A libfabric object closed when the pointer goes.
template <typename T>
using FidPtr = std::unique_ptr<T, FidCloser>;

}  // namespace plugboard::libfabric
