#include "speculation_report.h"

#include <cstdio>

#include "speculate/auto_planner.h"

namespace grove::cli {
namespace {

std::string Percent(const char* name, double part, double total) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s %.0f%%", name, 100.0 * part / total);
  return buf;
}

}  // namespace

std::string FormatStepSplit(const StepTimes& t) {
  const double total = std::max(t.total(), 1e-12);
  std::string out;
  for (const StepPart& p : kStepParts)
    out += (out.empty() ? "" : " | ") + Percent(p.label, t.*p.seconds, total);
  return out;
}

std::string FormatAcceptanceByDepth(const SpeculationStats& s) {
  std::string out;
  const std::vector<double> by_depth = s.acceptance_by_depth();
  for (std::size_t d = 0; d < by_depth.size(); ++d) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), " d%zu %.2f", d + 1, by_depth[d]);
    out += buf;
  }
  return out.empty() ? " (no tree verified)" : out;
}

std::string FormatPlannerChoice(const SpeculativeSession& session) {
  const AutoPlanner* planner = session.planner();
  if (planner == nullptr) return "";
  const SizeDepthChoice& c = planner->choice();
  char buf[256];
  if (c.size == 1) {
    std::snprintf(buf, sizeof(buf), "auto: plain decoding (no tree predicted to beat it)");
  } else {
    std::snprintf(buf, sizeof(buf),
                  "auto: tree of %d tokens, depth %d, predicted %.2f tokens/step, %.2fx", c.size,
                  c.depth, c.expected_tokens, c.speedup);
  }
  std::string out = buf;
  std::snprintf(buf, sizeof(buf), " | t(1) %.3f ms, draft %.3f ms/level | p =",
                1e3 * planner->verify_cost()->Seconds(1) * planner->verify_cost_scale(),
                1e3 * planner->draft_seconds_per_level());
  out += buf;
  for (std::size_t k = 0; k < 4 && k < planner->acceptance().size(); ++k) {
    std::snprintf(buf, sizeof(buf), " %.2f", planner->acceptance()[k]);
    out += buf;
  }
  return out;
}

std::string FormatMixture(const std::vector<MixtureMemberStats>& members) {
  std::string text = "mixture:";
  for (std::size_t i = 0; i < members.size(); ++i) {
    const MixtureMemberStats& m = members[i];
    char part[320];
    std::snprintf(part, sizeof(part),
                  "%s %s proposed %lld nodes (%lld accepted), weight %.2f (first choice right "
                  "%.0f%% of %lld), in %lld steps, skipped %lld, %.3f ms drafting",
                  i ? " |" : "", m.name.c_str(), static_cast<long long>(m.nodes),
                  static_cast<long long>(m.accepted_nodes), m.weight,
                  m.first_choices ? 100.0 * m.right / m.first_choices : 0.0,
                  static_cast<long long>(m.first_choices), static_cast<long long>(m.steps),
                  static_cast<long long>(m.skipped), 1e3 * m.expand_seconds);
    text += part;
  }
  return text;
}

}  // namespace grove::cli
