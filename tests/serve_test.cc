// The server's request layer: OpenAI error objects, chat templates of the common families, stop
// strings over streamed pieces (against a whole-text reference over every split), and the checks
// of a completion request's fields, ranges included at both ends; the traffic record's corpus files
// and its failures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "chat/chat_template.h"
#include "chat/reasoning_splitter.h"
#include "chat/stop_matcher.h"
#include "serve/api_error.h"
#include "serve/api_request.h"
#include "serve/traffic_record.h"
#include "test_support.h"
#include "train/corpus_files.h"

namespace grove::serve {
namespace {

using nlohmann::json;
// The chat text the server uses lives a layer below it (src/chat/).
using chat::ChatMessage;
using chat::ChatMessagesError;
using chat::ChatStopStrings;
using chat::ChatTemplate;
using chat::ChatTemplateName;
using chat::DetectChatTemplate;
using chat::ParseReasoningFormat;
using chat::PromptOpensThinking;
using chat::ReasoningFormat;
using chat::ReasoningSplitter;
using chat::RenderChat;
using chat::StopMatcher;

// ---------------------------------------------------------------------------------------------
// ApiError

TEST(ServeApiError, ToJsonHasOpenAisShape) {
  ApiError error(400, "max_tokens must be an integer from 1 to 4096, got 0",
                 "invalid_request_error", "max_tokens");
  EXPECT_EQ(error.status(), 400);
  EXPECT_EQ(error.ToJson(), json::parse(R"({"error": {
      "message": "max_tokens must be an integer from 1 to 4096, got 0",
      "type": "invalid_request_error", "param": "max_tokens", "code": null}})"));
}

TEST(ServeApiError, EmptyParamIsNullAndTypeDefaultsToInvalidRequest) {
  ApiError error(404, "model 'x' not found", "not_found_error");
  json j = error.ToJson();
  EXPECT_EQ(j["error"]["type"], "not_found_error");
  ASSERT_TRUE(j["error"].contains("param"));
  EXPECT_TRUE(j["error"]["param"].is_null());
  ASSERT_TRUE(j["error"].contains("code"));
  EXPECT_TRUE(j["error"]["code"].is_null());
  EXPECT_EQ(j.size(), 1u);
  EXPECT_EQ(j["error"].size(), 4u);

  ApiError plain(400, "bad");
  EXPECT_EQ(plain.type(), "invalid_request_error");
  EXPECT_EQ(plain.param(), "");
  EXPECT_STREQ(plain.what(), "bad");
}

// ---------------------------------------------------------------------------------------------
// Chat templates

// Shortened from the templates GGUF files carry.
constexpr const char* kLlama3Jinja =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim "
    "+ '<|eot_id|>' %}{{ content }}{% endfor %}";
constexpr const char* kChatMlJinja =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] "
    "+ '<|im_end|>' + '\n'}}{% endfor %}";
constexpr const char* kLlama2Jinja =
    "{% for message in messages %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + "
    "message['content'] + ' [/INST]' }}{% endif %}{% endfor %}";

TEST(ServeChatTemplate, DetectsFamiliesFromMarkers) {
  EXPECT_EQ(DetectChatTemplate(kLlama3Jinja), ChatTemplate::kLlama3);
  EXPECT_EQ(DetectChatTemplate(kChatMlJinja), ChatTemplate::kChatMl);
  EXPECT_EQ(DetectChatTemplate(kLlama2Jinja), ChatTemplate::kLlama2);
  EXPECT_EQ(DetectChatTemplate(""), ChatTemplate::kPlain);
  EXPECT_EQ(DetectChatTemplate("{{ messages[0]['content'] }}"), ChatTemplate::kPlain);
}

TEST(ServeChatTemplate, NamesFamilies) {
  EXPECT_EQ(ChatTemplateName(ChatTemplate::kPlain), "plain");
  EXPECT_EQ(ChatTemplateName(ChatTemplate::kLlama3), "llama-3");
  EXPECT_EQ(ChatTemplateName(ChatTemplate::kChatMl), "chatml");
  EXPECT_EQ(ChatTemplateName(ChatTemplate::kLlama2), "llama-2");
}

const std::vector<ChatMessage> kChat = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "2+2?"}};

TEST(ServeChatTemplate, RendersPlain) {
  EXPECT_EQ(RenderChat(ChatTemplate::kPlain, kChat, "<s>"),
            "System: Be brief.\nUser: Hi\nAssistant: Hello!\nUser: 2+2?\nAssistant:");
  EXPECT_EQ(ChatStopStrings(ChatTemplate::kPlain), std::vector<std::string>{"\nUser:"});
}

TEST(ServeChatTemplate, RendersLlama3) {
  EXPECT_EQ(RenderChat(ChatTemplate::kLlama3, kChat, "<|begin_of_text|>"),
            "<|begin_of_text|>"
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(ChatStopStrings(ChatTemplate::kLlama3), std::vector<std::string>{"<|eot_id|>"});
}

TEST(ServeChatTemplate, Llama3TrimsContentAsMetasTemplateDoes) {
  std::vector<ChatMessage> chat = {{"user", "  Hi\n"}};
  EXPECT_EQ(RenderChat(ChatTemplate::kLlama3, chat, ""),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ServeChatTemplate, RendersChatMlWithoutBos) {
  EXPECT_EQ(RenderChat(ChatTemplate::kChatMl, kChat, "<s>"),
            "<|im_start|>system\nBe brief.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(ChatStopStrings(ChatTemplate::kChatMl), std::vector<std::string>{"<|im_end|>"});
}

TEST(ServeChatTemplate, RendersLlama2WithSystemFoldedIntoFirstUserTurn) {
  EXPECT_EQ(RenderChat(ChatTemplate::kLlama2, kChat, "<s>"),
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! </s>"
            "<s>[INST] 2+2? [/INST]");
  std::vector<ChatMessage> no_system = {{"user", "Hi"}};
  EXPECT_EQ(RenderChat(ChatTemplate::kLlama2, no_system, "<s>"), "<s>[INST] Hi [/INST]");
  std::vector<std::string> stops = ChatStopStrings(ChatTemplate::kLlama2);
  EXPECT_NE(std::find(stops.begin(), stops.end(), "[INST]"), stops.end());
}

TEST(ServeChatTemplate, Llama2EndsWhereTheReplyBeginsWhateverTheOrder) {
  std::vector<ChatMessage> system_only = {{"system", "S"}};
  EXPECT_EQ(RenderChat(ChatTemplate::kLlama2, system_only, "<s>"),
            "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\n [/INST]");
  std::vector<ChatMessage> ends_with_assistant = {{"user", "U"}, {"assistant", "A"}};
  EXPECT_EQ(RenderChat(ChatTemplate::kLlama2, ends_with_assistant, "<s>"),
            "<s>[INST] U [/INST] A </s><s>[INST]  [/INST]");
}

TEST(ServeChatTemplate, RefusesEmptyMessagesAndUnknownRoles) {
  for (ChatTemplate t : {ChatTemplate::kPlain, ChatTemplate::kLlama3, ChatTemplate::kChatMl,
                         ChatTemplate::kLlama2}) {
    // The server answers these with 400 and the same param (server_test's
    // ChatWithARoleTheFamilyDoesNotKnowIs400).
    try {
      RenderChat(t, {}, "");
      ADD_FAILURE() << "empty messages accepted by " << ChatTemplateName(t);
    } catch (const ChatMessagesError& e) {
      EXPECT_EQ(e.param(), "messages");
    }
    std::vector<ChatMessage> chat = {{"user", "a"}, {"tool", "b"}};
    try {
      RenderChat(t, chat, "");
      ADD_FAILURE() << "role 'tool' accepted by " << ChatTemplateName(t);
    } catch (const ChatMessagesError& e) {
      EXPECT_EQ(e.param(), "messages[1].role");
      EXPECT_NE(std::string(e.what()).find("\"tool\""), std::string::npos) << e.what();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// StopMatcher

// What the client must see: the text up to the earliest occurrence of any non-empty stop.
std::string Reference(const std::string& text, const std::vector<std::string>& stops) {
  size_t cut = std::string::npos;
  for (const std::string& stop : stops) {
    if (!stop.empty()) cut = std::min(cut, text.find(stop));
  }
  return cut == std::string::npos ? text : text.substr(0, cut);
}

// Pushes `pieces` and returns everything released, Flush included; `stopped` gets the state.
std::string Stream(const std::vector<std::string>& stops, const std::vector<std::string>& pieces,
                   bool* stopped = nullptr) {
  StopMatcher matcher(stops);
  std::string out;
  for (const std::string& piece : pieces) out += matcher.Push(piece);
  if (stopped != nullptr) *stopped = matcher.stopped();
  out += matcher.Flush();
  return out;
}

TEST(ServeStopMatcher, NoStopsPassesTextThrough) {
  StopMatcher matcher({});
  EXPECT_EQ(matcher.Push("Hello"), "Hello");
  EXPECT_EQ(matcher.Push(" world"), " world");
  EXPECT_EQ(matcher.Flush(), "");
  EXPECT_FALSE(matcher.stopped());
  StopMatcher empty_only({"", ""});
  EXPECT_EQ(empty_only.Push("abc"), "abc");
  EXPECT_FALSE(empty_only.stopped());
}

TEST(ServeStopMatcher, HoldsBackOnlyAPossiblePrefix) {
  StopMatcher matcher({"\nUser:"});
  EXPECT_EQ(matcher.Push("Four."), "Four.");
  EXPECT_EQ(matcher.Push("\nUs"), "");  // may be the stop
  EXPECT_EQ(matcher.Push("ually"), "\nUsually");
  EXPECT_FALSE(matcher.stopped());
}

TEST(ServeStopMatcher, StopStraddlingPiecesIsCutAndNeverSent) {
  StopMatcher matcher({"\nUser:"});
  EXPECT_EQ(matcher.Push("Four."), "Four.");
  EXPECT_EQ(matcher.Push("\nUs"), "");
  EXPECT_EQ(matcher.Push("er: more"), "");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.Push("after"), "");
  EXPECT_EQ(matcher.Flush(), "");
}

TEST(ServeStopMatcher, ReleasesTextBeforeAStopInsideOnePiece) {
  StopMatcher matcher({"END"});
  EXPECT_EQ(matcher.Push("abcENDxyz"), "abc");
  EXPECT_TRUE(matcher.stopped());
}

TEST(ServeStopMatcher, OverlappingPrefixes) {
  // "aaab": the held "aa" must slide by one, not be dropped or released whole.
  StopMatcher matcher({"aab"});
  EXPECT_EQ(matcher.Push("a"), "");
  EXPECT_EQ(matcher.Push("a"), "");
  EXPECT_EQ(matcher.Push("a"), "a");
  EXPECT_EQ(matcher.Push("b"), "");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(Stream({"aab"}, {"aaab"}), "a");
  EXPECT_EQ(Stream({"abab"}, {"ab", "a", "aba", "b"}), "aba");
}

TEST(ServeStopMatcher, EarliestOfSeveralStopsWins) {
  EXPECT_EQ(Stream({"world", "lo w"}, {"hel", "lo wor", "ld"}), "hel");
  EXPECT_EQ(Stream({"xyz", "b"}, {"a", "bc"}), "a");
  // A longer stop still pending does not delay a shorter one that completed earlier in the text.
  EXPECT_EQ(Stream({"abcd", "bc"}, {"ab", "c"}), "a");
}

TEST(ServeStopMatcher, FlushReturnsAPartialMatchThatNeverCompleted) {
  StopMatcher matcher({"<|im_end|>"});
  EXPECT_EQ(matcher.Push("done<|im"), "done");
  EXPECT_EQ(matcher.Flush(), "<|im");
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.Flush(), "");
}

TEST(ServeStopMatcher, NeverSplitsMultiByteCharacters) {
  // "é" is C3 A9 and "€" E2 82 AC; a stop beginning with the same lead byte as the text's last
  // character holds the whole character back.
  StopMatcher matcher({"€!"});
  EXPECT_EQ(matcher.Push("café"), "café");
  EXPECT_EQ(matcher.Push("€"), "");
  EXPECT_EQ(matcher.Push("?"), "€?");
  EXPECT_EQ(Stream({"é"}, {"caf", "é au lait"}), "caf");
  // A stop that begins mid-character (not valid UTF-8 on its own) still holds whole characters.
  StopMatcher odd({"\xA9x"});
  EXPECT_EQ(odd.Push("caf\xC3\xA9"), "caf");
  EXPECT_EQ(odd.Flush(), "\xC3\xA9");
}

TEST(ServeStopMatcher, MatchesWholeTextOverEverySplit) {
  const std::vector<std::vector<std::string>> stop_sets = {
      {"aab"}, {"aa", "ab"}, {"abab"}, {"b", "aaa"}, {"€a"}, {"\nUser:"}, {"ba", "aab", "bb"}};
  const std::vector<std::string> texts = {"aaab",           "abababa", "aabaab", "xa€aab",
                                          "hi\nUs\nUser:x", "bbbb",    "aaaa"};
  for (const auto& stops : stop_sets) {
    for (const std::string& text : texts) {
      // Every way to cut `text` into pieces at its byte positions: 2^(n-1) splits.
      const size_t n = text.size();
      for (uint32_t mask = 0; mask < (1u << (n - 1)); ++mask) {
        std::vector<std::string> pieces;
        size_t begin = 0;
        for (size_t i = 1; i <= n; ++i) {
          if (i == n || (mask >> (i - 1)) & 1u) {
            pieces.push_back(text.substr(begin, i - begin));
            begin = i;
          }
        }
        bool stopped = false;
        std::string want = Reference(text, stops);
        ASSERT_EQ(Stream(stops, pieces, &stopped), want)
            << "text '" << text << "' split mask " << mask << " stop '" << stops[0] << "'";
        EXPECT_EQ(stopped, want.size() != text.size());
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// ReasoningSplitter

struct Split {
  std::string reasoning;
  std::string content;
};

Split SplitPieces(const std::vector<std::string>& pieces, bool thinking_open) {
  ReasoningSplitter splitter(thinking_open);
  Split out;
  for (const std::string& piece : pieces) {
    ReasoningSplitter::Parts p = splitter.Push(piece);
    out.reasoning += p.reasoning;
    out.content += p.content;
  }
  ReasoningSplitter::Parts p = splitter.Flush();
  out.reasoning += p.reasoning;
  out.content += p.content;
  return out;
}

// Each text is split whole, then cut at every byte position in every way: the same parts.
TEST(ServeReasoningSplitter, SplitsThinkingFromTheAnswerOverEverySplit) {
  struct Case {
    std::string text;
    bool thinking_open;
    std::string reasoning;
    std::string content;
  };
  const std::vector<Case> cases = {
      {"<think>\nhm, a cat.\n</think>\n\nA cat.", false, "hm, a cat.", "A cat."},
      {"  <think>x</think>y", false, "x", "y"},
      {"<think></think>answer ", false, "", "answer "},
      {"no thinking </think> here", false, "", "no thinking </think> here"},
      {" plain", false, "", " plain"},
      {"<thin", false, "", "<thin"},
      {"<think>cut off at the end </thi", false, "cut off at the end </thi", ""},
      {"<think>a < b </ c\n\n", false, "a < b </ c", ""},
      {"still thinking</think>\nok", true, "still thinking", "ok"},
      {"<think>again</think>ok", true, "again", "ok"},
      {"\n  only thoughts", true, "only thoughts", ""},
      {"", true, "", ""},
      {"", false, "", ""},
      {"<think>x</think>a</think>b", false, "x", "a</think>b"},
  };
  for (const Case& c : cases) {
    const std::size_t n = c.text.size();
    const uint32_t splits = n < 2 ? 1 : (1u << std::min<std::size_t>(n - 1, 14));
    for (uint32_t mask = 0; mask < splits; ++mask) {
      std::vector<std::string> pieces;
      std::size_t begin = 0;
      for (std::size_t i = 1; i <= n; ++i) {
        if (i == n || (i <= 14 && (mask >> (i - 1)) & 1u)) {
          pieces.push_back(c.text.substr(begin, i - begin));
          begin = i;
        }
      }
      const Split got = SplitPieces(pieces, c.thinking_open);
      ASSERT_EQ(got.reasoning, c.reasoning) << "'" << c.text << "' split mask " << mask;
      ASSERT_EQ(got.content, c.content) << "'" << c.text << "' split mask " << mask;
    }
  }
}

TEST(ServeReasoningSplitter, ReleasesTextAsSoonAsItCannotBeAMarker) {
  ReasoningSplitter splitter(false);
  EXPECT_EQ(splitter.Push("<thi").reasoning, "");
  EXPECT_EQ(splitter.Push("nk>Let me see").reasoning, "Let me see");
  EXPECT_EQ(splitter.Push(" </").reasoning, "");  // maybe the end: held
  EXPECT_EQ(splitter.Push("b>").reasoning, " </b>");
  ReasoningSplitter::Parts p = splitter.Push("</think>\n\nIt is 4.");
  EXPECT_EQ(p.reasoning, "");
  EXPECT_EQ(p.content, "It is 4.");
}

// What a streaming client must have once `sent` was pushed: all of it but what may still become a
// marker ("<thi", "</th") and the white space that is dropped if the reasoning ends there. For
// replies without a whole marker.
std::string Releasable(const std::string& sent, bool thinking_open) {
  const std::string open = "<think>", close = "</think>";
  const std::size_t start = sent.find_first_not_of(" \t\n\r");
  const std::string text = start == std::string::npos ? "" : sent.substr(start);
  if (text.empty() || open.compare(0, text.size(), text) == 0) return "";  // may be "<think>"
  if (!thinking_open) return sent;                                         // an answer, as written
  std::size_t keep = 0;
  for (std::size_t k = 1; k < close.size() && k <= text.size(); ++k) {
    if (text.compare(text.size() - k, k, close, 0, k) == 0) keep = k;
  }
  std::string release = text.substr(0, text.size() - keep);
  release.erase(release.find_last_not_of(" \t\n\r") + 1);
  return release;
}

// Short replies (shorter than the markers) stream as they come, cut at every point: what a step
// pushes reaches the client at once unless it may still turn into a marker; and once the reply
// ends, nothing is left behind.
TEST(ServeReasoningSplitter, ShortRepliesStreamAsTheyCome) {
  for (const bool open : {false, true}) {
    for (const std::string text :
         {"4", "Hi", "No.", "a < b", "<3", "</b", "</thin", " ok", "ok ", "\n", "<", "<t", "x</"}) {
      for (std::size_t cut = 0; cut <= text.size(); ++cut) {
        SCOPED_TRACE("'" + text + "' cut at " + std::to_string(cut) + (open ? ", open" : ""));
        ReasoningSplitter splitter(open);
        ReasoningSplitter::Parts first = splitter.Push(text.substr(0, cut));
        EXPECT_EQ(first.reasoning + first.content, Releasable(text.substr(0, cut), open));
        EXPECT_TRUE(open ? first.content.empty() : first.reasoning.empty());
        ReasoningSplitter::Parts rest = splitter.Push(text.substr(cut));
        EXPECT_EQ(first.reasoning + first.content + rest.reasoning + rest.content,
                  Releasable(text, open));
        const ReasoningSplitter::Parts last = splitter.Flush();
        const Split whole = SplitPieces({text}, open);
        EXPECT_EQ(first.reasoning + rest.reasoning + last.reasoning, whole.reasoning);
        EXPECT_EQ(first.content + rest.content + last.content, whole.content);
        // The whole reply: an answer as written, or thoughts less the white space around them.
        std::string trimmed = text;
        trimmed.erase(trimmed.find_last_not_of(" \t\n\r") + 1);
        trimmed.erase(0, trimmed.find_first_not_of(" \t\n\r"));
        EXPECT_EQ(open ? whole.reasoning : whole.content, open ? trimmed : text);
      }
    }
  }
}

TEST(ServeReasoningSplitter, PromptOpensThinkingOnlyWhenItEndsInsideThink) {
  EXPECT_TRUE(PromptOpensThinking("<|Assistant|><think>\n"));
  EXPECT_TRUE(PromptOpensThinking("<think>"));
  EXPECT_FALSE(PromptOpensThinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(PromptOpensThinking("<think>x</think> and then"));
  EXPECT_FALSE(PromptOpensThinking(""));
}

TEST(ServeReasoningSplitter, FormatNames) {
  ReasoningFormat f = ReasoningFormat::kNone;
  EXPECT_TRUE(ParseReasoningFormat("deepseek", &f));
  EXPECT_EQ(f, ReasoningFormat::kDeepSeek);
  EXPECT_TRUE(ParseReasoningFormat("none", &f));
  EXPECT_EQ(f, ReasoningFormat::kNone);
  EXPECT_TRUE(ParseReasoningFormat("auto", &f));
  EXPECT_EQ(f, ReasoningFormat::kDeepSeek);
  EXPECT_FALSE(ParseReasoningFormat("deepseek-legacy", &f));
}

// ---------------------------------------------------------------------------------------------
// ParseCompletionRequest

// The ApiError a body is refused with; fails the test when it is accepted.
ApiError Refusal(const json& body, bool chat, const ApiLimits& limits = {}) {
  try {
    ParseCompletionRequest(body, chat, limits);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body.dump();
  return ApiError(0, "");
}

// Checks the refusal's status, param and full message.
void ExpectRefused(const json& body, bool chat, const std::string& param,
                   const std::string& message, const ApiLimits& limits = {}) {
  ApiError e = Refusal(body, chat, limits);
  EXPECT_EQ(e.status(), 400) << body.dump();
  EXPECT_EQ(e.type(), "invalid_request_error") << body.dump();
  EXPECT_EQ(e.param(), param) << body.dump();
  EXPECT_EQ(std::string(e.what()), message) << body.dump();
}

json Prompt(json fields = json::object()) {
  fields["prompt"] = "Once upon a time";
  return fields;
}

json Chat(json fields = json::object()) {
  fields["messages"] = json::array({{{"role", "user"}, {"content", "Hi"}}});
  return fields;
}

TEST(ServeParseCompletionRequest, DefaultsForAMinimalCompletion) {
  CompletionRequest r = ParseCompletionRequest(Prompt(), false, {});
  EXPECT_FALSE(r.chat);
  EXPECT_EQ(r.prompt, "Once upon a time");
  EXPECT_EQ(r.model, "");
  EXPECT_EQ(r.max_tokens, 256);
  EXPECT_FALSE(r.temperature.has_value());  // the server's defaults
  EXPECT_FALSE(r.top_p.has_value());
  EXPECT_FALSE(r.top_k.has_value());
  EXPECT_FALSE(r.min_p.has_value());
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_TRUE(r.stop.empty());
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_EQ(r.speculation, "auto");
}

TEST(ServeParseCompletionRequest, DefaultMaxTokensFitsASmallContext) {
  ApiLimits limits;
  limits.max_tokens = 100;
  EXPECT_EQ(ParseCompletionRequest(Prompt(), false, limits).max_tokens, 100);
}

TEST(ServeParseCompletionRequest, ReadsEveryField) {
  json body = Prompt({{"model", "grove-target"},
                      {"max_tokens", 32},
                      {"temperature", 0.5},
                      {"top_p", 0.9},
                      {"top_k", 5},
                      {"min_p", 0.1},
                      {"seed", 42},
                      {"stop", {"\n\n", "END"}},
                      {"n", 3},
                      {"stream", true},
                      {"stream_options", {{"include_usage", true}}},
                      {"grove", {{"speculation", "sequoia:8"}}},
                      {"logprobs", nullptr},
                      {"user", "someone"}});  // the last two change nothing: ignored
  CompletionRequest r = ParseCompletionRequest(body, false, {});
  EXPECT_EQ(r.model, "grove-target");
  EXPECT_EQ(r.max_tokens, 32);
  EXPECT_FLOAT_EQ(*r.temperature, 0.5f);
  EXPECT_FLOAT_EQ(*r.top_p, 0.9f);
  EXPECT_EQ(*r.top_k, 5);
  EXPECT_FLOAT_EQ(*r.min_p, 0.1f);
  ASSERT_TRUE(r.seed.has_value());
  EXPECT_EQ(*r.seed, 42u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(r.n, 3);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.speculation, "sequoia:8");
}

TEST(ServeParseCompletionRequest, NullMeansAbsent) {
  json body = Prompt({{"model", nullptr},
                      {"max_tokens", nullptr},
                      {"temperature", nullptr},
                      {"top_p", nullptr},
                      {"seed", nullptr},
                      {"stop", nullptr},
                      {"n", nullptr},
                      {"stream", nullptr},
                      {"stream_options", nullptr},
                      {"grove", nullptr}});
  CompletionRequest r = ParseCompletionRequest(body, false, {});
  EXPECT_EQ(r.max_tokens, 256);
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_TRUE(r.stop.empty());
  EXPECT_EQ(r.speculation, "auto");
}

TEST(ServeParseCompletionRequest, RefusesABodyThatIsNotAnObject) {
  ApiError e = Refusal(json::array({1, 2}), false);
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(std::string(e.what()), "the request body must be a JSON object, got array");
  EXPECT_EQ(Refusal("text", true).status(), 400);
}

TEST(ServeParseCompletionRequest, PromptForms) {
  EXPECT_EQ(ParseCompletionRequest({{"prompt", {"one"}}}, false, {}).prompt, "one");
  EXPECT_EQ(ParseCompletionRequest({{"prompt", ""}}, false, {}).prompt, "");
  ExpectRefused(json::object(), false, "prompt", "prompt is required");
  ExpectRefused({{"prompt", nullptr}}, false, "prompt", "prompt is required");
  ExpectRefused({{"prompt", 7}}, false, "prompt", "prompt must be a string, got 7");
  ExpectRefused({{"prompt", {"a", "b"}}}, false, "prompt",
                "prompt as an array must hold exactly one string (several prompts in one request "
                "are not supported), got 2 elements");
  ExpectRefused({{"prompt", json::array()}}, false, "prompt",
                "prompt as an array must hold exactly one string (several prompts in one request "
                "are not supported), got 0 elements");
  ExpectRefused({{"prompt", {1, 2, 3}}}, false, "prompt",
                "prompt as token ids is not supported; send the prompt as a string");
  ExpectRefused({{"prompt", {{1, 2}}}}, false, "prompt",
                "prompt as token ids is not supported; send the prompt as a string");
  ExpectRefused({{"prompt", {true}}}, false, "prompt[0]", "prompt[0] must be a string, got true");
  // A chat request does not read "prompt", a completion does not read "messages".
  ExpectRefused({{"prompt", "x"}}, true, "messages", "messages is required");
}

TEST(ServeParseCompletionRequest, MaxTokensRangeIsOneToTheLimit) {
  ApiLimits limits;
  limits.max_tokens = 4096;
  EXPECT_EQ(ParseCompletionRequest(Prompt({{"max_tokens", 1}}), false, limits).max_tokens, 1);
  EXPECT_EQ(ParseCompletionRequest(Prompt({{"max_tokens", 4096}}), false, limits).max_tokens, 4096);
  ExpectRefused(Prompt({{"max_tokens", 0}}), false, "max_tokens",
                "max_tokens must be an integer from 1 to 4096, got 0", limits);
  ExpectRefused(Prompt({{"max_tokens", 4097}}), false, "max_tokens",
                "max_tokens must be an integer from 1 to 4096, got 4097", limits);
  ExpectRefused(Prompt({{"max_tokens", -5}}), false, "max_tokens",
                "max_tokens must be an integer from 1 to 4096, got -5", limits);
  ExpectRefused(Prompt({{"max_tokens", "ten"}}), false, "max_tokens",
                "max_tokens must be an integer from 1 to 4096, got \"ten\"", limits);
  ExpectRefused(Prompt({{"max_tokens", 1.5}}), false, "max_tokens",
                "max_tokens must be an integer from 1 to 4096, got 1.5", limits);
  ExpectRefused(Prompt({{"max_tokens", 18446744073709551615ull}}), false, "max_tokens",
                "max_tokens must be an integer from 1 to 4096, got 18446744073709551615", limits);
  limits.max_tokens = 128;
  ExpectRefused(Prompt({{"max_tokens", 129}}), false, "max_tokens",
                "max_tokens must be an integer from 1 to 128, got 129", limits);
}

TEST(ServeParseCompletionRequest, MaxCompletionTokensIsMaxTokensForChat) {
  EXPECT_EQ(ParseCompletionRequest(Chat({{"max_completion_tokens", 9}}), true, {}).max_tokens, 9);
  EXPECT_EQ(ParseCompletionRequest(Chat({{"max_tokens", 9}}), true, {}).max_tokens, 9);
  EXPECT_EQ(
      ParseCompletionRequest(Chat({{"max_tokens", 9}, {"max_completion_tokens", 9}}), true, {})
          .max_tokens,
      9);
  ExpectRefused(Chat({{"max_completion_tokens", 0}}), true, "max_completion_tokens",
                "max_completion_tokens must be an integer from 1 to 4096, got 0");
  ExpectRefused(Chat({{"max_tokens", 9}, {"max_completion_tokens", 10}}), true,
                "max_completion_tokens",
                "max_completion_tokens and max_tokens differ (10 and 9); send one of them");
  // /v1/completions knows only max_tokens.
  EXPECT_EQ(ParseCompletionRequest(Prompt({{"max_completion_tokens", 9}}), false, {}).max_tokens,
            256);
}

TEST(ServeParseCompletionRequest, TemperatureRangeIsZeroToTwoInclusive) {
  EXPECT_EQ(*ParseCompletionRequest(Prompt({{"temperature", 0}}), false, {}).temperature, 0.0f);
  EXPECT_EQ(*ParseCompletionRequest(Prompt({{"temperature", 2}}), false, {}).temperature, 2.0f);
  EXPECT_EQ(*ParseCompletionRequest(Prompt({{"temperature", 1}}), false, {}).temperature, 1.0f);
  ExpectRefused(Prompt({{"temperature", 2.01}}), false, "temperature",
                "temperature must be a number from 0 to 2, got 2.01");
  ExpectRefused(Prompt({{"temperature", -0.1}}), false, "temperature",
                "temperature must be a number from 0 to 2, got -0.1");
  ExpectRefused(Prompt({{"temperature", "hot"}}), false, "temperature",
                "temperature must be a number from 0 to 2, got \"hot\"");
}

TEST(ServeParseCompletionRequest, TopPRangeExcludesZeroIncludesOne) {
  EXPECT_EQ(*ParseCompletionRequest(Prompt({{"top_p", 1}}), false, {}).top_p, 1.0f);
  EXPECT_FLOAT_EQ(*ParseCompletionRequest(Prompt({{"top_p", 0.01}}), false, {}).top_p, 0.01f);
  ExpectRefused(Prompt({{"top_p", 0}}), false, "top_p",
                "top_p must be a number greater than 0 and at most 1, got 0");
  ExpectRefused(Prompt({{"top_p", 1.5}}), false, "top_p",
                "top_p must be a number greater than 0 and at most 1, got 1.5");
  ExpectRefused(Prompt({{"top_p", nullptr}, {"temperature", {1}}}), false, "temperature",
                "temperature must be a number from 0 to 2, got [1]");
}

TEST(ServeParseCompletionRequest, SeedIsANonNegativeInteger) {
  EXPECT_EQ(*ParseCompletionRequest(Prompt({{"seed", 0}}), false, {}).seed, 0u);
  EXPECT_EQ(*ParseCompletionRequest(Prompt({{"seed", 18446744073709551615ull}}), false, {}).seed,
            18446744073709551615ull);
  ExpectRefused(Prompt({{"seed", -1}}), false, "seed",
                "seed must be a non-negative integer, got -1");
  ExpectRefused(Prompt({{"seed", 1.5}}), false, "seed",
                "seed must be a non-negative integer, got 1.5");
  ExpectRefused(Prompt({{"seed", "7"}}), false, "seed",
                "seed must be a non-negative integer, got \"7\"");
}

TEST(ServeParseCompletionRequest, StopIsAStringOrUpToMaxStopsStrings) {
  EXPECT_EQ(ParseCompletionRequest(Prompt({{"stop", "\n"}}), false, {}).stop,
            std::vector<std::string>{"\n"});
  EXPECT_TRUE(ParseCompletionRequest(Prompt({{"stop", json::array()}}), false, {}).stop.empty());
  ApiLimits limits;
  limits.max_stops = 4;
  EXPECT_EQ(
      ParseCompletionRequest(Prompt({{"stop", {"a", "b", "c", "d"}}}), false, limits).stop.size(),
      4u);
  ExpectRefused(Prompt({{"stop", {"a", "b", "c", "d", "e"}}}), false, "stop",
                "stop must hold at most 4 strings, got 5", limits);
  ExpectRefused(Prompt({{"stop", 3}}), false, "stop",
                "stop must be a string or an array of strings, got 3");
  ExpectRefused(Prompt({{"stop", {"a", 3}}}), false, "stop[1]", "stop[1] must be a string, got 3");
}

TEST(ServeParseCompletionRequest, NRangeIsOneToMaxN) {
  ApiLimits limits;
  limits.max_n = 16;
  EXPECT_EQ(ParseCompletionRequest(Prompt({{"n", 1}}), false, limits).n, 1);
  EXPECT_EQ(ParseCompletionRequest(Prompt({{"n", 16}}), false, limits).n, 16);
  ExpectRefused(Prompt({{"n", 0}}), false, "n", "n must be an integer from 1 to 16, got 0", limits);
  ExpectRefused(Prompt({{"n", 17}}), false, "n", "n must be an integer from 1 to 16, got 17",
                limits);
  ExpectRefused(Prompt({{"n", 2.0}}), false, "n", "n must be an integer from 1 to 16, got 2.0",
                limits);
}

TEST(ServeParseCompletionRequest, StreamAndStreamOptionsAreBooleans) {
  ExpectRefused(Prompt({{"stream", "yes"}}), false, "stream",
                "stream must be a boolean, got \"yes\"");
  ExpectRefused(Prompt({{"stream", 1}}), false, "stream", "stream must be a boolean, got 1");
  ExpectRefused(Prompt({{"stream_options", true}}), false, "stream_options",
                "stream_options must be an object, got true");
  ExpectRefused(Prompt({{"stream_options", {{"include_usage", "yes"}}}}), false,
                "stream_options.include_usage",
                "stream_options.include_usage must be a boolean, got \"yes\"");
  CompletionRequest r = ParseCompletionRequest(
      Prompt({{"stream", true}, {"stream_options", json::object()}}), false, {});
  EXPECT_TRUE(r.stream);
  EXPECT_FALSE(r.include_usage);
}

TEST(ServeParseCompletionRequest, GroveExtension) {
  EXPECT_EQ(
      ParseCompletionRequest(Prompt({{"grove", {{"speculation", "off"}}}}), false, {}).speculation,
      "off");
  EXPECT_EQ(ParseCompletionRequest(Prompt({{"grove", json::object()}}), false, {}).speculation,
            "auto");
  ExpectRefused(Prompt({{"grove", "off"}}), false, "grove", "grove must be an object, got \"off\"");
  ExpectRefused(Prompt({{"grove", {{"speculation", 8}}}}), false, "grove.speculation",
                "grove.speculation must be \"off\", \"auto\" or a tree spec such as "
                "\"sequoia:8\", got 8");
  ExpectRefused(Prompt({{"grove", {{"speculation", ""}}}}), false, "grove.speculation",
                "grove.speculation must be \"off\", \"auto\" or a tree spec such as "
                "\"sequoia:8\", got \"\"");
}

TEST(ServeParseCompletionRequest, ModelMustBeAString) {
  ExpectRefused(Prompt({{"model", 3}}), false, "model", "model must be a string, got 3");
}

TEST(ServeParseCompletionRequest, ChatMessages) {
  json body = {{"messages",
                {{{"role", "system"}, {"content", "Be brief."}},
                 {{"role", "developer"}, {"content", "Really."}},
                 {{"role", "user"},
                  {"content",
                   {{{"type", "text"}, {"text", "Hello, "}}, {{"type", "text"}, {"text", "you"}}}}},
                 {{"role", "assistant"}, {"content", nullptr}},
                 {{"role", "assistant"}},
                 {{"role", "user"}, {"content", json::array()}}}}};
  CompletionRequest r = ParseCompletionRequest(body, true, {});
  EXPECT_TRUE(r.chat);
  ASSERT_EQ(r.messages.size(), 6u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "Be brief.");
  EXPECT_EQ(r.messages[1].role, "system");  // "developer" is OpenAI's newer name for it
  EXPECT_EQ(r.messages[2].role, "user");
  EXPECT_EQ(r.messages[2].content, "Hello, \nyou");  // one line a part, as llama-server and vLLM
  EXPECT_EQ(r.messages[3].role, "assistant");
  EXPECT_EQ(r.messages[3].content, "");
  EXPECT_EQ(r.messages[4].content, "");
  EXPECT_EQ(r.messages[5].content, "");
}

TEST(ServeParseCompletionRequest, RefusesBadMessages) {
  ExpectRefused(json::object(), true, "messages", "messages is required");
  ExpectRefused({{"messages", "hi"}}, true, "messages",
                "messages must be a non-empty array, got \"hi\"");
  ExpectRefused({{"messages", json::array()}}, true, "messages",
                "messages must be a non-empty array, got []");
  ExpectRefused({{"messages", {"hi"}}}, true, "messages[0]",
                "messages[0] must be an object with role and content, got \"hi\"");
  ExpectRefused({{"messages", {{{"content", "hi"}}}}}, true, "messages[0].role",
                "messages[0].role is required");
  ExpectRefused({{"messages", {{{"role", 1}, {"content", "hi"}}}}}, true, "messages[0].role",
                "messages[0].role must be a string, got 1");
  ExpectRefused(
      {{"messages", {{{"role", "user"}, {"content", "a"}}, {{"role", "robot"}}}}}, true,
      "messages[1].role",
      "messages[1].role must be one of \"system\", \"user\", \"assistant\", \"tool\", got "
      "\"robot\"");
  ExpectRefused({{"messages", {{{"role", "user"}, {"content", nullptr}}}}}, true,
                "messages[0].content", "messages[0].content is required for a user message");
  ExpectRefused({{"messages", {{{"role", "user"}, {"content", 5}}}}}, true, "messages[0].content",
                "messages[0].content must be a string or an array of text parts, got 5");
  ExpectRefused({{"messages", {{{"role", "user"}, {"content", {"hi"}}}}}}, true,
                "messages[0].content[0]",
                "messages[0].content[0] must be an object {\"type\": \"text\", \"text\": ...}, got "
                "\"hi\"");
  ExpectRefused({{"messages",
                  {{{"role", "user"},
                    {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "image_url"}}}}}}}},
                true, "messages[0].content[1].type",
                "messages[0].content[1].type must be \"text\" (only text parts are supported), got "
                "\"image_url\"");
  ExpectRefused({{"messages", {{{"role", "user"}, {"content", {{{"text", "a"}}}}}}}}, true,
                "messages[0].content[0].type",
                "messages[0].content[0].type must be \"text\" (only text parts are supported), "
                "got nothing");
  ExpectRefused({{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}}}}}}}}, true,
                "messages[0].content[0].text", "messages[0].content[0].text is required");
  ExpectRefused(
      {{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", 3}}}}}}}}, true,
      "messages[0].content[0].text", "messages[0].content[0].text must be a string, got 3");
}

TEST(ServeParseCompletionRequest, LongValuesAreCutShortInMessages) {
  ApiError e = Refusal(Prompt({{"max_tokens", std::string(500, 'x')}}), false);
  EXPECT_LT(std::string(e.what()).size(), 150u) << e.what();
  EXPECT_NE(std::string(e.what()).find("..."), std::string::npos);
}

TEST(ServeParseCompletionRequest, ParsedChatRendersInEveryFamily) {
  CompletionRequest r = ParseCompletionRequest(
      json::parse(R"({"messages": [{"role": "user", "content": "Hi"}]})"), true, {});
  EXPECT_EQ(RenderChat(ChatTemplate::kPlain, r.messages, ""), "User: Hi\nAssistant:");
  EXPECT_EQ(RenderChat(ChatTemplate::kChatMl, r.messages, ""),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ServeParseCompletionRequest, ReasoningFormatAndTemplateArgumentsForChat) {
  EXPECT_FALSE(ParseCompletionRequest(Chat(), true, {}).reasoning_format.has_value());
  EXPECT_EQ(
      ParseCompletionRequest(Chat({{"reasoning_format", "deepseek"}}), true, {}).reasoning_format,
      ReasoningFormat::kDeepSeek);
  EXPECT_EQ(ParseCompletionRequest(Chat({{"reasoning_format", "none"}}), true, {}).reasoning_format,
            ReasoningFormat::kNone);
  ExpectRefused(Chat({{"reasoning_format", "r1"}}), true, "reasoning_format",
                "reasoning_format must be \"none\", \"deepseek\" or \"auto\", got \"r1\"");
  ExpectRefused(Chat({{"chat_template_kwargs", "x"}}), true, "chat_template_kwargs",
                "chat_template_kwargs must be an object, got \"x\"");
  // /v1/completions has no messages to split: the field is ignored there, as unknown fields are.
  EXPECT_FALSE(
      ParseCompletionRequest(Prompt({{"reasoning_format", 3}}), false, {}).reasoning_format);
}

// Fields that would change what a response holds are refused when they ask for something grove
// does not do, and accepted at their neutral values: nothing is ignored in silence.
TEST(ServeParseCompletionRequest, UnimplementedFieldsAreRefusedUnlessNeutral) {
  ExpectRefused(Prompt({{"logprobs", 2}}), false, "logprobs",
                "logprobs is not supported by grove (omit it, or send null)");
  ExpectRefused(Chat({{"logprobs", true}}), true, "logprobs",
                "logprobs is not supported by grove (omit it, or send null)");
  ExpectRefused(Prompt({{"echo", true}}), false, "echo",
                "echo is not supported by grove (omit it, or send null)");
  ExpectRefused(Prompt({{"best_of", 3}}), false, "best_of",
                "best_of is not supported by grove (omit it, or send 1; n gives several choices)");
  ExpectRefused(Prompt({{"presence_penalty", 0.5}}), false, "presence_penalty",
                "presence_penalty is not supported by grove (omit it, or send null)");
  ExpectRefused(Prompt({{"logit_bias", {{"50256", -100}}}}), false, "logit_bias",
                "logit_bias is not supported by grove (omit it, or send {})");
  ExpectRefused(Chat({{"response_format", {{"type", "json_object"}}}}), true, "response_format",
                "response_format is not supported by grove beyond {\"type\": \"text\"}");
  ExpectRefused(Chat({{"tool_choice", "required"}}), true, "tool_choice",
                "tool_choice is not supported by grove beyond \"auto\" and \"none\"");
  EXPECT_NO_THROW(ParseCompletionRequest(Prompt({{"logprobs", nullptr},
                                                 {"echo", false},
                                                 {"best_of", 1},
                                                 {"presence_penalty", 0},
                                                 {"frequency_penalty", 0.0},
                                                 {"logit_bias", json::object()},
                                                 {"suffix", ""}}),
                                         false, {}));
  EXPECT_NO_THROW(ParseCompletionRequest(
      Chat({{"logprobs", false}, {"tool_choice", "auto"}, {"response_format", {{"type", "text"}}}}),
      true, {}));
}

// ---------------------------------------------------------------------------------------------
// TrafficRecord

// The documents of a corpus part as the trainer reads them (train/corpus_files.h).
std::vector<std::string> Documents(const std::string& text) {
  std::vector<std::string> docs;
  for (std::string_view d : SplitDocuments(text)) docs.emplace_back(d);
  return docs;
}

TEST(TrafficRecord, WritesACorpusThatGrowsAcrossRestarts) {
  const std::filesystem::path dir = testing::TempPath("record/nested");
  std::filesystem::remove_all(dir.parent_path());
  {
    TrafficRecord record(dir.string());  // creates the directory
    record.Add("User: hi\n\n\nAssistant:", " Hello.\n   \nHow are you?");
    for (int i = 1; i < 20; ++i) record.Add("Once", " upon a time " + std::to_string(i));
    record.Add("", "");  // nothing to keep
    EXPECT_EQ(record.documents(), 20);
  }
  std::vector<std::string> train = Documents(testing::ReadWholeFile(dir / "train.txt"));
  const std::vector<std::string> valid = Documents(testing::ReadWholeFile(dir / "valid.txt"));
  ASSERT_EQ(train.size(), 19u);  // document 19 (counting from 0) is valid's
  ASSERT_EQ(valid.size(), 1u);
  EXPECT_EQ(train[0], "User: hi\nAssistant: Hello.\nHow are you?\n");  // blank lines left out
  EXPECT_EQ(valid[0], "Once upon a time 19\n");
  {
    TrafficRecord again(dir.string());
    again.Add("The end", ".");
  }
  train = Documents(testing::ReadWholeFile(dir / "train.txt"));
  ASSERT_EQ(train.size(), 20u);
  EXPECT_EQ(train.back(), "The end.\n");
  std::filesystem::remove_all(dir.parent_path());
}

TEST(TrafficRecord, AFailedWriteStopsRecordingNotServing) {
  const std::filesystem::path dir = testing::TempPath("record-full");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::create_symlink("/dev/full", dir / "train.txt");  // every write: ENOSPC
  TrafficRecord record(dir.string());
  EXPECT_NO_THROW(record.Add("Once", " upon a time"));
  EXPECT_TRUE(record.stopped());
  EXPECT_EQ(record.documents(), 0);
  EXPECT_NO_THROW(record.Add("Once", " more"));
  std::filesystem::remove_all(dir);
  // A directory that cannot be made is refused at start, naming it.
  try {
    TrafficRecord bad("/proc/grove-record");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/proc/grove-record"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace grove::serve
