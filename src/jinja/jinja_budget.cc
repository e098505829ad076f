#include "jinja/jinja_budget.h"

#include "jinja/jinja_value.h"

namespace grove::jinja {

#ifdef NDEBUG
const double kDefaultRenderSeconds = 10;
const size_t kDefaultRenderStackBytes = size_t{1} << 20;
#else
const double kDefaultRenderSeconds = 120;
const size_t kDefaultRenderStackBytes = size_t{4} << 20;
#endif

thread_local RenderBudget* RenderBudget::current_ = nullptr;

RenderBudget::RenderBudget(const RenderLimits& limits)
    : limits_(limits),
      deadline_(std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(limits.max_seconds))),
      outer_(current_) {
  current_ = this;
}

RenderBudget::~RenderBudget() { current_ = outer_; }

void RenderBudget::BudgetPassed() {
  made_ = limits_.max_bytes_made;
  ValueFail("the render made more than ", limits_.max_bytes_made,
            " bytes of strings and lists (a template that grows without end?)");
}

void RenderBudget::CheckDeadline() const {
  if (std::chrono::steady_clock::now() > deadline_) {
    ValueFail("the render took longer than ", limits_.max_seconds, " s");
  }
}

void CheckRoom(size_t bytes, std::string_view what) {
  const RenderBudget* budget = RenderBudget::Current();
  if (budget != nullptr && bytes > budget->room()) {
    ValueFail(what, ": the result would make the render pass its ", budget->limits().max_bytes_made,
              " bytes of strings and lists");
  }
}

void CheckStringRoom(size_t bytes, std::string_view what) {
  const RenderBudget* budget = RenderBudget::Current();
  if (budget != nullptr && bytes > budget->limits().max_output_bytes) {
    ValueFail(what, ": result longer than ", budget->limits().max_output_bytes, " bytes");
  }
  CheckRoom(bytes, what);
}

}  // namespace grove::jinja
