#include "option_checks.h"

#include <cmath>
#include <string>
#include <string_view>

#include "base/error.h"
#include "base/thread_pool.h"

namespace grove::cli {
namespace {

CLI::Validator ThreadCountFrom(int lo) {
  return CLI::Validator(
      [lo](std::string& text) -> std::string {
        int n = 0;
        if (!CLI::detail::lexical_cast(text, n)) return "'" + text + "' is not a thread count";
        if (n < lo || n > MaxThreads()) {
          return StrCat(n, " is outside ", lo, "..", MaxThreads(), " (",
                        lo == 0 ? "0: all hardware threads; " : "",
                        "at most 4 x the hardware threads)");
        }
        return {};
      },
      StrCat("THREADS in ", lo, "..", MaxThreads()), "ThreadCount");
}

}  // namespace

CLI::Validator ThreadCount() { return ThreadCountFrom(0); }
CLI::Validator PositiveThreadCount() { return ThreadCountFrom(1); }

CLI::Validator FiniteRange(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return "'" + text + "' is not a number";
        if (!std::isfinite(v) || v < lo || v > hi)
          return StrCat(text, " is outside [", lo, ", ", hi, "]");
        return {};
      },
      StrCat("NUMBER in [", lo, ", ", hi, "]"), "FiniteRange");
}

void RefuseEmptyValues(CLI::App& app) {
  // An empty prompt is the model's start of text alone; an empty system prompt is an empty message.
  static constexpr std::string_view kEmptyAllowed[] = {"--prompt", "--system"};
  const CLI::Validator non_empty(
      [](std::string& text) -> std::string {
        return text.empty() ? "an empty value is not allowed (leave the option out for its default)"
                            : std::string();
      },
      /*validator_desc=*/"");
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_type_size() == 0) continue;  // a flag: takes no value
    bool allowed = false;
    for (std::string_view name : kEmptyAllowed)
      allowed |= opt->check_lname(std::string(name.substr(2)));
    if (!allowed) opt->check(non_empty);
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) RefuseEmptyValues(*sub);
}

}  // namespace grove::cli
