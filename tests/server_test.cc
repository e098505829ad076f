// grove serve end to end: a CompletionService and HttpServer over the bundled pair on a free
// loopback port, spoken to over HTTP as clients do. Every endpoint, streamed and not; each
// response equals plain decoding of the same prompt alone (same seed, same text); bad input gets
// OpenAI's error object with the right status; a full queue answers 503 with Retry-After; a client
// that disconnects frees its sequence; and a load of concurrent streaming clients, some
// cancelling, loses nothing.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "event_stream_client.h"
#include "model/model.h"
#include "serve/api_error.h"
#include "serve/completion_service.h"
#include "serve/http_server.h"
#include "speculate/plain_decoding.h"
#include "speculate/plan_files.h"
#include "speculate/tree_plan.h"
#include "test_support.h"
#include "tokenize/tokenizer.h"
#include "train/corpus_files.h"

namespace grove::serve {
namespace {

const std::string kTarget = std::string(GROVE_MODELS_DIR) + "/grove-target.gguf";
const std::string kDraft = std::string(GROVE_MODELS_DIR) + "/grove-draft.gguf";
const std::string kAccept = std::string(GROVE_MODELS_DIR) + "/grove-pair.sampled.accept.json";

using nlohmann::json;
// grove serve-bench's client (tools/grove/event_stream_client.h).
using cli::EventStreamResult;
using cli::PostEventStream;

// How a test's server is set up.
struct ServerSetup {
  int parallel = 2;
  int max_waiting = 8;
  std::string api_key;
  SchedulePolicy policy = SchedulePolicy::kBatched;
  int keep_alive_ms = 1000;
  std::string chat_template;
  std::string drafter = "draft-model";  // or "suffix", or "draft-model+suffix" (a mixture)
  std::string record_dir;
  std::string admin_key;
};

// A running server over the bundled pair.
class Server {
 public:
  explicit Server(const ServerSetup& setup) {
    target_ = Model::Load(kTarget, {.n_threads = 2, .n_ctx = 256, .n_seq = setup.parallel});
    auto draft = Model::Load(kDraft, {.n_threads = 1, .n_ctx = 16});
    DraftSource model = DraftSource::FromModel(draft->parameters(), *target_->parameters());
    DraftSource source = setup.drafter == "suffix" ? DraftSource::Suffix()
                         : setup.drafter == "draft-model+suffix"
                             ? DraftSource::Mixture({model, DraftSource::Suffix()})
                             : model;
    ServiceOptions options{.model_id = "grove-target",
                           .model_aliases = {"gpt-4o-mini"},
                           .policy = setup.policy,
                           .spec = "sequoia:6",
                           .plan_inputs = ReadPlanInputs(kAccept, "", 128),
                           .max_waiting = setup.max_waiting,
                           .chat_template_source = setup.chat_template,
                           .record_dir = setup.record_dir};
    service_ = std::make_unique<CompletionService>(*target_, std::move(source), options);
    http_ = std::make_unique<HttpServer>(*service_,
                                         HttpServerOptions{.port = 0,
                                                           .api_key = setup.api_key,
                                                           .admin_key = setup.admin_key,
                                                           .max_body_bytes = 64 << 10,
                                                           .keep_alive_ms = setup.keep_alive_ms});
    port_ = http_->Bind();
    thread_ = std::thread([this] { http_->Listen(); });
  }
  ~Server() {
    http_->Stop();
    thread_.join();
  }
  httplib::Client Client() const {
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(60, 0);
    return client;
  }
  Model& target() { return *target_; }
  CompletionService& service() { return *service_; }
  int port() const { return port_; }

  // Plain greedy or sampled decoding of `prompt` alone, decoded as the server decodes.
  std::string Alone(const std::string& prompt, int max_tokens, float temperature, uint64_t seed,
                    float top_p = 1.0f) {
    const Tokenizer& tok = *target_->tokenizer();
    const auto tokens = tok.Encode(prompt, tok.add_bos_by_default());
    // Slot 0 is the server's too: only while it is idle.
    const auto out = GeneratePlain(
        *target_, tokens,
        // The server's defaults for the fields a request leaves out: every command's filters.
        {.temperature = temperature, .top_p = top_p, .seed = seed},
        {.n_predict = max_tokens, .sequence = 0, .target_seq = Idle()}, {});
    TokenStreamDecoder decoder(tok);
    std::string text;
    for (int32_t t : out) {
      if (tok.IsEndOfGeneration(t)) break;
      text += decoder.Push(t);
    }
    target_->kv().Release(slot_);
    return text + decoder.Flush();
  }

 private:
  int32_t Idle() {
    slot_ = target_->kv().Acquire();
    return slot_;
  }
  std::unique_ptr<Model> target_;
  std::unique_ptr<CompletionService> service_;
  std::unique_ptr<HttpServer> http_;
  int port_ = 0;
  int32_t slot_ = -1;
  std::thread thread_;
};

// POSTs a streaming request and returns the SSE data payloads; on_data may stop reading (false),
// which closes the connection as a client that goes away does.
std::vector<std::string> StreamPost(const Server& server, const std::string& path, const json& body,
                                    const std::function<bool(const std::string&)>& on_data = {},
                                    const std::string& api_key = "") {
  std::vector<std::string> data;
  const EventStreamResult result = PostEventStream(
      "127.0.0.1", server.port(), path, body.dump(),
      [&](std::string_view d) {
        data.emplace_back(d);
        return !on_data || on_data(data.back());
      },
      api_key);
  if (!result.error.empty() || (result.status != 200 && !result.cancelled)) {
    ADD_FAILURE() << body.dump().substr(0, 90) << " POST " << path << ": " << result.error
                  << ", status " << result.status << " " << result.body;
  }
  return data;
}

// The text of a stream's chunks (choice 0), and its finish reason.
std::string StreamText(const std::vector<std::string>& data, bool chat, std::string* finish) {
  std::string text;
  for (const std::string& d : data) {
    if (d == "[DONE]") continue;
    const json chunk = json::parse(d);
    for (const json& c : chunk.at("choices")) {
      if (chat) {
        if (c.at("delta").contains("content")) text += c.at("delta").at("content");
      } else {
        text += c.at("text").get<std::string>();
      }
      if (!c.at("finish_reason").is_null() && finish) *finish = c.at("finish_reason");
    }
  }
  return text;
}

json PostJson(httplib::Client& client, const std::string& path, const json& body, int* status) {
  auto res = client.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(res) << path;
  if (!res) return {};
  if (status) *status = res->status;
  return json::parse(res->body);
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::FileExists(kTarget)) << kTarget;
    ASSERT_TRUE(testing::FileExists(kDraft)) << kDraft;
  }
};

TEST_F(ServerTest, EndpointsAnswerAndResponsesAreWhatPlainDecodingGives) {
  Server server({});
  httplib::Client client = server.Client();
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(json::parse(health->body).at("status"), "ok");
  auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body).at("data").at(0).at("id"), "grove-target");
  EXPECT_EQ(json::parse(models->body).at("data").at(1).at("id"), "gpt-4o-mini");
  // One model is served: any name gets it, as from llama-server.
  int any_status = 0;
  const json any = PostJson(client, "/v1/completions",
                            {{"prompt", "hi"}, {"model", "gpt-4"}, {"max_tokens", 2}}, &any_status);
  EXPECT_EQ(any_status, 200) << any.dump();
  EXPECT_EQ(any.at("model"), "grove-target");

  const std::string prompt = "Once upon a time";
  // Greedy, speculative and off, non-streamed and streamed: all equal plain decoding alone.
  const std::string greedy = server.Alone(prompt, 48, 0.0f, 0);
  ASSERT_FALSE(greedy.empty());
  // top_k 1 (and min_p 1) keep only the most likely token: greedy text at any temperature.
  for (const char* filter : {"top_k", "min_p"}) {
    SCOPED_TRACE(filter);
    int status = 0;
    const json body = PostJson(client, "/v1/completions",
                               {{"prompt", prompt},
                                {"max_tokens", 48},
                                {"temperature", 1.5},
                                {"seed", 11},
                                {filter, 1},
                                {"grove", {{"speculation", "off"}}}},
                               &status);
    ASSERT_EQ(status, 200) << body.dump();
    EXPECT_EQ(body.at("choices").at(0).at("text"), greedy);
  }
  for (const char* speculation : {"auto", "off", "chain:3"}) {
    SCOPED_TRACE(speculation);
    int status = 0;
    const json body = PostJson(client, "/v1/completions",
                               {{"prompt", prompt},
                                {"max_tokens", 48},
                                {"temperature", 0},
                                {"grove", {{"speculation", speculation}}}},
                               &status);
    ASSERT_EQ(status, 200) << body.dump();
    EXPECT_EQ(body.at("object"), "text_completion");
    EXPECT_EQ(body.at("choices").at(0).at("text"), greedy);
    EXPECT_EQ(body.at("usage").at("completion_tokens").get<int>() +
                  body.at("usage").at("prompt_tokens").get<int>(),
              body.at("usage").at("total_tokens").get<int>());
    const json& grove = body.at("grove");
    EXPECT_GT(grove.at("steps").get<int>(), 0);
    if (std::string(speculation) == "off") {
      EXPECT_EQ(grove.at("speculation"), "off");
    } else {
      EXPECT_GT(grove.at("tau").get<double>(), 1.0);  // the bundled pair agrees often
      EXPECT_FALSE(grove.at("acceptance_by_depth").empty());
    }
    std::string finish;
    const auto data = StreamPost(server, "/v1/completions",
                                 {{"prompt", prompt},
                                  {"max_tokens", 48},
                                  {"temperature", 0},
                                  {"stream", true},
                                  {"grove", {{"speculation", speculation}}}});
    ASSERT_FALSE(data.empty());
    EXPECT_EQ(data.back(), "[DONE]");
    EXPECT_EQ(StreamText(data, false, &finish), greedy);
    EXPECT_EQ(finish, body.at("choices").at(0).at("finish_reason"));
  }
  // Sampled: the same seed gives the same text, with speculation or without (target-sample).
  const std::string sampled = server.Alone(prompt, 40, 0.9f, 1234, 0.95f);
  for (const char* speculation : {"auto", "off"}) {
    int status = 0;
    const json body = PostJson(client, "/v1/completions",
                               {{"prompt", prompt},
                                {"max_tokens", 40},
                                {"temperature", 0.9},
                                {"top_p", 0.95},
                                {"seed", 1234},
                                {"grove", {{"speculation", speculation}}}},
                               &status);
    ASSERT_EQ(status, 200) << body.dump();
    EXPECT_EQ(body.at("choices").at(0).at("text"), sampled) << speculation;
  }

  // Chat, streamed: the first chunk names the role, the deltas make the whole reply, usage on
  // request, then [DONE].
  std::string finish;
  const auto chat =
      StreamPost(server, "/v1/chat/completions",
                 {{"messages", {{{"role", "user"}, {"content", "Tell me about a cat."}}}},
                  {"max_tokens", 24},
                  {"temperature", 0},
                  {"stream", true},
                  {"stream_options", {{"include_usage", true}}}});
  ASSERT_GE(chat.size(), 3u);
  const json first = json::parse(chat.front());
  EXPECT_EQ(first.at("object"), "chat.completion.chunk");
  EXPECT_EQ(first.at("choices").at(0).at("delta").at("role"), "assistant");
  const json summary = json::parse(chat.at(chat.size() - 2));
  EXPECT_TRUE(summary.at("choices").empty());
  EXPECT_GT(summary.at("usage").at("prompt_tokens").get<int>(), 5);
  int status = 0;
  const json whole =
      PostJson(client, "/v1/chat/completions",
               {{"messages", {{{"role", "user"}, {"content", "Tell me about a cat."}}}},
                {"max_tokens", 24},
                {"temperature", 0}},
               &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(whole.at("choices").at(0).at("message").at("content"), StreamText(chat, true, &finish));

  // n choices, and a stop string: the text ends where the stop string would begin.
  const json two =
      PostJson(client, "/v1/completions",
               {{"prompt", prompt}, {"max_tokens", 16}, {"n", 2}, {"seed", 7}}, &status);
  ASSERT_EQ(status, 200);
  ASSERT_EQ(two.at("choices").size(), 2u);
  // At the default temperature each choice draws with its own key: choices that share one would be
  // the same text (a bug the suite once missed).
  EXPECT_NE(two.at("choices").at(0).at("text"), two.at("choices").at(1).at("text")) << two.dump();
  const std::size_t cut = greedy.size() / 2;
  const std::string stop = greedy.substr(cut, 3);
  const json stopped = PostJson(
      client, "/v1/completions",
      {{"prompt", prompt}, {"max_tokens", 48}, {"temperature", 0}, {"stop", stop}}, &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(stopped.at("choices").at(0).at("text"), greedy.substr(0, greedy.find(stop)));
  EXPECT_EQ(stopped.at("choices").at(0).at("finish_reason"), "stop");

  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  for (const char* name : {"grove_requests_total", "grove_generated_tokens_total", "grove_tau",
                           "grove_acceptance_by_depth{depth=\"1\"}", "grove_queue_length",
                           "grove_target_busy_share"}) {
    EXPECT_NE(metrics->body.find(name), std::string::npos) << name;
  }
  // The scheduler's counters: every generation forward verified at least one sequence step, and
  // the rounds' time is split into its parts.
  auto value = [&](const std::string& name) {
    const std::size_t at = metrics->body.find("\n" + name + " ");
    EXPECT_NE(at, std::string::npos) << name;
    return at == std::string::npos ? -1.0 : std::stod(metrics->body.substr(at + name.size() + 2));
  };
  const double forwards = value("grove_target_forwards_total");
  EXPECT_GT(forwards, 0.0);
  EXPECT_GE(value("grove_sequence_steps_total"), forwards);
  // A sequence finishes within its last round, before that round is counted.
  EXPECT_GE(value("grove_rounds_total"), forwards - 1);
  EXPECT_LE(value("grove_rounds_total"), forwards);
  EXPECT_GT(value("grove_round_seconds_total{part=\"forward\"}"), 0.0);
  EXPECT_GE(value("grove_round_seconds_total{part=\"draft_wait\"}"), 0.0);
  EXPECT_GE(value("grove_round_seconds_total{part=\"other\"}"), 0.0);
}

// Every response carries llama-server's timings, consistent with its usage and grove's own
// statistics; with the suffix drafter, a request served before is drafted from its earlier output
// (most of its tokens accepted from drafts the second time), and its text is what plain decoding
// gives every time.
TEST_F(ServerTest, TimingsShowASuffixDrafterLearningFromServedRequests) {
  Server server({.drafter = "suffix"});
  httplib::Client client = server.Client();
  const std::string prompt = "Once upon a time";
  const std::string greedy = server.Alone(prompt, 48, 0.0f, 0);
  std::vector<int64_t> accepted;
  for (int served = 0; served < 3; ++served) {
    int status = 0;
    const json body = PostJson(client, "/v1/completions",
                               {{"prompt", prompt},
                                {"max_tokens", 48},
                                {"temperature", 0},
                                {"grove", {{"speculation", "chain:6"}}}},
                               &status);
    ASSERT_EQ(status, 200) << body.dump();
    EXPECT_EQ(body.at("choices").at(0).at("text"), greedy);
    const json& t = body.at("timings");
    EXPECT_EQ(t.at("prompt_n"), body.at("usage").at("prompt_tokens"));
    EXPECT_EQ(t.at("predicted_n"), body.at("usage").at("completion_tokens"));
    EXPECT_GT(t.at("prompt_ms").get<double>(), 0.0);
    EXPECT_GT(t.at("predicted_ms").get<double>(), 0.0);
    EXPECT_NEAR(t.at("predicted_per_second").get<double>(),
                t.at("predicted_n").get<double>() * 1e3 / t.at("predicted_ms").get<double>(), 1e-6);
    const int64_t steps = body.at("grove").at("steps");
    EXPECT_EQ(t.at("draft_n_accepted").get<int64_t>(), t.at("predicted_n").get<int64_t>() - steps);
    EXPECT_LE(t.at("draft_n_accepted").get<int64_t>(), t.at("draft_n").get<int64_t>());
    accepted.push_back(t.at("draft_n_accepted"));
  }
  EXPECT_GT(accepted[1], accepted[0]);
  EXPECT_GE(accepted[1], 48 * 3 / 4) << "the second time, most tokens come from the drafts";
  EXPECT_GE(accepted[2], accepted[1]);
}

// timings as llama-server counts them: prompt_ms runs to the first token (prefill and the first
// step, which finishes the prompt), predicted_ms from there to the end, both wall clock of the
// whole request: with n = 2 choices side by side they were each choice's summed (twice the time).
// Only what holds whatever the machine's speed is checked (timings never gate a test): the two
// are parts of the request's time, one after the other.
TEST_F(ServerTest, TimingsAreTheRequestsWallClockAsLlamaServerCountsThem) {
  Server server({.parallel = 2});
  httplib::Client client = server.Client();
  for (int n : {1, 2}) {
    SCOPED_TRACE(n);
    int status = 0;
    const auto start = std::chrono::steady_clock::now();
    const json body = PostJson(client, "/v1/completions",
                               {{"prompt", "Once upon a time"},
                                {"max_tokens", 40},
                                {"temperature", 0},
                                {"n", n},
                                {"grove", {{"speculation", "off"}}}},
                               &status);
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ASSERT_EQ(status, 200) << body.dump();
    const json& t = body.at("timings");
    EXPECT_EQ(t.at("prompt_n"), body.at("usage").at("prompt_tokens"));
    EXPECT_EQ(t.at("predicted_n"), body.at("usage").at("completion_tokens"));
    EXPECT_GT(t.at("prompt_ms").get<double>(), 0.0);
    EXPECT_GT(t.at("predicted_ms").get<double>(), 0.0);
    // The two are parts of the request's time, one after the other.
    EXPECT_LE(t.at("prompt_ms").get<double>() + t.at("predicted_ms").get<double>(), wall_ms);
  }
}

// --record keeps each answered choice (prompt and output) as a document the trainer reads.
TEST_F(ServerTest, RecordKeepsWhatWasAnsweredAsACorpus) {
  const std::string dir = testing::TempPath("served-record");
  std::filesystem::remove_all(dir);
  {
    Server server({.record_dir = dir});
    httplib::Client client = server.Client();
    int status = 0;
    const json one =
        PostJson(client, "/v1/completions",
                 {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 0}}, &status);
    ASSERT_EQ(status, 200) << one.dump();
    const json two = PostJson(
        client, "/v1/completions",
        {{"prompt", "Sara had a red ball."}, {"max_tokens", 8}, {"n", 2}, {"seed", 3}}, &status);
    ASSERT_EQ(status, 200) << two.dump();
    const std::string text = ReadCorpusFile(dir, kCorpusTrainFile);
    const std::vector<std::string_view> docs = SplitDocuments(text);
    ASSERT_EQ(docs.size(), 3u) << text;
    const std::string first =
        "Once upon a time" + one.at("choices").at(0).at("text").get<std::string>();
    EXPECT_NE(text.find(first.substr(0, first.find('\n'))), std::string::npos) << text;
    for (const json& c : two.at("choices")) {
      const std::string t = "Sara had a red ball." + c.at("text").get<std::string>();
      EXPECT_NE(text.find(t.substr(0, t.find('\n'))), std::string::npos) << t;
    }
  }
  std::filesystem::remove_all(dir);
}

// POST /admin/drafter swaps the drafter while a request is under way: that request finishes
// with the drafter it started with and its text is plain decoding's; later ones use the new
// one (and give the same text); one that cannot serve this target is refused with its reason while
// the old drafter serves on; only the admin key opens the endpoint.
TEST_F(ServerTest, TheDrafterIsSwappedWhileServingAndNothingIsLost) {
  Server server({.admin_key = "admin-key"});
  httplib::Client client = server.Client();
  const httplib::Headers admin = {{"Authorization", "Bearer admin-key"}};
  auto swap = [&](const std::string& draft, int* status) {
    auto res =
        client.Post("/admin/drafter", admin, json{{"draft", draft}}.dump(), "application/json");
    EXPECT_TRUE(res);
    if (!res) return json();
    *status = res->status;
    return json::parse(res->body);
  };
  // No key, or a wrong one, does not open the admin endpoints.
  EXPECT_EQ(client.Get("/admin/drafter")->status, 401);
  EXPECT_EQ(client.Get("/admin/drafter", {{"Authorization", "Bearer admin-kex"}})->status, 401);
  auto current = client.Get("/admin/drafter", admin);
  ASSERT_EQ(current->status, 200);
  EXPECT_EQ(json::parse(current->body).at("draft"), "draft-model");

  const std::string prompt = "Once upon a time";
  const std::string greedy = server.Alone(prompt, 160, 0.0f, 0);
  const json request = {
      {"prompt", prompt}, {"max_tokens", 160}, {"temperature", 0}, {"stream", true}};
  // Swapped as soon as the stream's first piece arrives, the request still generating.
  bool swapped = false;
  std::vector<std::string> data;
  data = StreamPost(server, "/v1/completions", request, [&](const std::string&) {
    if (!swapped) {
      int status = 0;
      const json body = swap("suffix", &status);
      EXPECT_EQ(status, 200) << body.dump();
      EXPECT_EQ(body.at("draft"), "suffix");
      swapped = true;
      EXPECT_EQ(server.service().Running().size(), 1u) << "the request is still under way";
    }
    return true;
  });
  ASSERT_TRUE(swapped);
  EXPECT_EQ(StreamText(data, false, nullptr), greedy);
  ASSERT_GE(data.size(), 2u);
  const json last = json::parse(data[data.size() - 2]);  // the chunk before [DONE]
  EXPECT_EQ(last.at("grove").at("drafter"), "draft-model") << "finished with the drafter it had";

  auto complete = [&](const std::string& drafter) {
    int status = 0;
    const json body =
        PostJson(client, "/v1/completions",
                 {{"prompt", prompt}, {"max_tokens", 160}, {"temperature", 0}}, &status);
    ASSERT_EQ(status, 200) << body.dump();
    EXPECT_EQ(body.at("choices").at(0).at("text"), greedy) << drafter;
    EXPECT_EQ(body.at("grove").at("drafter"), drafter);
  };
  complete("suffix");
  // The suffix drafter kept what was served: the same request now drafts from it.
  {
    int status = 0;
    const json body =
        PostJson(client, "/v1/completions",
                 {{"prompt", prompt}, {"max_tokens", 160}, {"temperature", 0}}, &status);
    EXPECT_GE(body.at("timings").at("draft_n_accepted").get<int64_t>(), 160 / 2);
  }
  int status = 0;
  EXPECT_EQ(swap(kDraft + "+suffix", &status).at("draft"), "draft-model+suffix");
  EXPECT_EQ(status, 200);
  complete("draft-model+suffix");

  // Refused, the old drafter serving on: a vocabulary of another size, a file that is not there,
  // a body without a name.
  RandomModelSpec other = testing::TinySpec();
  other.n_vocab = 300;
  const std::string other_path = testing::TempPath("other-vocabulary.gguf");
  RandomModelWriter(other).WriteFile(other_path);
  // The client is told the field and the name it sent, never what the file holds (whether it
  // exists, its first bytes, its vocabulary): the reason goes to the server's log.
  std::mutex log_mutex;
  std::string log;
  SetLogCallback([&](LogLevel, std::string_view message) {
    std::lock_guard lock(log_mutex);
    log.append(message).append("\n");
  });
  const std::string not_gguf = testing::TempPath("secret.txt");
  std::ofstream(not_gguf) << "SECRET-FIRST-BYTES of a file that is not a model";
  std::vector<std::string> messages;
  for (const std::string& name : {other_path, std::string("/nonexistent/draft.gguf"), not_gguf}) {
    SCOPED_TRACE(name);
    const json refused = swap(name, &status);
    EXPECT_EQ(status, 400);
    EXPECT_EQ(refused.at("error").at("param"), "draft") << refused.dump();
    std::string message = refused.at("error").at("message");
    const std::size_t at = message.find(name);
    ASSERT_NE(at, std::string::npos) << message;
    messages.push_back(message.erase(at, name.size()));
  }
  EXPECT_EQ(messages[0], messages[1]) << "an existing file is refused as a missing one is";
  EXPECT_EQ(messages[1], messages[2]);
  {
    std::lock_guard lock(log_mutex);
    EXPECT_NE(log.find("vocabularies differ"), std::string::npos) << log;
    EXPECT_NE(log.find("/nonexistent/draft.gguf"), std::string::npos) << log;
  }
  SetLogCallback({});
  std::remove(not_gguf.c_str());
  auto no_name = client.Post("/admin/drafter", admin, "{}", "application/json");
  EXPECT_EQ(no_name->status, 400);
  complete("draft-model+suffix");
  EXPECT_EQ(json::parse(client.Get("/admin/drafter", admin)->body).at("draft"),
            "draft-model+suffix");
  const std::string metrics = client.Get("/metrics")->body;
  EXPECT_NE(metrics.find("grove_drafter_swaps_total 2\n"), std::string::npos) << metrics;
}

// A swap keeps what the suffix drafter learnt: a server drafting with suffix answers a request,
// swaps to a new suffix drafter (and then to a mixture holding one), and the same request is
// drafted from the earlier answer each time; a fresh suffix drafter drafts little of it.
TEST_F(ServerTest, ASwapKeepsWhatTheSuffixDrafterLearnt) {
  Server server({.drafter = "suffix", .admin_key = "admin"});
  httplib::Client client = server.Client();
  const json request = {{"prompt", "Sara had a red ball."},
                        {"max_tokens", 80},
                        {"temperature", 0},
                        {"grove", {{"speculation", "chain:6"}}}};
  auto accepted = [&] {
    int status = 0;
    const json body = PostJson(client, "/v1/completions", request, &status);
    EXPECT_EQ(status, 200) << body.dump();
    return body.at("timings").at("draft_n_accepted").get<int64_t>();
  };
  const int64_t fresh = accepted();
  EXPECT_LT(fresh, 80 / 2) << "a fresh store has not seen the answer";
  for (const std::string& drafter : {std::string("suffix"), kDraft + "+suffix"}) {
    SCOPED_TRACE(drafter);
    auto swapped = client.Post("/admin/drafter", {{"Authorization", "Bearer admin"}},
                               json{{"draft", drafter}}.dump(), "application/json");
    ASSERT_TRUE(swapped);
    ASSERT_EQ(swapped->status, 200) << swapped->body;
    EXPECT_GE(accepted(), 80 * 3 / 4) << "drafted from the answer served before the swap";
  }
}

// A drafter that reads the target's features changes how sequences start: swapping one in for a
// draft model (or back) is refused, the draft model serving on.
TEST(DrafterSwap, AFeatureDrafterDoesNotReplaceADraftModel) {
  const std::string models = GROVE_MODELS_DIR;
  GROVE_SKIP_IF_MISSING(models + "/grove-base-feature.gguf");
  auto target =
      Model::Load(models + "/grove-base-target.gguf", {.n_threads = 1, .n_ctx = 64, .n_seq = 1});
  auto draft = Model::Load(models + "/grove-base-draft.gguf", {.n_threads = 1, .n_ctx = 16});
  CompletionService service(*target,
                            DraftSource::FromModel(draft->parameters(), *target->parameters()),
                            {.spec = "chain:2"});
  try {
    service.SwapDrafter(models + "/grove-base-feature.gguf");
    ADD_FAILURE() << "swapped";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("reads the target's features"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(service.drafter_name(), "draft-model");
  EXPECT_EQ(service.SwapDrafter("ngram"), "ngram");
  EXPECT_EQ(service.drafter_name(), "ngram");
}

// Without --admin-key the admin endpoints are off, whatever key a client sends.
TEST_F(ServerTest, TheAdminEndpointsAreOffWithoutAnAdminKey) {
  Server server({.parallel = 1, .max_waiting = 4});
  httplib::Client client = server.Client();
  auto res = client.Post("/admin/drafter", {{"Authorization", "Bearer "}},
                         json{{"draft", "ngram"}}.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  EXPECT_NE(res->body.find("--admin-key"), std::string::npos) << res->body;
  EXPECT_EQ(client.Get("/admin/drafter")->status, 403);
}

// With --api-key every endpoint that renders, runs or tells about requests needs the key
// (/apply-template renders with the model's template; /metrics counts the clients' traffic): only
// /health and the tree view's static page answer without it. The admin key cannot be the API key.
TEST_F(ServerTest, EveryEndpointThatRendersOrRunsNeedsTheApiKey) {
  Server server({.parallel = 1, .max_waiting = 4, .api_key = "sesame"});
  httplib::Client client = server.Client();
  const httplib::Headers auth{{"Authorization", "Bearer sesame"}};
  const std::string chat = R"({"messages": [{"role": "user", "content": "Hi"}]})";
  for (const char* path : {"/apply-template", "/v1/chat/completions", "/v1/completions"}) {
    SCOPED_TRACE(path);
    auto res = client.Post(path, chat, "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 401);
    EXPECT_EQ(json::parse(res->body).at("error").at("type"), "authentication_error");
  }
  for (const char* path : {"/metrics", "/v1/models", "/v1/requests", "/v1/steps?id=next"}) {
    SCOPED_TRACE(path);
    EXPECT_EQ(client.Get(path)->status, 401);
  }
  EXPECT_EQ(client.Get("/health")->status, 200);
  EXPECT_EQ(client.Get("/")->status, 200);
  // ?key= is for the page's EventSource, which cannot send headers: the step feed alone takes it.
  EXPECT_EQ(client.Get("/v1/models?key=sesame")->status, 401);
  EXPECT_EQ(client.Post("/apply-template?key=sesame", chat, "application/json")->status, 401);
  auto rendered = client.Post("/apply-template", auth, chat, "application/json");
  EXPECT_EQ(rendered->status, 200) << rendered->body;
  EXPECT_EQ(client.Get("/metrics", auth)->status, 200);
  EXPECT_THROW(Server({.api_key = "same", .admin_key = "same"}), Error);
}

// /v1/requests lists every running request's id and tree; the start of its prompt only to the
// operator's admin key, on a server with a key or without (a prompt is its client's).
TEST_F(ServerTest, TheRunningRequestsShowNoClientAnothersPrompt) {
  for (const std::string api_key : {"", "sesame"}) {
    SCOPED_TRACE(api_key);
    Server server({.parallel = 1, .max_waiting = 4, .api_key = api_key, .admin_key = "admin"});
    httplib::Client client = server.Client();
    json listed, listed_to_admin;
    StreamPost(
        server, "/v1/completions",
        {{"prompt", "A private prompt"}, {"max_tokens", 40}, {"stream", true}},
        [&](const std::string&) {
          if (listed.is_null()) {
            httplib::Headers auth;
            if (!api_key.empty()) auth.emplace("Authorization", "Bearer " + api_key);
            listed = json::parse(client.Get("/v1/requests", auth)->body);
            listed_to_admin =
                json::parse(client.Get("/v1/requests", {{"Authorization", "Bearer admin"}})->body);
          }
          return true;
        },
        api_key);
    ASSERT_EQ(listed.at("data").size(), 1u) << listed.dump();
    EXPECT_TRUE(listed.at("data").at(0).contains("tree"));
    EXPECT_FALSE(listed.at("data").at(0).contains("prompt")) << listed.dump();
    if (api_key.empty()) {  // the admin key is not the API key: it opens only /admin/ then
      EXPECT_EQ(listed_to_admin.at("data").at(0).at("prompt"), "A private prompt");
    }
  }
}

TEST_F(ServerTest, BadInputGetsAnOpenAiErrorObject) {
  Server server({.parallel = 1, .max_waiting = 4, .api_key = "sesame"});
  httplib::Client client = server.Client();
  const httplib::Headers auth{{"Authorization", "Bearer sesame"}};
  struct Case {
    std::string path;
    std::string body;
    int status;
    std::string message;  // a part of error.message
  };
  const std::string huge(70 << 10, 'a');
  // Arrays nested far deeper than any request is: refused while parsing, before a recursive walk
  // (a dump for the error message, the chat copy, the template's conversion) could overflow the
  // stack (base/bounded_json.h), in any field and on every endpoint that reads a body.
  const std::string deep = std::string(20000, '[') + std::string(20000, ']');
  const std::vector<Case> cases = {
      {"/v1/completions", "{not json", 400, "not valid JSON"},
      {"/v1/completions", R"({"prompt": "hi", "max_tokens": )" + deep + "}", 400,
       "nesting deeper than 128 levels"},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "hi", "extra": )" + deep + "}]}", 400,
       "nesting deeper than 128 levels"},
      {"/apply-template", R"({"messages": )" + deep + "}", 400, "nesting deeper than 128 levels"},
      // Bytes that are not UTF-8, quoted back in the error (its dump once threw: a 500).
      {"/v1/completions", "{\"prompt\": \"hi \xff\xfe\", \"max_tokens\": 2}", 400,
       "not valid JSON"},
      {"/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"\xc3\"}]}", 400,
       "not valid JSON"},
      // top_k and min_p are read with the command line's ranges (top_k was ignored).
      {"/v1/completions", R"({"prompt": "hi", "top_k": -5})", 400, "top_k"},
      {"/v1/completions", R"({"prompt": "hi", "top_k": 2.5})", 400, "top_k"},
      {"/v1/completions", R"({"prompt": "hi", "min_p": 1.5})", 400, "min_p"},
      {"/v1/completions", "[1, 2]", 400, ""},
      {"/v1/completions", R"({"prompt": "hi", "max_tokens": "ten"})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt": "hi", "max_tokens": 0})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt": "hi", "max_tokens": 1000000})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt": "hi", "temperature": 3})", 400, "temperature"},
      {"/v1/completions", R"({"max_tokens": 4})", 400, "prompt"},
      {"/v1/completions", R"({"prompt": "hi", "grove": {"speculation": "tree:9"}})", 400, ""},
      {"/v1/completions", R"({"prompt": "hi", "grove": {"speculation": "sequoia:400"}})", 400, ""},
      // A client may not have the server read a file and tell of it.
      {"/v1/completions", R"({"prompt": "hi", "grove": {"speculation": "file:/etc/hostname"}})",
       400, "tree files are not read"},
      {"/v1/completions", R"({"prompt": ")" + std::string(3000, 'x') + R"("})", 400,
       "context holds"},
      {"/v1/chat/completions", R"({"messages": [{"role": "robot", "content": "hi"}]})", 400,
       "role"},
      {"/v1/completions", R"({"prompt": ")" + huge + R"("})", 413, "too large"},
      {"/v1/nothing", "{}", 404, "no route"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.substr(0, 80));
    auto res = client.Post(c.path, auth, c.body, "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, c.status);
    const json body = json::parse(res->body, nullptr, false);
    ASSERT_FALSE(body.is_discarded()) << res->body;
    ASSERT_TRUE(body.contains("error")) << res->body;
    EXPECT_TRUE(body.at("error").at("type").is_string());
    EXPECT_NE(body.at("error").at("message").get<std::string>().find(c.message), std::string::npos)
        << res->body;
  }
  // Without the key: 401; /health needs none; the server still serves afterwards.
  auto denied = client.Post("/v1/completions", R"({"prompt": "hi"})", "application/json");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 401);
  EXPECT_EQ(json::parse(denied->body).at("error").at("type"), "authentication_error");
  auto ok = client.Post("/v1/completions", auth, R"({"prompt": "hi", "max_tokens": 4})",
                        "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(client.Get("/health")->status, 200);
}

TEST_F(ServerTest, AFullQueueAnswers503AndADisconnectFreesTheSequence) {
  Server server({.parallel = 1, .max_waiting = 1});
  // A long stream holds the only slot; read until its first token, so it is admitted.
  std::atomic<bool> reading{true};
  std::atomic<int> chunks{0};
  std::thread long_stream([&] {
    StreamPost(server, "/v1/completions",
               {{"prompt", "Once upon a time"},
                {"max_tokens", 230},
                {"temperature", 0.8},
                {"stream", true},
                {"grove", {{"speculation", "off"}}}},
               [&](const std::string&) {
                 ++chunks;
                 return reading.load();
               });
  });
  while (chunks == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  // One more waits in the queue; the next is refused.
  httplib::Client queued_client = server.Client();
  std::thread queued([&] {
    auto res = queued_client.Post("/v1/completions", R"({"prompt": "A dog", "max_tokens": 4})",
                                  "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
  });
  httplib::Client client = server.Client();
  for (int tries = 0;; ++tries) {
    auto metrics = client.Get("/metrics");
    ASSERT_TRUE(metrics);
    if (metrics->body.find("grove_queue_length 1\n") != std::string::npos) break;
    ASSERT_LT(tries, 2000) << "the second request never queued";
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  auto refused =
      client.Post("/v1/completions", R"({"prompt": "A cat", "max_tokens": 4})", "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(refused->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(refused->body).at("error").at("type"), "server_error");

  // The long stream's client goes away: its sequence stops at its next step, the queued request
  // runs, and the slot is free again long before 230 tokens could have been generated.
  reading = false;
  long_stream.join();
  queued.join();
  for (int tries = 0; server.target().kv().in_use() != 0; ++tries) {
    ASSERT_LT(tries, 2000) << "the slot was not freed";
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_LT(chunks.load(), 200);
  EXPECT_EQ(client.Get("/health")->status, 200);
}

// Generated tokens so far, from /metrics.
double GeneratedTokens(const Server& server) {
  auto metrics = server.Client().Get("/metrics");
  const std::string key = "\ngrove_generated_tokens_total ";
  const std::size_t at = metrics->body.find(key);
  return at == std::string::npos ? -1.0 : std::stod(metrics->body.substr(at + key.size()));
}

// Sends a request on a raw connection, waits until its sequences generate, and closes it.
void PostAndLeave(Server& server, const std::string& body) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  for (int tries = 0; server.target().kv().in_use() == 0; ++tries) {
    ASSERT_LT(tries, 5000) << "the request was never admitted";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  close(fd);
}

// A non-streamed request whose client leaves is cancelled at once, not at the next keep-alive
// write (a second later, by default): the server looks at the connection at every step. Measured
// against the same request (same seed) answered to a patient client: the one left generates a
// small part of its tokens, where without the look it runs to its end (release build: the whole
// answer takes less than the keep-alive) or past the keep-alive (slower builds).
TEST_F(ServerTest, ANonStreamedRequestIsCancelledAsSoonAsItsClientLeaves) {
  Server server({.parallel = 4, .max_waiting = 4});  // keep-alive 1000 ms
  const std::string body =
      json{{"prompt", "Once upon a time"}, {"max_tokens", 240}, {"n", 4},
           {"temperature", 0.8},           {"seed", 7},         {"grove", {{"speculation", "off"}}}}
          .dump();
  auto whole = server.Client().Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  const int full = json::parse(whole->body).at("usage").at("completion_tokens").get<int>();
  ASSERT_GT(full, 40) << "too short an answer to tell a cancelled one from it";

  const double before = GeneratedTokens(server);
  PostAndLeave(server, body);
  const auto left = std::chrono::steady_clock::now();
  for (int tries = 0; server.target().kv().in_use() != 0; ++tries) {
    ASSERT_LT(tries, 5000) << "the sequences were not freed";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - left).count();
  EXPECT_LT(seconds, 0.9) << "freed only by a keep-alive write";
  EXPECT_LT(GeneratedTokens(server) - before, full / 2.0)
      << "of " << full << " tokens; the request ran on after its client left";
}

// A non-streamed request whose client gives up: the server's keep-alive write fails, and the
// request's sequences stop long before their max_tokens. One that finishes is answered whole.
TEST_F(ServerTest, ANonStreamedRequestWhoseClientLeavesIsCancelled) {
  Server server({.parallel = 4, .max_waiting = 4, .keep_alive_ms = 5});
  const std::string body = json{{"prompt", "Once upon a time"},
                                {"max_tokens", 240},
                                {"n", 4},
                                {"temperature", 0.8},
                                {"grove", {{"speculation", "off"}}}}
                               .dump();
  PostAndLeave(server, body);
  for (int tries = 0; server.target().kv().in_use() != 0; ++tries) {
    ASSERT_LT(tries, 5000) << "the sequences were not freed";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_LT(GeneratedTokens(server), 4 * 240 * 0.8) << "the sequences ran (almost) to the end";

  // A patient client of the same kind of request gets its whole answer, status and all.
  auto res = server.Client().Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json answer = json::parse(res->body);
  ASSERT_EQ(answer.at("choices").size(), 4u);
  EXPECT_EQ(answer.at("usage").at("completion_tokens").get<int>() > 0, true);
}

// The live view's feed: subscribed before a request starts (id=next), it gets every step's tree
// with its accepted path and emitted text, which together make the response; then "done".
// A mixture's steps also say which drafters proposed each node, and why they took part.
void CheckStepFeed(const std::string& drafter) {
  Server server({.drafter = drafter});
  const bool mixture = drafter == "draft-model+suffix";
  int by_draft_model = 0;
  std::string events;
  std::atomic<bool> subscribed{false};
  std::thread watcher([&] {
    httplib::Client client = server.Client();
    client.Get("/v1/steps?id=next", [&](const char* data, size_t n) {
      subscribed = true;
      events.append(data, n);
      return events.find("event: done") == std::string::npos;
    });
  });
  // The first bytes (a keep-alive after a second, or a step) say the subscription is in place;
  // the subscription itself is made before the handler sends anything, so wait for the headers.
  httplib::Client client = server.Client();
  for (int tries = 0; !subscribed && tries < 200; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  int status = 0;
  const json body =
      PostJson(client, "/v1/completions",
               {{"prompt", "Once upon a time"}, {"max_tokens", 30}, {"temperature", 0}}, &status);
  ASSERT_EQ(status, 200);
  watcher.join();
  std::string emitted;
  int steps = 0;
  for (std::size_t at = 0; (at = events.find("event: step\ndata: ", at)) != std::string::npos;) {
    at += 18;
    const json step = json::parse(events.substr(at, events.find("\n\n", at) - at));
    ++steps;
    EXPECT_EQ(step.at("step").get<int>(), steps);
    const json& nodes = step.at("nodes");
    ASSERT_FALSE(nodes.empty());
    std::string path;
    int parent = -1, depth = 1;
    for (const json& a : step.at("accepted")) {
      const json& node = nodes.at(a.get<int>());
      EXPECT_EQ(node.at("parent").get<int>(), parent);
      EXPECT_EQ(node.at("depth").get<int>(), depth++);
      parent = a.get<int>();
      path += node.at("token").get<std::string>();
    }
    const std::string text = step.at("emitted");
    // The accepted tokens, then the next one (the last step may stop short at max_tokens).
    const std::size_t common = std::min(path.size(), text.size());
    EXPECT_EQ(text.substr(0, common), path.substr(0, common));
    emitted += text;
    EXPECT_GE(step.at("tau").get<double>(), 1.0);
    EXPECT_EQ(step.contains("why"), mixture);
    for (const json& node : nodes) {
      EXPECT_EQ(node.contains("drafters"), mixture);
      if (mixture)
        by_draft_model += node.at("drafters").get<std::string>().find("draft-model") == 0;
    }
  }
  if (mixture) {
    EXPECT_GT(by_draft_model, 0);
  }
  EXPECT_EQ(steps, body.at("grove").at("steps").get<int>());
  EXPECT_EQ(emitted, body.at("choices").at(0).at("text"));
  EXPECT_NE(events.find("event: done"), std::string::npos);
  auto page = client.Get("/");
  ASSERT_TRUE(page);
  EXPECT_NE(page->body.find("/v1/steps?id="), std::string::npos);
  EXPECT_EQ(client.Get("/v1/steps?id=cmpl-999")->status, 404);
}

TEST_F(ServerTest, StepFeedShowsEveryStepsTreeAndAcceptedPath) {
  for (const std::string drafter : {"draft-model", "draft-model+suffix"}) {
    SCOPED_TRACE(drafter);
    CheckStepFeed(drafter);
  }
}

// The tree view in headless Chromium: the page starts a request, draws every step's tree, and
// the DOM holds drafted nodes (named by the drafters that proposed them), an accepted path and
// rejected branches; a screenshot is kept under
// build/ (a CI artifact).
TEST_F(ServerTest, TreeViewRendersInHeadlessChromium) {
  if (std::system("command -v chromium > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh installs it)";
  }
  // A mixture: each node also names the drafters that proposed it.
  Server server({.drafter = "draft-model+suffix"});
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) +
                          "/?autostart=1&max_tokens=40&spec=kconfig:2,2,1";
  // Virtual time runs the page's scripts until its request and step feed are done.
  const std::string chromium =
      "timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage "
      "--virtual-time-budget=20000 --window-size=1200,900 ";
  std::string dom;
  {
    FILE* pipe = popen((chromium + "--dump-dom '" + url + "' 2>/dev/null").c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    char buffer[4096];
    for (std::size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) dom.append(buffer, n);
    pclose(pipe);
  }
  auto count = [&](const std::string& what) {
    int n = 0;
    for (std::size_t at = 0; (at = dom.find(what, at)) != std::string::npos; at += what.size()) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(count("data-done=\"1\""), 1) << dom.substr(0, 2000);
  EXPECT_GE(count("class=\"node accepted"), 2);    // the root and at least one accepted node
  EXPECT_GE(count("class=\"node rejected\""), 1);  // one path of a branching tree at most
  EXPECT_GE(count("class=\"bar\""), 1);            // acceptance by depth
  EXPECT_GE(count("<title>proposed by draft-model"), 1);
  EXPECT_EQ(count("every drafter") + count("skipped: suffix"), 1) << "the status line says why";
  const std::string screenshot = std::string(GROVE_BUILD_DIR) + "/tree-view.png";
  std::remove(screenshot.c_str());
  ASSERT_EQ(
      std::system(
          (chromium + "--screenshot=" + screenshot + " '" + url + "' > /dev/null 2>&1").c_str()),
      0);
  EXPECT_TRUE(testing::FileExists(screenshot)) << screenshot;
}

// Many clients at once, mixed lengths, a share of them cancelling: every completed response
// equals the same request alone, none is lost, and the server answers afterwards.
// Under AddressSanitizer freed memory sits in a quarantine instead of being reused, so resident
// memory grows by design (25 MiB over a wave here); LeakSanitizer checks for leaks in that build.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// Resident memory of this process (server and clients), from /proc/self/status.
int64_t ResidentKiB() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

// Two waves of 64 streaming clients of mixed lengths, every fifth cancelling after its second
// event: every completed response equals the request run alone, nothing is lost, every slot comes
// back, and the second wave leaves resident memory where the first left it (nothing held per
// request).
TEST_F(ServerTest, ConcurrentStreamingClientsLoseNothing) {
  constexpr int kClients = 64;
  Server server({.parallel = 8, .max_waiting = kClients});
  const std::vector<std::string> prompts = {"Once upon a time", "Tom has 5 apples. He",
                                            "The little bird", "Input: 4 9 10 13\n"};
  // What each (prompt, length) gives alone, greedy.
  auto length_of = [](int i) { return 8 + (i * 7) % 40; };
  std::vector<std::string> expected(kClients);
  for (int i = 0; i < kClients; ++i) {
    expected[i] = server.Alone(prompts[i % prompts.size()], length_of(i), 0.0f, 0);
  }
  auto wave = [&] {
    std::vector<std::string> got(kClients);
    std::vector<int> done(kClients, 0);
    std::vector<std::thread> clients;
    for (int i = 0; i < kClients; ++i) {
      clients.emplace_back([&, i] {
        const bool cancels = i % 5 == 4;
        int seen = 0;
        const auto data = StreamPost(server, "/v1/completions",
                                     {{"prompt", prompts[i % prompts.size()]},
                                      {"max_tokens", length_of(i)},
                                      {"temperature", 0},
                                      {"stream", true}},
                                     [&](const std::string&) { return !(cancels && ++seen == 2); });
        if (cancels) return;
        got[i] = StreamText(data, false, nullptr);
        done[i] = !data.empty() && data.back() == "[DONE]";
      });
    }
    for (std::thread& t : clients) t.join();
    for (int i = 0; i < kClients; ++i) {
      if (i % 5 == 4) continue;
      EXPECT_TRUE(done[i]) << "client " << i;
      EXPECT_EQ(got[i], expected[i]) << "client " << i;
    }
    for (int tries = 0; server.target().kv().in_use() != 0; ++tries) {
      ASSERT_LT(tries, 2000) << "slots still held after every client finished";
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  };
  wave();
  const int64_t after_first = ResidentKiB();
  wave();
  const int64_t after_second = ResidentKiB();
  ASSERT_GT(after_first, 0);
  if (!kAddressSanitizer) {
    EXPECT_LE(after_second - after_first, 16 * 1024)
        << "resident memory grew from " << after_first << " KiB to " << after_second << " KiB";
  }
  httplib::Client client = server.Client();
  EXPECT_EQ(client.Get("/health")->status, 200);
}

// What a raw connection got back: the first response's status and body, and how long it took.
struct RawAnswer {
  int status = 0;
  std::string body;
  double seconds = 0.0;
};

// Sends `head` (the request line and headers; with "Connection: close" the server closes after its
// answer, without it only when it refuses the body), then `body_bytes`
// of `piece` over and over (each piece a chunk of its own when `chunked`), from a thread of its
// own while this one reads the first answer. The sending stops at the first
// failed write: a server that refuses the body closes the connection. Without a Content-Length
// and not chunked, the body ends where the sending does.
RawAnswer PostRaw(int port, const std::string& head, const std::string& piece, int64_t body_bytes,
                  bool chunked) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  RawAnswer answer;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return answer;
  }
  timeval timeout{.tv_sec = 60, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  const auto start = std::chrono::steady_clock::now();
  std::thread writer([&] {
    auto send_all = [&](const std::string& text) {
      for (std::size_t at = 0; at < text.size();) {
        const ssize_t n = ::send(fd, text.data() + at, text.size() - at, MSG_NOSIGNAL);
        if (n <= 0) return false;
        at += static_cast<std::size_t>(n);
      }
      return true;
    };
    if (!send_all(head)) return;
    char size_line[32];
    std::snprintf(size_line, sizeof(size_line), "%zx\r\n", piece.size());
    const std::string chunk = chunked ? size_line + piece + "\r\n" : piece;
    for (int64_t sent = 0; sent < body_bytes; sent += static_cast<int64_t>(piece.size())) {
      if (!send_all(chunk)) return;
    }
    if (chunked) send_all("0\r\n\r\n");
    // A body without a length ends where the client stops sending (elsewhere a half-closed
    // connection is a client that left, which cpp-httplib does not answer).
    if (body_bytes > 0 && !chunked && head.find("Content-Length") == std::string::npos) {
      ::shutdown(fd, SHUT_WR);
    }
  });
  std::string received;
  char buffer[1 << 14];
  // Until the first response is whole (its Content-Length) or the server closes.
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0;) {
    received.append(buffer, n);
    const std::size_t end = received.find("\r\n\r\n");
    const std::size_t length = received.find("Content-Length: ");
    if (end != std::string::npos && length != std::string::npos && length < end &&
        received.size() >= end + 4 + std::stoul(received.substr(length + 16))) {
      break;
    }
  }
  answer.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::shutdown(fd, SHUT_RDWR);  // the writer's next send fails, if it is still sending
  writer.join();
  ::close(fd);
  if (received.rfind("HTTP/1.1 ", 0) == 0) answer.status = std::atoi(received.c_str() + 9);
  const std::size_t body_at = received.find("\r\n\r\n");
  if (body_at != std::string::npos) answer.body = received.substr(body_at + 4);
  return answer;
}

// gzip of `text` (zlib's deflate with the gzip wrapper).
std::string Gzip(const std::string& text) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY),
            Z_OK);
  std::string out(deflateBound(&zs, text.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// The body limit (64 KiB here, 1 MiB by default) holds however the body is sent: chunked, without
// a length, or compressed; past it the answer is 413 with OpenAI's error object, at once and
// without holding the body (a 100 MB chunked upload was read whole: 2.4 GB resident). A body
// within the limit is served whichever way it comes, and the server serves on.
TEST_F(ServerTest, TheBodyLimitHoldsWhateverTheEncoding) {
  Server server({.parallel = 1, .max_waiting = 4});
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: grove\r\n"
      "Content-Type: application/json\r\nConnection: close\r\n";
  const std::string chunked = "Transfer-Encoding: chunked\r\n\r\n";
  const std::string piece = "{\"prompt\": \"" + std::string((64 << 10) - 12, 'a');
  constexpr int64_t kHuge = 100 << 20;
  auto expect_refused = [](const RawAnswer& answer, const char* what) {
    SCOPED_TRACE(what);
    EXPECT_EQ(answer.status, 413) << answer.body.substr(0, 300);
    const json body = json::parse(answer.body, nullptr, false);
    ASSERT_FALSE(body.is_discarded()) << answer.body.substr(0, 300);
    EXPECT_EQ(body.at("error").at("type"), "invalid_request_error");
    EXPECT_NE(body.at("error").at("message").get<std::string>().find("65536 bytes"),
              std::string::npos)
        << answer.body;
    EXPECT_LT(answer.seconds, 10.0);
  };
  const int64_t resident_before = ResidentKiB();
  expect_refused(PostRaw(server.port(), request + chunked, piece, kHuge, true), "chunked");
  expect_refused(
      PostRaw(server.port(), "POST /v1/nothing HTTP/1.1\r\nConnection: close\r\n" + chunked, piece,
              kHuge, true),
      "chunked, to no route");
  expect_refused(PostRaw(server.port(), request + "\r\n", piece, kHuge, false), "no length");
  // A connection the client keeps open is closed after the 413: the rest of the body would be
  // read as the next request.
  expect_refused(
      PostRaw(server.port(), "POST /v1/completions HTTP/1.1\r\nHost: grove\r\n" + chunked, piece,
              kHuge, true),
      "a kept connection");
  // 2 MiB of JSON white space inflate from a few kilobytes.
  const std::string bomb = Gzip("{\"prompt\": \"hi\"" + std::string(2 << 20, ' ') + "}");
  expect_refused(PostRaw(server.port(),
                         request + "Content-Encoding: gzip\r\nContent-Length: " +
                             std::to_string(bomb.size()) + "\r\n\r\n",
                         bomb, static_cast<int64_t>(bomb.size()), false),
                 "gzip");
  if (!kAddressSanitizer) {
    EXPECT_LT(ResidentKiB() - resident_before, 64 << 10) << "KiB more resident after the uploads";
  }
  // The limit is exact: a body of 64 KiB is served, one byte more is refused, in one chunk.
  std::string at_limit = R"({"prompt": "Once upon a time", "max_tokens": 2})";
  at_limit.insert(at_limit.size() - 1, (64 << 10) - at_limit.size(), ' ');
  EXPECT_EQ(PostRaw(server.port(), request + chunked, at_limit, 1, true).status, 200);
  at_limit.insert(at_limit.size() - 1, " ");
  expect_refused(PostRaw(server.port(), request + chunked, at_limit, 1, true), "one byte over");
  // Within the limit, chunked or compressed, a body is served.
  const std::string ok = R"({"prompt": "Once upon a time", "max_tokens": 2})";
  RawAnswer answer = PostRaw(server.port(), request + chunked, ok, 1, true);
  EXPECT_EQ(answer.status, 200) << answer.body;
  const std::string small = Gzip(ok);
  answer = PostRaw(server.port(),
                   request + "Content-Encoding: gzip\r\nContent-Length: " +
                       std::to_string(small.size()) + "\r\n\r\n",
                   small, static_cast<int64_t>(small.size()), false);
  EXPECT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(server.Client().Get("/health")->status, 200);
}

// What cpp-httplib refuses by itself says what is wrong (it said "the request could not be
// handled" for all but 404 and 413).
TEST_F(ServerTest, ARequestThatIsNotHttpIsToldWhatIsWrong) {
  Server server({.parallel = 1, .max_waiting = 4});
  const RawAnswer garbage = PostRaw(server.port(), "HELLO\r\n\r\n", "", 0, false);
  EXPECT_EQ(garbage.status, 400);
  EXPECT_NE(garbage.body.find("not HTTP/1.1"), std::string::npos) << garbage.body;
  const RawAnswer long_line = PostRaw(
      server.port(), "GET /" + std::string(9000, 'a') + " HTTP/1.1\r\nConnection: close\r\n\r\n",
      "", 0, false);
  EXPECT_EQ(long_line.status, 414);
  EXPECT_NE(long_line.body.find("8192 bytes"), std::string::npos) << long_line.body;
}

}  // namespace
}  // namespace grove::serve

namespace grove::serve {
namespace {

// A message the family renderer cannot write (a tool's, for the bundled model's plain format) is
// the client's error, 400, naming the message's role (chat/chat_template.h refuses it).
TEST(ApplyTemplate, ChatWithARoleTheFamilyDoesNotKnowIs400) {
  Server server({.parallel = 1, .max_waiting = 4});
  httplib::Client client = server.Client();
  auto res = client.Post(
      "/apply-template",
      R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "tool", "content": "4"}]})",
      "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  const json body = json::parse(res->body);
  EXPECT_EQ(body.at("error").at("param"), "messages[1].role") << res->body;
  EXPECT_NE(body.at("error").at("message").get<std::string>().find("\"tool\""), std::string::npos)
      << res->body;
}

// POST /apply-template answers llama-server's {"prompt": ...}: the hand-written plain format for
// the bundled model (no template), the model's own Jinja template when it has one, with tools and
// keys in the client's order; a template that raises, or an unknown role, is a 400.
TEST(ApplyTemplate, RendersWithTheModelsOwnTemplateOrTheFallback) {
  const std::string body =
      R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
          "tools": [{"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": 2}}}]})";
  {
    Server server({.parallel = 1, .max_waiting = 4});
    httplib::Client client = server.Client();
    auto res =
        client.Post("/apply-template", R"({"messages": [{"role": "user", "content": "Hi"}]})",
                    "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(json::parse(res->body)["prompt"], "User: Hi\nAssistant:");
  }
  const std::string jinja =
      "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
      "{% if tools %}{{ tools[0].function.parameters | tojson }}\n{% endif %}"
      "{% if messages[0].role != 'system' %}{{ raise_exception('a system message comes first') }}"
      "{% endif %}{% if add_generation_prompt %}<|assistant|>{% endif %}";
  Server server({.parallel = 1, .max_waiting = 4, .chat_template = jinja});
  httplib::Client client = server.Client();
  auto res = client.Post("/apply-template", body, "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["prompt"],
            "<|system|>Be brief.\n<|user|>Hi\n{\"z\": 1, \"a\": 2}\n<|assistant|>");
  res = client.Post("/apply-template", R"({"messages": [{"role": "user", "content": "Hi"}]})",
                    "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("a system message comes first"), std::string::npos) << res->body;
  res = client.Post("/apply-template", R"({"messages": [{"role": "robot", "content": "Hi"}]})",
                    "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  // A chat completion encodes the same prompt and runs.
  res = client.Post(
      "/v1/chat/completions",
      R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "A dog"}],
                        "max_tokens": 4, "temperature": 0})",
      "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
}

// The template renders the messages that were checked: content given as text parts is their text,
// one line a part (as llama-server and vLLM join them), any other part is refused by name; a
// developer message is a system one unless the template names the developer role; and a template
// argument may not replace a variable the request sets (messages, tools, add_generation_prompt).
TEST(ApplyTemplate, TheTemplateSeesTheMessagesThatWereChecked) {
  auto render = [](Server& server, const json& body, int* status) {
    auto res = server.Client().Post("/apply-template", body.dump(), "application/json");
    EXPECT_TRUE(res);
    *status = res ? res->status : 0;
    return res ? json::parse(res->body) : json();
  };
  const json parts = {
      {"role", "user"},
      {"content", {{{"type", "text"}, {"text", "Hello,"}}, {{"type", "text"}, {"text", "you"}}}}};
  const json developer = {{"role", "developer"}, {"content", "Be brief."}};
  int status = 0;
  {
    Server server({.parallel = 1, .max_waiting = 4});  // the plain family renderer
    const json body = render(server, {{"messages", {developer, parts}}}, &status);
    ASSERT_EQ(status, 200) << body.dump();
    EXPECT_EQ(body.at("prompt"), "System: Be brief.\nUser: Hello,\nyou\nAssistant:");
  }
  const std::string jinja = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}";
  Server server({.parallel = 1, .max_waiting = 4, .chat_template = jinja});
  json body = render(server, {{"messages", {developer, parts}}}, &status);
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_EQ(body.at("prompt"), "<|system|>Be brief.\n<|user|>Hello,\nyou\n");
  {
    Server knows({.parallel = 1, .max_waiting = 4, .chat_template = "{# developer #}" + jinja});
    body = render(knows, {{"messages", {developer}}}, &status);
    EXPECT_EQ(body.at("prompt"), "<|developer|>Be brief.\n") << body.dump();
  }
  json image = parts;
  image["content"].push_back({{"type", "image_url"}, {"image_url", {{"url", "x"}}}});
  body = render(server, {{"messages", {image}}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(body.at("error").at("param"), "messages[0].content[2].type") << body.dump();
  for (const char* name : {"messages", "tools", "add_generation_prompt", "bos_token"}) {
    SCOPED_TRACE(name);
    body = render(
        server,
        {{"messages", {parts}}, {"chat_template_kwargs", {{name, json::array({developer})}}}},
        &status);
    EXPECT_EQ(status, 400);
    EXPECT_EQ(body.at("error").at("param"), "chat_template_kwargs") << body.dump();
    EXPECT_NE(body.at("error").at("message").get<std::string>().find(
                  std::string("chat_template_kwargs.") + name),
              std::string::npos)
        << body.dump();
  }
  // A chat completion renders the same: text parts and the same text as a string answer alike.
  auto answer = [&](const json& message) {
    const json request = {{"messages", {message}}, {"max_tokens", 6}, {"temperature", 0}};
    auto res = server.Client().Post("/v1/chat/completions", request.dump(), "application/json");
    EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
    return res ? json::parse(res->body).at("usage").at("prompt_tokens").get<int>() : -1;
  };
  EXPECT_EQ(answer(parts), answer({{"role", "user"}, {"content", "Hello,\nyou"}}));
}

// A template that leaves "<think>" open, as DeepSeek-R1 distills' do (and Qwen3's thinking turn):
// with reasoning_format deepseek, what the model writes comes back as reasoning_content, whole
// and streamed, and is the text plain decoding gives; "none" leaves it in content;
// chat_template_kwargs reach the template (enable_thinking false opens nothing: all content).
TEST(ReasoningContent, AThinkingPromptsTextComesBackAsReasoning) {
  const std::string jinja =
      "{% for m in messages %}{{ m.content }}{% endfor %}{% if add_generation_prompt %}"
      "{% if enable_thinking is defined and not enable_thinking %}, then{% else %} <think>\n"
      "{% endif %}{% endif %}";
  Server server({.parallel = 1, .max_waiting = 4, .chat_template = jinja});
  httplib::Client client = server.Client();
  const json messages = json::array({{{"role", "user"}, {"content", "Once upon a time"}}});
  auto trim = [](std::string s) {
    const auto b = s.find_first_not_of(" \n");
    const auto e = s.find_last_not_of(" \n");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  const std::string thought = server.Alone("Once upon a time <think>\n", 24, 0.0f, 1);
  ASSERT_EQ(thought.find("</think>"), std::string::npos);
  ASSERT_FALSE(trim(thought).empty());

  int status = 0;
  json body = {{"messages", messages}, {"max_tokens", 24}, {"temperature", 0}};
  body["reasoning_format"] = "deepseek";
  json r = PostJson(client, "/v1/chat/completions", body, &status);
  ASSERT_EQ(status, 200) << r.dump();
  const json& message = r["choices"][0]["message"];
  EXPECT_EQ(message["reasoning_content"], trim(thought));
  EXPECT_EQ(message["content"], "");

  body["stream"] = true;
  std::string reasoning, content;
  for (const std::string& d : StreamPost(server, "/v1/chat/completions", body)) {
    if (d == "[DONE]") continue;
    const json chunk = json::parse(d);
    for (const json& c : chunk.at("choices")) {
      if (c["delta"].contains("reasoning_content")) reasoning += c["delta"]["reasoning_content"];
      if (c["delta"].contains("content")) content += c["delta"]["content"];
    }
  }
  EXPECT_EQ(reasoning, trim(thought));
  EXPECT_EQ(content, "");

  body.erase("stream");
  body["reasoning_format"] = "none";
  r = PostJson(client, "/v1/chat/completions", body, &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["choices"][0]["message"]["content"], thought);
  EXPECT_FALSE(r["choices"][0]["message"].contains("reasoning_content"));

  body["reasoning_format"] = "deepseek";
  body["chat_template_kwargs"] = {{"enable_thinking", false}};
  r = PostJson(client, "/v1/chat/completions", body, &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["choices"][0]["message"]["content"],
            server.Alone("Once upon a time, then", 24, 0.0f, 1));
  EXPECT_FALSE(r["choices"][0]["message"].contains("reasoning_content"));
}

// A second server on a port in use is refused: without SO_REUSEPORT the kernel does not split the
// connections between two servers (cpp-httplib's default options set it).
TEST(HttpServerPort, APortInUseIsRefused) {
  Server server({.parallel = 1, .max_waiting = 4});
  HttpServer second(server.service(), HttpServerOptions{.port = server.port()});
  try {
    second.Bind();
    ADD_FAILURE() << "a second server bound port " << server.port();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another server"), std::string::npos) << e.what();
  }
  httplib::Client client = server.Client();
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

}  // namespace
}  // namespace grove::serve
