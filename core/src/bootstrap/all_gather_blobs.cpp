#include <algorithm>
#include <cstring>

#include "plugboard/bootstrap.hpp"

namespace plugboard {

// Sizes first, then one allGather with every slot padded to the largest blob.
std::vector<std::vector<char>> Bootstrap::allGatherBlobs(const std::vector<char>& mine) {
  const size_t n = static_cast<size_t>(size()), me = static_cast<size_t>(rank());
  std::vector<uint64_t> sizes(n, 0);
  sizes[me] = mine.size();
  allGather(sizes.data(), sizeof(uint64_t));
  const size_t slot = static_cast<size_t>(*std::max_element(sizes.begin(), sizes.end()));
  std::vector<char> all(n * slot);
  if (!mine.empty()) memcpy(all.data() + me * slot, mine.data(), mine.size());
  allGather(all.data(), slot);
  std::vector<std::vector<char>> out(n);
  for (size_t r = 0; r < n; ++r) {
    const char* p = all.data() + r * slot;
    out[r].assign(p, p + sizes[r]);
  }
  return out;
}

}  // namespace plugboard
