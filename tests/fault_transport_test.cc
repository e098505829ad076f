// The fault transport the failure-path tests of `grove pipe` inject (GROVE_PIPE_FAULT): its spec,
// and that it strikes on the named rank at the named send and nowhere else, checked in-process
// (the MPI test, tests/pipe_mpi_test.cc, kills a real rank with it).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "base/error.h"
#include "pipe/fault_transport.h"
#include "pipe/in_process_transport.h"

namespace grove {
namespace {

TEST(PipeFault, ParsesKillAndStopAndRefusesAnythingElse) {
  const PipeFault none = ParsePipeFault("");
  EXPECT_EQ(none.kind, PipeFaultKind::kNone);
  const PipeFault kill = ParsePipeFault("kill:2:30");
  EXPECT_EQ(kill.kind, PipeFaultKind::kKill);
  EXPECT_EQ(kill.rank, 2);
  EXPECT_EQ(kill.sends, 30);
  const PipeFault stop = ParsePipeFault("stop:0:0");
  EXPECT_EQ(stop.kind, PipeFaultKind::kStop);
  EXPECT_EQ(stop.rank, 0);
  EXPECT_EQ(stop.sends, 0);
  for (const char* bad : {"kill", "kill:2", "die:1:3", "kill:x:3", "kill:1:-1", "KILL:1:1"}) {
    try {
      ParsePipeFault(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
}

// Strikes instead of the send after `sends` sends on the named rank; the send goes on when the
// strike returns (a stopped process that is continued); other ranks only forward.
TEST(FaultTransport, StrikesOnItsRankAtTheNamedSend) {
  InProcessNetwork network(2, std::chrono::milliseconds(1000));
  std::vector<PipeFaultKind> struck;
  const auto strike = [&](PipeFaultKind kind) { struck.push_back(kind); };
  const PipeFault fault{.kind = PipeFaultKind::kStop, .rank = 0, .sends = 2};
  FaultTransport failing(network.transport(0), fault, strike);
  FaultTransport healthy(network.transport(1), fault, strike);
  EXPECT_EQ(failing.rank(), 0);
  EXPECT_EQ(failing.size(), 2);
  for (int32_t i = 0; i < 2; ++i) failing.Send(1, kPipeHiddenTag, {{i}, {}});
  EXPECT_TRUE(struck.empty());
  failing.Send(1, kPipeHiddenTag, {{2}, {}});
  EXPECT_EQ(struck, std::vector<PipeFaultKind>{PipeFaultKind::kStop});
  failing.Send(1, kPipeHiddenTag, {{3}, {}});  // once only
  EXPECT_EQ(struck.size(), 1u);
  for (int32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(healthy.Receive(0, kPipeHiddenTag).ints, std::vector<int32_t>{i});
    healthy.Send(0, kPipeTokenTag, {{i}, {}});
  }
  EXPECT_EQ(struck.size(), 1u);
  for (int32_t i = 0; i < 4; ++i)
    EXPECT_EQ(failing.Receive(1, kPipeTokenTag).ints, std::vector<int32_t>{i});
}

// A strike that throws (as a dying rank's failure does in-process) stops that send.
TEST(FaultTransport, AThrowingStrikeStopsTheSend) {
  InProcessNetwork network(2, std::chrono::milliseconds(100));
  FaultTransport failing(network.transport(1),
                         {.kind = PipeFaultKind::kKill, .rank = 1, .sends = 0},
                         [](PipeFaultKind) { Fail("rank died"); });
  EXPECT_THROW(failing.Send(0, kPipeHiddenTag, {{1}, {}}), Error);
  EXPECT_THROW(network.transport(0).Receive(1, kPipeHiddenTag), PipeTransportError);
}

}  // namespace
}  // namespace grove
