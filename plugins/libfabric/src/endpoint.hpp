// Opening one RDM endpoint with everything it needs: the context's own and
// each lane's.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fid.hpp"

namespace plugboard::libfabric {

/// The objects of one endpoint, in creation order (close them in reverse).
struct Endpoint {
  FidPtr<fid_fabric> fabric;
  FidPtr<fid_domain> domain;
  FidPtr<fid_cq> cq;
  FidPtr<fid_av> av;
  FidPtr<fid_ep> ep;
  std::vector<uint8_t> name;  ///< fi_getname's, at most 0xffff bytes (the address blob's limit).
};

/// Opens a fabric, domain, completion queue (FI_CQ_FORMAT_MSG, no wait
/// object, room for the provider's queues plus extraCqEntries), address
/// vector and enabled RDM endpoint of info. Throws Error prefixed by where.
Endpoint openRdmEndpoint(const fi_info* info, size_t extraCqEntries, const std::string& where);

}  // namespace plugboard::libfabric
