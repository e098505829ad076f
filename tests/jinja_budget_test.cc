// The render's budgets (jinja/jinja_budget.h) on hostile templates: each way a template can build
// gigabytes (`~`, `*`, `+`, upper, replace, join, slicing, format, split, a list of a string's
// characters, list repetition, macro and set-block captures) is refused within a second or so,
// naming the line; so is a render past its deadline, one nested deeper than its stack budget, a
// value nested 50,000 deep (freed without recursion) and JSON input nested 100,000 deep.
#include "jinja/jinja_budget.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/bounded_json.h"
#include "base/error.h"
#include "jinja/chat_template.h"
#include "jinja/jinja_json.h"
#include "jinja/jinja_render.h"

namespace grove::jinja {
namespace {

using Clock = std::chrono::steady_clock;

// The sanitizers make the interpreter 10-15 times slower.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr auto kQuickly = std::chrono::seconds(60);
#else
constexpr auto kQuickly = std::chrono::seconds(5);
#endif

std::string ErrorOf(const std::string& source, const RenderLimits& limits = {}) {
  try {
    Template(source).Render(ValueDict(), limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Runs fn on a thread of its own with a stack of `stack_bytes` (a thread of a server may have less
// stack than a test's main thread).
void OnThreadWithStack(size_t stack_bytes, const std::function<void()>& fn) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, stack_bytes), 0);
  pthread_t thread;
  auto run = [](void* arg) -> void* {
    (*static_cast<const std::function<void()>*>(arg))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, run, const_cast<std::function<void()>*>(&fn)), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

struct Hostile {
  std::string path;      // the growth path, for the failure message
  std::string source;    // would make gigabytes (or take minutes) unbounded
  std::string expected;  // in the error
};

// Each growth path, with pieces under the 16 MiB a value may hold, repeated until the render would
// have made terabytes (the unbounded renderer took minutes or ran out of memory on each), or one
// operation that would make gigabytes at once.
TEST(RenderBudget, EveryWayToGrowIsRefusedQuicklyNamingTheLine) {
  const std::string big = "{% set s = 'x' * 10000000 %}\n";  // 10 MB, under the per-value limit
  const std::string loop = "{% for i in range(100000) %}";
  const std::string made = "bytes of strings and lists";
  const std::vector<Hostile> cases = {
      {"~", big + loop + "{% set t = s ~ 'y' %}{% endfor %}", made},
      {"~ doubling",
       "{% set ns = namespace(s='x') %}{% for i in range(40) %}\n{% set ns.s = ns.s ~ ns.s %}"
       "{% endfor %}",
       "line 2: ~: "},
      {"*", loop + "{% set t = 'x' * 10000000 %}{% endfor %}", made},
      {"+", big + loop + "{% set t = s + 'y' %}{% endfor %}", made},
      {"upper", big + loop + "{% set t = s | upper %}{% endfor %}", made},
      {"str.upper", big + loop + "{% set t = s.upper() %}{% endfor %}", made},
      {"replace", "{{ ('x' * 10000) | replace('x', 'y' * 10000000) }}", "replace: result longer"},
      {"str.replace", "{{ ('x' * 10000).replace('x', 'y' * 10000000) }}", "replace: result longer"},
      {"replace in a loop", big + loop + "{% set t = s | replace('x', 'y') %}{% endfor %}", made},
      {"join", big + loop + "{% set t = [s] | join('') %}{% endfor %}", made},
      {"str.join", "{{ ('x' * 10000000).join(['a'] * 100000) }}", "join: result longer"},
      {"slicing", big + loop + "{% set t = s[1:] %}{% endfor %}", made},
      {"str.format", "{{ ('{0}' * 100000).format('x' * 10000000) }}", "format: result longer"},
      {"%", big + loop + "{% set t = '%s' % s %}{% endfor %}", made},
      {"split", "{{ (',' * 10000000).split(',') | length }}", "split: the result would make"},
      {"a string's characters", "{{ ('x' * 10000000) | list | length }}",
       "iterating a string: the result would make"},
      {"for over a string", "{% for c in 'x' * 10000000 %}{% break %}{% endfor %}",
       "iterating a string"},
      {"list repetition", "{{ (['x' * 1000000] * 1000) | length }}",
       "repetition: result longer than"},
      {"list +",
       "{% set ns = namespace(l=[]) %}" + loop +
           "{% set ns.l = ns.l + ['x' * 100000] %}{% endfor %}",
       made},
      {"macro capture",
       "{% macro m() %}{{ 'x' * 10000000 }}{% endmacro %}" + loop + "{% set t = m() %}{% endfor %}",
       made},
      {"set block", loop + "{% set t %}{{ 'x' * 10000000 }}{% endset %}{% endfor %}", made},
      // Only the capture makes bytes here: the text is the template's own.
      {"set block of text",
       loop + "{% set t %}" + std::string(100000, 'x') + "{% endset %}{% endfor %}", made},
      {"repr of shared items",
       "{% set ns = namespace(x=['xxxxxxxx']) %}{% for i in range(40) %}"
       "{% set ns.x = [ns.x, ns.x] %}{% endfor %}\n{{ ns.x }}",
       "repr: result longer than"},
      {"tojson of shared items",
       "{% set ns = namespace(x=['xxxxxxxx']) %}{% for i in range(40) %}"
       "{% set ns.x = [ns.x, ns.x] %}{% endfor %}\n{{ ns.x | tojson }}",
       "tojson: result longer than"},
  };
  // A budget of 32 MiB, not the default 512: the same checks with a sixteenth of the work (the
  // unoptimized sanitized build takes a minute a case at the default); the limits of one value
  // (16 MiB) are the defaults.
  RenderLimits limits;
  limits.max_bytes_made = size_t{32} << 20;
  for (const Hostile& c : cases) {
    SCOPED_TRACE(c.path);
    const auto start = Clock::now();
    const std::string error = ErrorOf(c.source, limits);
    EXPECT_NE(error.find(c.expected), std::string::npos) << error;
    EXPECT_EQ(error.rfind("chat template line ", 0), 0u) << error;
    EXPECT_LT(Clock::now() - start, kQuickly);
  }
}

// Every operation that would make one value longer than the output limit says so the same way,
// with the limit in bytes ("string too long" named neither the operator nor the limit).
TEST(RenderBudget, OneValuesLimitIsNamedTheSameWayByEveryOperation) {
  const std::string big = "{% set s = 'x' * 10000000 %}";
  for (const auto& [source, op] : std::vector<std::pair<std::string, std::string>>{
           {"{{ 'x' * 20000000 }}", "repetition"},
           {big + "{{ s + s }}", "+"},
           {big + "{{ s ~ s }}", "~"},
           {big + "{{ [s, s] | join }}", "join"},
           {big + "{{ s | replace('x', 'yy') }}", "replace"},
           {big + "{{ ('{0}{0}').format(s) }}", "format"},
           {big + "{{ '%s%s' % (s, s) }}", "format"},
       }) {
    EXPECT_NE(ErrorOf(source).find(op + ": result longer than 16777216 bytes"), std::string::npos)
        << source << ": " << ErrorOf(source);
  }
}

// A list literal of 2,000 names of a 10 MB string would copy 20 GB (each name's string is a copy).
TEST(RenderBudget, AListOfCopiesOfALongStringIsCharged) {
  std::string items;
  for (int i = 0; i < 2000; ++i) items += i ? ", s" : "s";
  EXPECT_NE(ErrorOf("{% set s = 'x' * 10000000 %}{{ [" + items + "] | length }}")
                .find("bytes of strings and lists"),
            std::string::npos);
}

// The budget is a number of bytes: a render that makes more than it is refused, one that makes
// less is not.
TEST(RenderBudget, TheByteBudgetIsWhatItSays) {
  RenderLimits limits;
  limits.max_bytes_made = 10'000'000;
  const std::string source = "{% for i in range(N) %}{% set t = 'x' * 1000000 %}{% endfor %}ok";
  EXPECT_EQ(Template(std::string(source).replace(source.find('N'), 1, "5")).Render({}, limits),
            "ok");
  EXPECT_NE(ErrorOf(std::string(source).replace(source.find('N'), 1, "20"), limits)
                .find("10000000 bytes of strings and lists"),
            std::string::npos);
}

// Work neither budget counts (a search of a list of 100,000 items at every step: 9e10 comparisons)
// stops at the deadline, checked where steps are counted; so does a comparison of values that
// share their items (2^26 visits inside one operation, seconds), checked in every level of the
// walk; and so
// do a few slow steps (a scan of 10 MB each, 2,000 of them: some 15 s), the clock being read
// every 256 steps, not every million.
TEST(RenderBudget, TheDeadlineStopsWhatTheBudgetsDoNotCount) {
  RenderLimits limits;
  limits.max_seconds = 0.5;
  limits.max_bytes_made = size_t{1} << 60;  // the deadline alone
  const std::vector<std::string> slow = {
      // No comparison: a walk would read the clock too.
      "{% set s = 'x' * 10000000 %}{% for i in range(2000) %}{% if s | length %}{% endif %}"
      "{% endfor %}",
      "{% set xs = range(100000) | list %}{% for i in range(900000) %}{% if -1 in xs %}{% endif %}"
      "{% endfor %}",
      "{% set a = namespace(x=[1]) %}{% set b = namespace(x=[1]) %}{% for i in range(26) %}"
      "{% set a.x = [a.x, a.x] %}{% set b.x = [b.x, b.x] %}{% endfor %}{{ a.x == b.x }}",
  };
  for (const std::string& source : slow) {
    const auto start = Clock::now();
    const std::string error = ErrorOf(source, limits);
    EXPECT_NE(error.find("the render took longer than 0.5 s"), std::string::npos) << error;
    EXPECT_LT(Clock::now() - start, kQuickly);
  }
}

// A macro that calls itself 62 times, each call inside an expression nested 60 levels deep, takes
// 2.5 MiB of stack in a release build (more under the sanitizers): refused at the stack budget, on
// a thread with stack to spare beyond the budget but not for the whole recursion.
TEST(RenderBudget, DeepEvaluationIsRefusedBeforeTheStackRunsOut) {
  std::string nested = "(f(n + 1) | int if n < 62 else 1)";
  for (int i = 0; i < 60; ++i) nested = "-(" + nested + ")";
  const std::string source = "{% macro f(n) %}{{ " + nested + " }}{% endmacro %}\n{{ f(0) }}";
  std::string error;
  OnThreadWithStack(kDefaultRenderStackBytes + (size_t{1} << 20), [&] { error = ErrorOf(source); });
  EXPECT_EQ(error.rfind("chat template line 1: nested too deeply (evaluation took more than ", 0),
            0u)
      << error;
}

// A list nested 50,000 deep (`[ns.x]` in a loop) is freed without recursion, on a thread whose
// stack a recursive free of it would overflow many times over.
TEST(RenderBudget, AValueNestedFiftyThousandDeepIsFreedWithoutRecursion) {
  std::string out;
  OnThreadWithStack(size_t{256} << 10, [&] {
    out = Template(
              "{% set ns = namespace(x=[]) %}{% for i in range(50000) %}{% set ns.x = [ns.x] %}"
              "{% endfor %}done")
              .Render({});
  });
  EXPECT_EQ(out, "done");
}

// JSON given to a template (messages, tools, template arguments) nested 100,000 deep is refused by
// the input check before any walk recurses into it, naming the field; the conversion refuses it
// too when called alone.
// Arrays nested `depth` deep around "x", built without recursion (nlohmann's copies recurse, so
// the tests move these, never copy them).
nlohmann::ordered_json Nested(int depth) {
  nlohmann::ordered_json j = "x";
  for (int i = 0; i < depth; ++i) {
    nlohmann::ordered_json outer = nlohmann::ordered_json::array();
    outer.push_back(std::move(j));
    j = std::move(outer);
  }
  return j;
}

nlohmann::ordered_json UserMessages(nlohmann::ordered_json content) {
  nlohmann::ordered_json message = {{"role", "user"}};
  message["content"] = std::move(content);
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back(std::move(message));
  return messages;
}

TEST(RenderBudget, JsonInputNestedTooDeepIsRefusedNamingTheField) {
  ChatTemplate t("{% for m in messages %}{{ m.content }}{% endfor %}");
  ChatTemplateInput input;
  input.messages = UserMessages(Nested(100000));
  try {
    t.Apply(input);
    ADD_FAILURE() << "rendered";
  } catch (const Error& e) {
    const std::string error = e.what();
    EXPECT_EQ(error.rfind("messages[0].content[0][0]", 0), 0u) << error;
    EXPECT_NE(error.find("]: nesting deeper than 128 levels"), std::string::npos) << error;
  }
  input.messages = UserMessages("hi");
  input.tools = Nested(100000);
  EXPECT_THROW(t.Apply(input), Error);
  EXPECT_THROW(FromJson(input.tools), Error);
  // The conversion alone: arrays and objects count alike, and the limit is exact.
  for (const char* kind : {"array", "object"}) {
    SCOPED_TRACE(kind);
    auto nested = [&](int depth) {
      nlohmann::ordered_json j = 1;
      for (int i = 0; i < depth; ++i) {
        nlohmann::ordered_json outer =
            *kind == 'a' ? nlohmann::ordered_json::array() : nlohmann::ordered_json::object();
        if (*kind == 'a') {
          outer.push_back(std::move(j));
        } else {
          outer["k"] = std::move(j);
        }
        j = std::move(outer);
      }
      return j;
    };
    EXPECT_NO_THROW(FromJson(nested(kMaxJsonDepth)));
    EXPECT_THROW(FromJson(nested(kMaxJsonDepth + 1)), Error);
    EXPECT_THROW(FromJson(nested(100000)), Error);
  }
  // A message's content nested as deep as a bounded parse of a request allows (the body, its
  // messages and the message are three of the 128 levels) passes.
  input.tools = nullptr;
  input.messages = UserMessages(Nested(kMaxJsonDepth - 3));
  EXPECT_EQ(ChatTemplate("{{ messages | length }}").Apply(input), "1");
}

}  // namespace
}  // namespace grove::jinja
