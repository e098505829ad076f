// Failures injected into a pipeline run, as a host that dies or hangs would fail it: a rank that,
// after a number of sends, is killed or stopped. What the tests of the failure path ask for
// (GROVE_PIPE_FAULT, which `grove pipe` reads: tests/pipe_mpi_test.cc); parsed and counted here so
// that an in-process test checks it (tests/fault_transport_test.cc), while the tool decides what
// a kill or a stop does to its process.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "pipe/pipe_transport.h"

namespace grove {

enum class PipeFaultKind { kNone, kKill, kStop };

struct PipeFault {
  PipeFaultKind kind = PipeFaultKind::kNone;
  int32_t rank = -1;  // the rank that fails
  int64_t sends = 0;  // messages it sends before
};

// "kill:RANK:SENDS" or "stop:RANK:SENDS"; an empty spec is no fault. Throws grove::Error naming
// the spec otherwise.
PipeFault ParsePipeFault(std::string_view spec);

// Forwards every call; on the fault's rank, the send after fault.sends sends first calls
// strike(kind) (the tool raises the signal there, which does not return for a kill). When strike
// returns (a stopped process continued), the send goes on.
class FaultTransport : public ForwardingTransport {
 public:
  using Strike = std::function<void(PipeFaultKind kind)>;
  FaultTransport(PipeTransport& inner, const PipeFault& fault, Strike strike);
  void Send(int32_t to, int32_t tag, const PipeMessage& message) override;

 private:
  PipeFaultKind kind_;  // kNone unless this rank is the one that fails
  int64_t sends_left_;
  Strike strike_;
};

}  // namespace grove
