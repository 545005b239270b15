#include "request.hpp"

#include "error.hpp"

namespace plugboard::nvls {

GroupRequest GroupRequest::from(const pb_group_desc_v1* desc) {
  NVLS_CHECK(desc, PB_ERR_INVALID, "nvls: the group description must not be NULL");
  NVLS_CHECK(PB_HAS_FIELD(desc, pb_group_desc_v1, bootstrap), PB_ERR_INVALID,
             "nvls: pb_group_desc_v1 of " + std::to_string(desc->struct_size) + " bytes is too short");
  NVLS_CHECK(desc->nranks >= 1, PB_ERR_INVALID,
             "nvls: a group of " + std::to_string(desc->nranks) + " ranks makes no sense");
  NVLS_CHECK(desc->rank >= 0 && desc->rank < desc->nranks, PB_ERR_INVALID,
             "nvls: group rank " + std::to_string(desc->rank) + " is outside 0.." + std::to_string(desc->nranks - 1));
  NVLS_CHECK(desc->cuda_device >= 0, PB_ERR_INVALID,
             "nvls: CUDA device " + std::to_string(desc->cuda_device) + " is not a device ordinal");
  NVLS_CHECK(desc->bytes > 0, PB_ERR_INVALID, "nvls: a group buffer of 0 bytes was asked for");
  GroupRequest r;
  r.rank = desc->rank;
  r.nranks = desc->nranks;
  r.device = desc->cuda_device;
  r.bytes = desc->bytes;
  r.commRanks.reserve(static_cast<size_t>(desc->nranks));
  for (int i = 0; i < desc->nranks; ++i) r.commRanks.push_back(desc->comm_ranks ? desc->comm_ranks[i] : i);
  return r;
}

std::string GroupRequest::describe(int groupRank) const {
  const bool known = groupRank >= 0 && groupRank < nranks;
  return "group rank " + std::to_string(groupRank) + " (communicator rank " +
         (known ? std::to_string(commRanks[static_cast<size_t>(groupRank)]) : std::string("?")) + ")";
}

}  // namespace plugboard::nvls
