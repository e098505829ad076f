// The Jinja interpreter construct by construct (Python's Jinja2 gives the expected texts), its
// errors with template lines, and its limits on hostile templates.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "jinja/chat_template.h"
#include "jinja/jinja_json.h"
#include "jinja/jinja_render.h"

namespace grove::jinja {
namespace {

std::string Render(std::string_view source,
                   const nlohmann::ordered_json& vars = nlohmann::ordered_json::object(),
                   const RenderLimits& limits = {}) {
  ValueDict globals;
  for (const auto& [k, v] : vars.items()) globals.Set(k, FromJson(v));
  return Template(source).Render(globals, limits);
}

std::string ErrorOf(std::string_view source,
                    const nlohmann::ordered_json& vars = nlohmann::ordered_json::object(),
                    const RenderLimits& limits = {}) {
  try {
    Render(source, vars, limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Jinja, PrintsValuesAsPython) {
  EXPECT_EQ(Render("{{ 1.0 }} {{ 2.5e-7 }} {{ 1e16 }} {{ 3 / 2 }} {{ 7 // 2 }} {{ -7 % 3 }}"),
            "1.0 2.5e-07 1e+16 1.5 3 2");
  EXPECT_EQ(Render("{{ none }} {{ true }} {{ False }} {{ [1, 'a', none] }} {{ {'k': \"it's\"} }}"),
            "None True False [1, 'a', None] {'k': \"it's\"}");
  EXPECT_EQ(Render("{{ undefined_name }}|{{ 'a' ~ 1 ~ none }}"), "|a1None");
  EXPECT_EQ(Render("{{ (1, 2) }} {{ ('a',) }} {{ {'b': 1} | items | list }} {{ 0.1 + 0.2 }}"),
            "(1, 2) ('a',) [('b', 1)] 0.30000000000000004");
}

// String literals decode as Python's unicode-escape does: one-character escapes, \x, \u and \U
// code points as UTF-8 (capped at U+10FFFF), a backslash-newline dropped, anything else (an
// unknown escape, too few hex digits) kept as written.
// A namespace that contains itself (the only value a sandboxed template can make contain itself)
// prints as Python's repr does ("<Namespace {...}>"), compares equal to itself, and is refused by
// tojson; a value nested deeper than the recursive walks allow is refused, not a stack overflow
// (the fuzzer's input: a namespace set as its own attribute, then printed). Python's output,
// checked with python3-jinja2's ImmutableSandboxedEnvironment.
TEST(Jinja, AValueThatContainsItselfPrintsAsPythonAndNeverOverflows) {
  EXPECT_EQ(Render("{% set ns = namespace(a=1) %}{% set ns.n = ns %}{{ ns }}|"
                   "{% set m = namespace() %}{% set m.l = [m, 2] %}{{ m }}|{{ [m] == [m] }}"),
            "<Namespace {'a': 1, 'n': <Namespace {...}>}>|<Namespace {'l': [<Namespace {...}>, "
            "2]}>|True");
  EXPECT_NE(ErrorOf("{% set m = namespace() %}{% set m.l = [m] %}{{ m.l | tojson }}"),
            "(no error)");
  // Nested 300 deep without a cycle: a limit for every walk, not a crash.
  const std::string deep =
      "{% set ns = namespace(v=[]) %}{% for i in range(300) %}{% set ns.v = [ns.v] %}"
      "{% endfor %}";
  for (const char* walk :
       {"{{ ns.v }}", "{{ ns.v | tojson }}", "{{ ns.v == [ns.v] }}", "{{ ns.v < [ns.v] }}"}) {
    SCOPED_TRACE(walk);
    EXPECT_NE(ErrorOf(deep + walk).find("nested more than 256 deep"), std::string::npos)
        << ErrorOf(deep + walk);
  }
}

TEST(Jinja, StringLiteralsDecodeTheirEscapes) {
  EXPECT_EQ(Render(R"({{ "a\n\t\r\\\'\"\0b" }})"), std::string("a\n\t\r\\'\"\0b", 9));
  EXPECT_EQ(Render(R"({{ '\x41\u00e9\u20ac\U0001F600' }})"),
            "A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  EXPECT_EQ(Render(R"({{ '\U7FFFFFFF' }})"), "\xf4\x8f\xbf\xbf");
  EXPECT_EQ(Render("{{ 'a\\\nb' }}"), "ab");
  EXPECT_EQ(Render(R"({{ '\q \x4 \u12' }})"), R"(\q \x4 \u12)");
}

// A dict key is stored as text; an integer key as '\x02' and its digits. A string that starts with
// that byte (or with '\x01', the escape) stays a string and a different key from the integer, from
// a template literal or from JSON data (the fuzzer found a string key read back as an integer).
TEST(Jinja, DictKeysKeepTheirKindWhateverTheyStartWith) {
  const std::string literal = R"({% set d = {'\x027': 1, 7: 2, '\x01x': 3, '\x01\x027': 4} %})";
  EXPECT_EQ(Render(literal + "{{ d | length }}"), "4");
  EXPECT_EQ(Render(literal + "{% for k, v in d | items %}{{ k is string }}{{ v }};{% endfor %}"),
            "True1;False2;True3;True4;");
  EXPECT_EQ(Render(literal + R"({{ d['\x027'] }}{{ d[7] }}{{ d['\x01x'] }}{{ d['\x01\x027'] }})"),
            "1234");
  EXPECT_EQ(Render(literal + "{% for k in d %}{{ k | length if k is string else k }},{% endfor %}"),
            "2,7,2,3,");
  const nlohmann::ordered_json data = {{"d",
                                        {{"\x02"
                                          "7",
                                          1},
                                         {"\x01"
                                          "a",
                                          2}}}};
  EXPECT_EQ(Render(R"({{ d['\x027'] }}{{ d['\x01a'] }}{{ d[7] is defined }})", data), "12False");
  EXPECT_EQ(Render(R"({{ '\x027' in d }}{{ 7 in d }}{{ d | tojson }})", data),
            R"(TrueFalse{"\u00027": 1, "\u0001a": 2})");
}

// Template integers are 64-bit (Python's are unbounded): a result that does not fit is an error,
// never a wrapped value or a hardware trap; integers never pass through a double; counts that
// cannot grow (an empty repetition, a power of 1) return at once; a stride past the end stops.
TEST(Jinja, IntegersThatDoNotFitAreErrorsNeverWrappedValues) {
  const std::string min = "(-9223372036854775807 - 1)";
  EXPECT_EQ(Render("{{ 9223372036854775806 + 1 }} {{ " + min + " % -1 }} {{ 2 ** 62 }}"),
            "9223372036854775807 0 4611686018427387904");
  for (const std::string& bad : std::vector<std::string>{
           std::string("9223372036854775807 + 1"), min + " - 1", "4611686018427387904 * 2",
           min + " // -1", "-" + min, "2 ** 63", "2 ** 100", "(-3) ** 41", "[1e300] | sum | int"}) {
    EXPECT_NE(ErrorOf("{{ " + bad + " }}").find("does not fit in"), std::string::npos) << bad;
  }
  EXPECT_EQ(Render("{{ 1 ** 1000000000000000 }} {{ (-1) ** 1000000000000001 }} {{ 0 ** 0 }}"),
            "1 -1 1");
  EXPECT_EQ(Render("{{ [] * 888888888888888873 }}|{{ '' * 888888888888888873 }}|"), "[]||");
  EXPECT_EQ(
      Render("{{ [1, 2, 3, 4, 5][3::9223372036854775807] }} {{ 'abcde'[4::4611686018427387904] }}"),
      "[4] e");
  EXPECT_EQ(Render("{{ range(9223372036854775000, 9223372036854775807, 1000) | list }}"),
            "[9223372036854775000]");
  EXPECT_EQ(Render("{{ range(-9223372036854775807, 9223372036854775807, 4611686018427387904) | "
                   "list }}"),
            "[-9223372036854775807, -4611686018427387903, 1, 4611686018427387905]");
  EXPECT_NE(ErrorOf("{{ range(-9223372036854775807, 9223372036854775807) }}").find("step limit"),
            std::string::npos);
  // Widths checked by division: 4 lines times 2^62 wraps to 0 in 64 bits.
  EXPECT_NE(ErrorOf("{{ 'a\\nb\\nc\\nd' | indent(4611686018427387904) }}").find("longer than"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{{ [1] | tojson(indent=4611686018427387904) }}").find("longer than"),
            std::string::npos);
  EXPECT_EQ(Render("{{ [9007199254740993, 0] | sum }} {{ (0 - 9007199254740993) | abs }} "
                   "{{ '%d' % 9007199254740993 }}"),
            "9007199254740993 9007199254740993 9007199254740993");
}

TEST(Jinja, ControlFlowAndLoopVariables) {
  EXPECT_EQ(
      Render("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}"
             "{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }};{% endfor %}",
             {{"xs", {"a", "b"}}}),
      "10TrueFalse2b;21FalseTrue2a;");
  EXPECT_EQ(Render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(Render("{% for x in range(10) if x is odd %}{% if x > 6 %}{% break %}{% endif %}"
                   "{{ x }}{% endfor %}"),
            "135");
  EXPECT_EQ(Render("{% if a %}1{% elif b %}2{% else %}3{% endif %}", {{"a", false}, {"b", 1}}),
            "2");
  EXPECT_EQ(Render("{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}",
                   nlohmann::ordered_json::parse(R"({"d": {"z": 1, "a": 2}})")),
            "z=1,a=2,");
}

TEST(Jinja, ScopesNamespacesAndMacros) {
  EXPECT_EQ(Render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  // Each iteration starts from a fresh scope, as in Jinja2.
  EXPECT_EQ(Render("{% for i in range(3) %}{% if i == 0 %}{% set x = 'a' %}{% endif %}[{{ x }}]"
                   "{% endfor %}"),
            "[a][][]");
  EXPECT_EQ(Render("{% set ns = namespace(n=0) %}{% for i in [1, 2] %}{% set ns.n = ns.n + i %}"
                   "{% endfor %}{{ ns.n }}"),
            "3");
  EXPECT_EQ(Render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('A') }} {{ greet('B', punct='?') }}"),
            "Hi A! Hi B?");
  EXPECT_EQ(
      Render("{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}in{% endcall %}"),
      "[in]");
  EXPECT_EQ(Render("{% set block %}  x  {% endset %}{{ block | trim }}"), "x");
  EXPECT_EQ(Render("{% filter upper %}abc{% endfilter %}"), "ABC");
  EXPECT_EQ(Render("{% generation %}kept{% endgeneration %}"), "kept");
}

TEST(Jinja, WhitespaceControlAsHuggingFace) {
  // trim_blocks drops the newline after a tag; lstrip_blocks the indentation before one.
  EXPECT_EQ(Render("{% if true %}\n  a\n  {% endif %}\nb"), "  a\nb");
  EXPECT_EQ(Render("x  {{- ' y ' -}}  z"), "x y z");
  EXPECT_EQ(Render("a\n{#- comment -#}\nb"), "ab");
  EXPECT_EQ(Render("a\n    {%+ if true %}b{% endif %}"), "a\n    b");
  EXPECT_EQ(Render("line\n"), "line");  // keep_trailing_newline is off
  EXPECT_EQ(Render("{% raw %}{{ not parsed }}{% endraw %}"), "{{ not parsed }}");
}

TEST(Jinja, FiltersTestsAndMethods) {
  nlohmann::ordered_json vars = nlohmann::ordered_json::parse(R"({
    "msgs": [{"role": "system", "content": " s "}, {"role": "user", "content": "u"},
             {"role": "user", "content": "v"}],
    "obj": {"name": "f", "args": {"x": "é", "n": [1, 2.5, true, null]}}})");
  EXPECT_EQ(Render("{{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | "
                   "join(',') }}",
                   vars),
            "u,v");
  EXPECT_EQ(Render("{{ msgs | rejectattr('role', 'eq', 'user') | list | length }}", vars), "1");
  EXPECT_EQ(Render("{{ obj | tojson }}", vars),
            R"({"name": "f", "args": {"x": "é", "n": [1, 2.5, true, null]}})");
  EXPECT_EQ(Render("{{ obj.args | tojson(indent=2) }}", vars),
            "{\n  \"x\": \"é\",\n  \"n\": [\n    1,\n    2.5,\n    true,\n    null\n  ]\n}");
  EXPECT_EQ(
      Render("{{ msgs[0].content | trim }}|{{ msgs[0]['content'].strip() }}|{{ msgs[-1].content }}",
             vars),
      "s|s|v");
  EXPECT_EQ(
      Render("{{ 'a,b,c'.split(',')[::-1] | join }} {{ 'abcdef'[1:4] }} {{ 'x'.upper() }}"
             " {{ 'Hello'.startswith('He') }} {{ 'a b'.title() }} {{ 'ab'.replace('a', 'z') }}"),
      "cba bcd X True A B zb");
  EXPECT_EQ(Render("{{ obj.missing is defined }} {{ obj.name is string }} {{ obj is mapping }}"
                   " {{ none is none }} {{ 3 is number }} {{ 'a' in 'cat' }} {{ 'name' in obj }}",
                   vars),
            "False True True True True True True");
  EXPECT_EQ(
      Render("{{ obj.get('name') }} {{ obj.get('zz', 'dflt') }} {{ x | default('d') }}", vars),
      "f dflt d");
  EXPECT_EQ(Render("{{ [3, 1, 2] | sort | first }} {{ [1, 2] | last }} {{ 'A' | lower }}"
                   " {{ ['a', 'A', 'b'] | unique | list }} {{ '12' | int + 1 }} {{ -2 | abs }}"),
            "1 2 a ['a', 'b'] 13 2");
  EXPECT_EQ(Render("{{ 'a\nb' | indent(2) }}|{{ {'b': 1, 'a': 2} | dictsort }}"),
            "a\n  b|[('a', 2), ('b', 1)]");
  EXPECT_EQ(Render("{{ '{}-{}'.format(1, 'x') }} {{ '%s!' | format('hi') }}"), "1-x hi!");
}

TEST(Jinja, ErrorsNameTheConstructAndLine) {
  EXPECT_EQ(ErrorOf("a\n{{ x | wordwrap }}"),
            "chat template line 2: unsupported filter 'wordwrap'");
  EXPECT_EQ(ErrorOf("\n\n{% include 'x' %}"), "chat template line 3: unsupported tag 'include'");
  EXPECT_EQ(ErrorOf("{% if x %}"),
            "chat template line 1: expected 'endif' to close 'if' of line 1, got end of template");
  EXPECT_EQ(ErrorOf("{{ x is wibble }}"), "chat template line 1: unsupported test 'wibble'");
  EXPECT_EQ(ErrorOf("{{ 'a'.zfill(3) }}"), "chat template line 1: unsupported method 'str.zfill'");
  EXPECT_NE(ErrorOf("{{ 'a' + 1 }}").find("line 1"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ a.b.c }}").find("'a' is undefined"), std::string::npos);
}

TEST(Jinja, RaiseExceptionCarriesTheTemplatesMessage) {
  ChatTemplate t(
      "{% if messages[0].role != 'user' %}\n{{ raise_exception('Roles must alternate') }}"
      "{% endif %}");
  ChatTemplateInput input;
  input.messages = nlohmann::ordered_json::parse(R"([{"role": "assistant", "content": "x"}])");
  try {
    t.Apply(input);
    FAIL() << "no error";
  } catch (const TemplateRaised& e) {
    EXPECT_EQ(std::string(e.what()), "chat template line 2: Roles must alternate");
  }
}

TEST(Jinja, LimitsStopHostileTemplatesQuickly) {
  auto start = std::chrono::steady_clock::now();
  EXPECT_NE(ErrorOf("{% for i in range(1000000000) %}x{% endfor %}").find("step limit"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{% for i in range(3000) %}{% for j in range(3000) %}{% endfor %}{% endfor %}")
                .find("steps"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("nested more than"),
      std::string::npos);
  RenderLimits small;
  small.max_output_bytes = 1000;
  EXPECT_NE(ErrorOf("{% for i in range(100) %}{{ 'x' * 50 }}{% endfor %}", {}, small)
                .find("output longer"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{{ 'x' * 100000000000 }}").find("repetition"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}")
                .find("nesting deeper"),
            std::string::npos);
  // A guard against a limit set too high, not a benchmark: about 1.5 s in a release build; the
  // sanitizers make the interpreter 10-15x slower (23 s once on the CI machine).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  constexpr auto kBound = std::chrono::seconds(120);
#else
  constexpr auto kBound = std::chrono::seconds(20);
#endif
  EXPECT_LT(std::chrono::steady_clock::now() - start, kBound);
}

TEST(ChatTemplate, RendersHuggingFaceGlobals) {
  ChatTemplate t(
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
      "{% if tools is not none %}T{{ tools | length }}{% endif %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}{{ strftime_now('%d %b %Y') }}"
      "{% if enable_thinking is defined and not enable_thinking %}/no_think{% endif %}");
  ChatTemplateInput input;
  input.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  input.bos_token = "<s>";
  std::tm now{};
  now.tm_year = 124;
  now.tm_mon = 6;
  now.tm_mday = 26;
  input.now = now;
  EXPECT_EQ(t.Apply(input), "<s><user>hi<assistant>26 Jul 2024");
  input.add_generation_prompt = false;
  input.tools = nlohmann::ordered_json::array({{{"type", "function"}}});
  input.extra = {{"enable_thinking", false}};
  EXPECT_EQ(t.Apply(input), "<s><user>hiT126 Jul 2024/no_think");
}

TEST(ChatTemplate, RejectsBadMessages) {
  ChatTemplate t("{% for m in messages %}{{ m.content }}{% endfor %}");
  ChatTemplateInput input;
  input.messages = nlohmann::ordered_json::parse(R"([{"role": "robot", "content": "x"}])");
  try {
    t.Apply(input);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("messages[0].role: unknown role 'robot'"),
              std::string::npos);
  }
  input.messages =
      nlohmann::ordered_json::array({{{"role", "user"}, {"content", "bad \xff\xfe utf-8"}}});
  try {
    t.Apply(input);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "messages[0].content: invalid UTF-8");
  }
  input.messages = nlohmann::ordered_json::array({{{"content", "no role"}}});
  EXPECT_THROW(t.Apply(input), Error);
}

}  // namespace
}  // namespace grove::jinja
