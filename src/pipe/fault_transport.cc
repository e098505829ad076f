#include "pipe/fault_transport.h"

#include <cstdio>
#include <string>
#include <utility>

#include "base/error.h"

namespace grove {

PipeFault ParsePipeFault(std::string_view spec) {
  if (spec.empty()) return {};
  const std::string text(spec);
  char kind[8] = {};
  int rank = -1;
  long long sends = 0;
  if (std::sscanf(text.c_str(), "%7[a-z]:%d:%lld", kind, &rank, &sends) != 3 || sends < 0 ||
      (std::string(kind) != "kill" && std::string(kind) != "stop")) {
    Fail("GROVE_PIPE_FAULT: '", text, "' is not kill:RANK:SENDS or stop:RANK:SENDS");
  }
  return {.kind = std::string(kind) == "kill" ? PipeFaultKind::kKill : PipeFaultKind::kStop,
          .rank = rank,
          .sends = sends};
}

FaultTransport::FaultTransport(PipeTransport& inner, const PipeFault& fault, Strike strike)
    : ForwardingTransport(inner),
      kind_(fault.rank == inner.rank() ? fault.kind : PipeFaultKind::kNone),
      sends_left_(fault.sends),
      strike_(std::move(strike)) {}

void FaultTransport::Send(int32_t to, int32_t tag, const PipeMessage& message) {
  if (kind_ != PipeFaultKind::kNone && sends_left_-- == 0) strike_(kind_);
  ForwardingTransport::Send(to, tag, message);
}

}  // namespace grove
