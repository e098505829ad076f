#include "pipe/pipe_transport.h"

#include "base/error.h"

namespace grove {

PipeMessage Broadcast(PipeTransport& transport, int32_t root, int32_t tag, PipeMessage message) {
  if (transport.rank() != root) return transport.Receive(root, tag);
  for (int32_t r = 0; r < transport.size(); ++r) {
    if (r != root) transport.Send(r, tag, message);
  }
  return message;
}

namespace {

// A 64-bit fingerprint as two int32 halves of a message.
void AppendFingerprint(uint64_t value, std::vector<int32_t>* ints) {
  ints->push_back(static_cast<int32_t>(static_cast<uint32_t>(value >> 32)));
  ints->push_back(static_cast<int32_t>(static_cast<uint32_t>(value)));
}

uint64_t ReadFingerprint(const std::vector<int32_t>& ints, std::size_t i) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(ints.at(2 * i))) << 32) |
         static_cast<uint32_t>(ints.at(2 * i + 1));
}

}  // namespace

void CheckRanksAgree(PipeTransport& transport, int32_t tag, const std::vector<RankInput>& inputs) {
  std::vector<int32_t> own;
  for (const RankInput& input : inputs) AppendFingerprint(input.fingerprint, &own);
  // Rank 0's verdict: {-1} when all agree, else {rank, part}.
  std::vector<int32_t> verdict = {-1};
  if (transport.rank() == 0) {
    for (int32_t r = 1; r < transport.size(); ++r) {
      const PipeMessage m = transport.Receive(r, tag);
      for (std::size_t i = 0; i < inputs.size() && verdict[0] < 0; ++i) {
        if (m.ints.size() != own.size() || ReadFingerprint(m.ints, i) != inputs[i].fingerprint) {
          verdict = {r, static_cast<int32_t>(i)};
        }
      }
    }
  } else {
    transport.Send(0, tag, {own, {}});
  }
  verdict = Broadcast(transport, 0, tag, {verdict, {}}).ints;
  if (verdict.at(0) < 0) return;
  const auto part = static_cast<std::size_t>(verdict.at(1));
  Fail("rank ", verdict[0], " and rank 0 were given different ",
       part < inputs.size() ? inputs[part].name : std::string("inputs"),
       ": every rank must run with the same model files, prompt and options");
}

}  // namespace grove
