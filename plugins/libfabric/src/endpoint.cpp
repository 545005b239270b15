#include "endpoint.hpp"

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include <algorithm>

#include "error.hpp"

namespace plugboard::libfabric {

Endpoint openRdmEndpoint(const fi_info* info, size_t extraCqEntries, const std::string& where) {
  auto* mutableInfo = const_cast<fi_info*>(info);
  Endpoint e;
  fid_fabric* fabric = nullptr;
  fiCheck(fi_fabric(info->fabric_attr, &fabric, nullptr), where + ": fi_fabric");
  e.fabric.reset(fabric);
  fid_domain* domain = nullptr;
  fiCheck(fi_domain(fabric, mutableInfo, &domain, nullptr), where + ": fi_domain");
  e.domain.reset(domain);

  fi_cq_attr cqAttr{};
  cqAttr.format = FI_CQ_FORMAT_MSG;
  cqAttr.wait_obj = FI_WAIT_NONE;
  cqAttr.size = std::min<size_t>(info->tx_attr->size + info->rx_attr->size + extraCqEntries, 1 << 16);
  fid_cq* cq = nullptr;
  fiCheck(fi_cq_open(domain, &cqAttr, &cq, nullptr), where + ": fi_cq_open");
  e.cq.reset(cq);

  fi_av_attr avAttr{};
  avAttr.type = info->domain_attr->av_type;
  fid_av* av = nullptr;
  fiCheck(fi_av_open(domain, &avAttr, &av, nullptr), where + ": fi_av_open");
  e.av.reset(av);

  fid_ep* ep = nullptr;
  fiCheck(fi_endpoint(domain, mutableInfo, &ep, nullptr), where + ": fi_endpoint");
  e.ep.reset(ep);
  fiCheck(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), where + ": binding the completion queue");
  fiCheck(fi_ep_bind(ep, &av->fid, 0), where + ": binding the address vector");
  fiCheck(fi_enable(ep), where + ": fi_enable");

  size_t len = 0;
  int rc = fi_getname(&ep->fid, nullptr, &len);
  OFI_CHECK(rc == -FI_ETOOSMALL || rc == 0, statusForFiError(-rc), where + ": fi_getname: " + fiErrorText(rc));
  e.name.resize(len);
  fiCheck(fi_getname(&ep->fid, e.name.data(), &len), where + ": fi_getname");
  e.name.resize(len);
  OFI_CHECK(len > 0 && len <= 0xffff, PB_ERR_UNSUPPORTED,
            where + ": endpoint name of " + std::to_string(len) + " bytes does not fit the address blob");
  return e;
}

}  // namespace plugboard::libfabric
