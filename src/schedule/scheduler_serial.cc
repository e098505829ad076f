// serial-ar and serial-sd: one sequence at a time, each to its end, on the target's pool.

#include "schedule/scheduler.h"

#include <functional>

#include "base/timer.h"
#include "schedule/scheduler_lane.h"
#include "speculate/plain_decoding.h"

namespace grove {

void Scheduler::RunSerial(Source& source) {
  if (options_.policy == SchedulePolicy::kSerialAr) {
    for (int64_t r; (r = source.Next(/*wait=*/true)) != Source::kClosed;) RunPlain(source, r);
    return;
  }
  Lane& lane = LaneAt(0);
  Batch batch;
  for (int64_t r; (r = source.Next(/*wait=*/true)) != Source::kClosed;) {
    if (!Admit(source, r, lane)) continue;
    SpeculativeSession& session = *lane.session;
    bool streaming = true;
    while (!session.done() && streaming) {
      session.Draft();
      Timer busy;
      batch.Clear();
      session.AppendVerify(batch);
      Timer forward;
      const std::span<const float> logits = target_.Forward(batch);
      session.RecordVerifyForward(forward.Seconds());
      streaming = DeliverStep(source.request(r), session, session.Accept(logits), source.result(r));
      ++stats_.target_forwards;
      stats_.target_busy_seconds += busy.Seconds();
    }
    Finish(source, lane);
  }
}

void Scheduler::RunPlain(Source& source, int64_t r) {
  const SequenceRequest& request = source.request(r);
  SequenceResult& result = source.result(r);
  int32_t cached = 0;
  const int32_t slot = AcquireSlot(source, r, &cached);
  result.forked = cached > 0;
  PlainTiming timing;
  std::function<bool(int32_t)> on_token;
  if (request.on_tokens) {
    on_token = [&](int32_t token) {
      if (request.on_tokens(std::span<const int32_t>(&token, 1))) return true;
      result.cancelled = true;
      return false;
    };
  }
  try {
    result.tokens = GeneratePlain(target_, request.prompt, PolicyFor(request).sampling,
                                  SessionOptionsFor(request, slot, cached), on_token, &timing);
  } catch (const Error& error) {
    if (!source.TakeFailure(r, error)) throw;
    ReleaseSlot(r);
    return;
  }
  result.steps = static_cast<int64_t>(result.tokens.size());
  // Plain decoding's share of what a session reports: steps, tokens and times.
  result.speculation.steps = result.speculation.plain_steps = result.steps;
  result.speculation.generated = result.steps;
  result.speculation.prefill_seconds = timing.prefill_seconds;
  result.speculation.total_seconds = timing.generation_seconds;
  stats_.target_forwards += result.steps;
  stats_.target_busy_seconds += timing.prefill_seconds + timing.generation_seconds;
  stats_.max_in_flight = 1;
  ReleaseSlot(r);
  source.Done(r);
}

}  // namespace grove
