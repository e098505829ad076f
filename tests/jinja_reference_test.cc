// grove's Jinja interpreter against Python's Jinja2 (tests/reference/render_chat_template.py, in an
// ImmutableSandboxedEnvironment) on the constructs whose rules are easy to get subtly wrong, each
// rendered both ways byte for byte:
//   - whitespace control: every tag kind (if, for, set, comment, raw, output) with every modifier
//     (`{%-`, `-%}`, `{%+`, `+%}`) between texts of spaces, tabs and newlines in every position,
//     under trim_blocks and lstrip_blocks on and off and keep_trailing_newline;
//   - the loop variable: index, index0, revindex, revindex0, first, last, length, previtem,
//     nextitem, cycle, depth and depth0, in plain, filtered, nested, broken-off and else loops over
//     lists, dicts and strings.
// Where Jinja2 raises (a construct it refuses), grove must raise too.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "jinja/jinja_json.h"
#include "jinja/jinja_render.h"
#include "test_support.h"

namespace grove::jinja {
namespace {

using json = nlohmann::ordered_json;

struct Case {
  std::string source;
  LexOptions options;
  json variables = json::object();
};

struct Outcome {
  bool raised = false;
  std::string text;  // the render, or the error
};

Outcome RenderWithGrove(const Case& c) {
  try {
    ValueDict globals;
    for (const auto& [k, v] : c.variables.items()) globals.Set(k, FromJson(v));
    return {false, Template(c.source, c.options).Render(globals)};
  } catch (const Error& e) {
    return {true, e.what()};
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Jinja2's outcome of every case, or an empty vector when python3 with jinja2 is missing.
std::vector<Outcome> RenderWithJinja2(const std::vector<Case>& cases, const std::string& name) {
  std::vector<Outcome> outcomes;
  if (std::system("python3 -c 'import jinja2' > /dev/null 2>&1") != 0) return outcomes;
  json jobs = json::array();
  for (const Case& c : cases) {
    jobs.push_back({{"source", c.source},
                    {"environment",
                     {{"trim_blocks", c.options.trim_blocks},
                      {"lstrip_blocks", c.options.lstrip_blocks},
                      {"keep_trailing_newline", c.options.keep_trailing_newline}}},
                    {"extra", c.variables}});
  }
  const std::string jobs_path = testing::TempPath(name + ".jobs.json");
  const std::string results_path = testing::TempPath(name + ".results.json");
  std::ofstream(jobs_path) << jobs.dump();
  const std::string cmd = "python3 '" + std::string(GROVE_REFERENCE_DIR) +
                          "/render_chat_template.py' '" + jobs_path + "' '" + results_path + "'";
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << cmd;
    return outcomes;
  }
  for (const json& r : json::parse(ReadFile(results_path))) {
    outcomes.push_back(r.contains("text") ? Outcome{false, r["text"].get<std::string>()}
                                          : Outcome{true, r["raised"].get<std::string>()});
  }
  return outcomes;
}

std::string Shown(const std::string& s) { return json(s).dump(); }

// Renders every case both ways; returns how many Jinja2 rendered (all must agree).
int ExpectSameAsJinja2(const std::vector<Case>& cases, const std::string& name) {
  const std::vector<Outcome> expected = RenderWithJinja2(cases, name);
  if (expected.empty()) return -1;
  EXPECT_EQ(expected.size(), cases.size());
  int rendered = 0, failures = 0;
  for (size_t i = 0; i < cases.size() && i < expected.size(); ++i) {
    const Case& c = cases[i];
    const Outcome got = RenderWithGrove(c);
    rendered += !expected[i].raised;
    const bool same = expected[i].raised ? got.raised : !got.raised && got.text == expected[i].text;
    if (!same && ++failures <= 20) {
      ADD_FAILURE() << Shown(c.source) << " (trim_blocks " << c.options.trim_blocks
                    << ", lstrip_blocks " << c.options.lstrip_blocks << ", keep_trailing_newline "
                    << c.options.keep_trailing_newline << ", " << c.variables.dump()
                    << ")\n  jinja2: " << (expected[i].raised ? "raised " : "")
                    << Shown(expected[i].text) << "\n  grove:  " << (got.raised ? "raised " : "")
                    << Shown(got.text);
    }
  }
  EXPECT_EQ(failures, 0) << "of " << cases.size() << " cases";
  return rendered;
}

// Spaces, tabs and newlines, alone and mixed, for the texts around the tags.
const std::vector<std::string> kFillers = {"",    " ",      "\t",       " \t ", "\n",
                                           "\n ", "\n\t",   " \n",      "\t\n", "\n \t",
                                           "\t ", "\n\n  ", " \t\n\t ", "x \t"};

// A tag kind with placeholders L and R for the modifiers next to its delimiters.
struct TagKind {
  std::string open, close;  // close empty: a tag alone
  std::vector<std::string> modifiers;
};

std::string WithModifiers(std::string tag, const std::string& left, const std::string& right) {
  for (size_t at; (at = tag.find('L')) != std::string::npos;) tag.replace(at, 1, left);
  for (size_t at; (at = tag.find('R')) != std::string::npos;) tag.replace(at, 1, right);
  return tag;
}

TEST(JinjaReference, WhitespaceControlWithSpacesAndTabsAsJinja2) {
  const std::vector<std::string> block = {"", "-", "+"};
  const std::vector<TagKind> kinds = {
      {"{%L if true R%}", "{%L endif R%}", block},
      {"{%L for x in xs R%}{{ x }}", "{%L endfor R%}", block},
      {"{%L set a = 1 R%}", "", block},
      {"{#L a comment R#}", "", block},
      {"{%L raw R%} {{ x }}\t", "{%L endraw R%}", block},
      {"{{L 'v' R}}", "{{L xs | length R}}", {"", "-"}},
  };
  const std::vector<LexOptions> settings = {
      {true, true, false},   {true, false, false}, {false, true, false},
      {false, false, false}, {true, true, true},   {false, false, true},
  };
  std::vector<Case> cases;
  const size_t n = kFillers.size();
  for (const TagKind& kind : kinds) {
    for (const std::string& left : kind.modifiers) {
      for (const std::string& right : kind.modifiers) {
        const std::string open = WithModifiers(kind.open, left, right);
        const std::string close = WithModifiers(kind.close, left, right);
        // Every filler in every position once: position i takes filler (j + 5 i) mod n.
        for (size_t j = 0; j < n; ++j) {
          auto f = [&](size_t i) { return kFillers[(j + 5 * i) % n]; };
          std::string source = "A" + f(0) + open + f(1) + "B" + f(2);
          if (!close.empty()) source += close + f(3) + "C" + f(4);
          for (const LexOptions& options : settings) {
            cases.push_back({source, options, {{"xs", {1, 2}}}});
          }
        }
      }
    }
  }
  const int rendered = ExpectSameAsJinja2(cases, "whitespace");
  if (rendered < 0) GTEST_SKIP() << "python3 with jinja2 not found";
  EXPECT_GT(rendered, static_cast<int>(cases.size()) * 9 / 10);
}

TEST(JinjaReference, LoopVariablesAsJinja2) {
  const std::vector<std::string> templates = {
      "{% for x in xs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/"
      "{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }}|{% endfor %}",
      "{% for x in xs %}[{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }}]"
      "{{ loop.previtem is defined }}{{ loop.nextitem is defined }}{% endfor %}",
      "{% for x in xs %}{{ loop.cycle('a', 'b', 'c') }}{{ loop.cycle(7) }}{% endfor %}",
      "{% for x in xs %}{{ loop.depth }}{{ loop.depth0 }}{% for y in xs %}({{ loop.depth }}"
      "{{ loop.index }}{{ loop.first }}){% endfor %};{{ loop.index }}{{ loop.last }}{% endfor %}",
      "{% for x in xs if x % 2 == 1 %}{{ loop.index }}:{{ x }}:{{ loop.length }}:"
      "{{ loop.revindex }}:{{ loop.last }}:{{ loop.nextitem }} {% else %}none{% endfor %}",
      "{% for x in xs %}{% if loop.index is even %}{% continue %}{% endif %}{{ loop.index0 }}"
      "{{ loop.previtem }}{% if loop.revindex0 == 1 %}{% break %}{% endif %}{% endfor %}",
      "{% for k in d %}{{ loop.index }}{{ k }}{{ loop.last }}{{ loop.previtem }}{% endfor %}",
      "{% for c in s %}{{ loop.revindex }}{{ c }}{{ loop.nextitem }}{% endfor %}",
      "{% for a, b in pairs %}{{ loop.index }}{{ a }}{{ b }}{{ loop.nextitem }}"
      "{{ loop.length }}{% endfor %}",
      "{% for x in xs %}{% set outer = loop %}{% for y in xs %}{{ outer.index }}{{ loop.index }}"
      "{{ outer.last }},{% endfor %}{% endfor %}",
      "{% for x in xs %}{{ loop.index }}{% endfor %}{{ loop is defined }}",
      "{% for x in xs %}{{ loop.index * 10 + loop.revindex }}{{ loop.length - loop.index0 }}"
      "{% if loop.first and loop.last %}only{% endif %}{% endfor %}",
  };
  const std::vector<json> lists = {json::array(), {7}, {1, 2}, {1, 2, 3}, {3, 1, 4, 1, 5}};
  std::vector<Case> cases;
  for (const std::string& source : templates) {
    for (const json& xs : lists) {
      cases.push_back({source,
                       LexOptions{},
                       {{"xs", xs},
                        {"d", {{"b", 1}, {"a", 2}, {"c", 3}}},
                        {"s", "h\xc3\xa9llo"},
                        {"pairs", {{1, 2}, {3, 4}, {5, 6}}}}});
    }
  }
  const int rendered = ExpectSameAsJinja2(cases, "loop");
  if (rendered < 0) GTEST_SKIP() << "python3 with jinja2 not found";
  EXPECT_GT(rendered, static_cast<int>(cases.size()) * 9 / 10);
}

}  // namespace
}  // namespace grove::jinja
