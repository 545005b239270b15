#include <cstdint>

#include "collectives/host_collectives_impl.hpp"
#include "plugboard/error.hpp"

namespace plugboard {

size_t checkedBytes(const char* what, const void* a, const void* b, size_t count, DataType type, size_t factor) {
  size_t esize = dataTypeSize(type);
  if (count > SIZE_MAX / esize / factor)
    throw Error(ErrorCode::InvalidUsage, std::string(what) + ": count " + std::to_string(count) + " of " +
                                             dataTypeName(type) + " overflows the address space");
  if (count > 0 && (!a || !b))
    throw Error(ErrorCode::InvalidUsage, std::string(what) + ": null buffer with count " + std::to_string(count));
  return count * esize;
}

void checkOp(const char* what, ReduceOp op) {
  int v = static_cast<int>(op);
  if (v < static_cast<int>(ReduceOp::Sum) || v > static_cast<int>(ReduceOp::Avg))
    throw Error(ErrorCode::InvalidUsage, std::string(what) + ": unknown reduction op " + std::to_string(v));
}

void checkRoot(const char* what, int root, int nranks) {
  if (root < 0 || root >= nranks)
    throw Error(ErrorCode::InvalidUsage, std::string(what) + ": root " + std::to_string(root) +
                                             " is not a rank of 0.." + std::to_string(nranks - 1));
}

std::vector<Segment> splitSegments(size_t count, int n) {
  std::vector<Segment> segs(static_cast<size_t>(n));
  size_t base = count / n, extra = count % n, at = 0;
  for (int j = 0; j < n; ++j) {
    segs[j].begin = at;
    segs[j].count = base + (static_cast<size_t>(j) < extra ? 1 : 0);
    at += segs[j].count;
  }
  return segs;
}

}  // namespace plugboard
