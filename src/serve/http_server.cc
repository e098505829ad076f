#include "serve/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string_view>

#include "base/bounded_json.h"
#include "base/error.h"
#include "base/log.h"
#include "serve/api_error.h"
#include "serve/api_keys.h"
#include "serve/api_response.h"
#include "serve/client_connection.h"
#include "serve/request_body.h"
#include "serve/tree_view_page.h"

namespace grove::serve {
namespace {

void SendJson(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(ResponseText(body), "application/json");
}

// POST /admin/drafter's swap. Why a name could not be opened tells what the file holds (whether
// it exists, its first bytes, its vocabulary): the server's log has the reason, the client a
// refusal naming the field.
std::string SwapDrafter(CompletionService& service, const std::string& name) {
  try {
    return service.SwapDrafter(name);
  } catch (const ApiError& e) {
    if (e.status() != 400) throw;
    Log(LogLevel::kWarn, "serve: POST /admin/drafter: ", e.what());
    constexpr std::size_t kMaxShown = 200;
    const std::string shown = name.size() > kMaxShown ? name.substr(0, kMaxShown) + "..." : name;
    throw ApiError(400,
                   "draft '" + shown +
                       "' cannot serve as this target's drafter (a draft GGUF of the target's "
                       "vocabulary, ngram, suffix or A+B); the server's log says why",
                   "invalid_request_error", "draft");
  }
}

// What an error cpp-httplib answers by itself means, said as the client can act on it (it once
// said "the request could not be handled" for every status but 404 and 413).
std::string LibraryErrorMessage(const httplib::Request& req, int status) {
  switch (status) {
    case 400:
      return "the request is not HTTP/1.1 this server can read (its request line or headers)";
    case 404:
      return "no route " + req.method + " " + req.path;
    case 413:
      return "the request body is too large";
    case 414:
      return "the request line is too long (at most 8192 bytes)";
    case 416:
      return "the Range header is not valid";
    default:
      return "the request could not be handled (HTTP " + std::to_string(status) + ")";
  }
}

void SendError(httplib::Response& res, const ApiError& error, int retry_after_seconds) {
  if (error.status() == 503) res.set_header("Retry-After", std::to_string(retry_after_seconds));
  SendJson(res, error.status(), error.ToJson());
}

// The messages, tools and chat_template_kwargs of a chat body with their keys in the client's order
// (nlohmann::json sorts them), for the model's own template: a tool's parameters print as they were
// sent. A content given as text parts is the text ParseCompletionRequest read from them: the
// template renders the messages that were checked (it once got the parts, and wrote an empty turn).
void SetChatJson(const std::string& body, CompletionRequest* request) {
  // The body was parsed (and its depth bounded) once already by ParseBody: this cannot fail.
  nlohmann::ordered_json ordered = ParseBoundedJson<nlohmann::ordered_json>(body, "the body");
  request->chat_messages = ordered["messages"];
  for (std::size_t i = 0; i < request->chat_messages.size(); ++i) {
    auto content = request->chat_messages[i].find("content");
    if (content != request->chat_messages[i].end() && content->is_array()) {
      *content = request->messages[i].content;
    }
  }
  auto tools = ordered.find("tools");
  if (tools != ordered.end()) request->tools = *tools;
  auto kwargs = ordered.find("chat_template_kwargs");
  if (kwargs != ordered.end() && kwargs->is_object()) request->chat_template_kwargs = *kwargs;
}

// Writes a piece of a response; a failed write means the client is gone: its sequences are
// cancelled.
bool WriteOrCancel(httplib::DataSink& sink, const std::string& text, Completion& completion) {
  if (sink.write(text.data(), text.size())) return true;
  completion.Cancel();
  return false;
}

// Gathers a non-streamed completion's events into its one response body, and cancels it as soon
// as its client leaves: the connection is looked at after every event (every step of its
// sequences) and at least every kClientPoll.
class Collector {
 public:
  static constexpr std::chrono::milliseconds kClientPoll{10};

  Collector(std::shared_ptr<Completion> completion, bool chat, std::string model,
            ClientConnection connection)
      : completion_(std::move(completion)),
        chat_(chat),
        model_(std::move(model)),
        connection_(connection) {
    texts_.text.resize(completion_->n_choices());
    texts_.reasoning.resize(completion_->n_choices());
    texts_.finish_reason.resize(completion_->n_choices());
  }

  // Takes events until the completion is done (true), `wait` has passed or the client has left
  // (false; client_left() says which).
  bool Gather(std::chrono::milliseconds wait) {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (!done_) {
      if (connection_.Closed()) {
        client_left_ = true;
        completion_->Cancel();
        return false;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      CompletionEvent event;
      if (!completion_->Next(&event, std::min(left, kClientPoll))) continue;
      if (event.kind == CompletionEvent::Kind::kText) {
        (event.reasoning ? texts_.reasoning : texts_.text)[event.choice] += event.text;
      } else if (event.kind == CompletionEvent::Kind::kChoiceDone) {
        texts_.finish_reason[event.choice] = event.finish_reason;
      } else {
        done_ = true;
      }
    }
    return true;
  }

  bool client_left() const { return client_left_; }

  // The body of a finished completion; throws ApiError when it failed.
  nlohmann::json Body() const {
    if (!completion_->error().empty()) throw ApiError(500, completion_->error(), "server_error");
    return CompletionBody(*completion_, texts_, chat_, model_);
  }

  // One call of cpp-httplib's chunked provider, for a completion still running after the first
  // wait: a space (JSON allows leading white space) per silent interval, then the body. Its status
  // is sent already, so a failure that late comes as the error object with status 200, as it
  // would in a stream. False when the client is gone: its sequences are cancelled.
  bool Provide(httplib::DataSink& sink, std::chrono::milliseconds keep_alive) {
    if (!Gather(keep_alive)) return !client_left_ && Write(sink, " ");
    std::string body;
    try {
      body = ResponseText(Body());
    } catch (const ApiError& e) {
      body = ResponseText(e.ToJson());
    }
    if (!Write(sink, body)) return false;
    sink.done();
    return true;
  }

 private:
  bool Write(httplib::DataSink& sink, const std::string& text) {
    return WriteOrCancel(sink, text, *completion_);
  }

  std::shared_ptr<Completion> completion_;
  bool chat_;
  std::string model_;
  CompletionTexts texts_;
  ClientConnection connection_;
  bool done_ = false;
  bool client_left_ = false;
};

// The server-sent events of a streamed completion: one chunk per piece of text, a last chunk per
// choice with its finish_reason, a summary chunk (grove's statistics, usage if asked), [DONE].
class EventStream {
 public:
  EventStream(std::shared_ptr<Completion> completion, bool chat, std::string model,
              bool include_usage, std::chrono::milliseconds keep_alive)
      : completion_(std::move(completion)),
        chat_(chat),
        model_(std::move(model)),
        include_usage_(include_usage),
        keep_alive_(keep_alive),
        started_(completion_->n_choices(), false) {}

  // One call of cpp-httplib's chunked provider: sends what the next event gives (or a keep-alive
  // comment). False when the client is gone: its sequences are cancelled.
  bool operator()(std::size_t offset, httplib::DataSink& sink) {
    try {
      return Step(offset, sink);
    } catch (const std::exception& e) {
      Log(LogLevel::kError, "serve: stream ", completion_->id(), ": ", e.what());
      completion_->Cancel();
      return false;
    }
  }

 private:
  bool Step(std::size_t, httplib::DataSink& sink) {
    CompletionEvent event;
    if (!completion_->Next(&event, keep_alive_)) return Write(sink, ": keep-alive\n\n");
    switch (event.kind) {
      case CompletionEvent::Kind::kText:
        return Send(sink, StreamChunk(*completion_, chat_, model_, event.choice, &event.text,
                                      nullptr, First(event.choice), event.reasoning));
      case CompletionEvent::Kind::kChoiceDone:
        return Send(sink, StreamChunk(*completion_, chat_, model_, event.choice, nullptr,
                                      &event.finish_reason, First(event.choice)));
      case CompletionEvent::Kind::kDone:
        break;
    }
    const std::string error = completion_->error();
    const bool sent = error.empty()
                          ? Send(sink, StreamSummary(*completion_, chat_, model_, include_usage_))
                          : Send(sink, ApiError(500, error, "server_error").ToJson());
    if (!sent || !Write(sink, "data: [DONE]\n\n")) return false;
    sink.done();
    return true;
  }

  bool First(int choice) {
    const bool first = !started_[choice];
    started_[choice] = true;
    return first;
  }
  bool Send(httplib::DataSink& sink, const nlohmann::json& body) {
    return Write(sink, "data: " + ResponseText(body) + "\n\n");
  }
  bool Write(httplib::DataSink& sink, const std::string& text) {
    return WriteOrCancel(sink, text, *completion_);
  }

  std::shared_ptr<Completion> completion_;
  bool chat_;
  std::string model_;
  bool include_usage_;
  std::chrono::milliseconds keep_alive_;
  std::vector<bool> started_;
};

}  // namespace

HttpServer::HttpServer(CompletionService& service, HttpServerOptions options)
    : service_(service),
      options_(std::move(options)),
      server_(std::make_unique<httplib::Server>()) {
  // A client's key would open the admin endpoints too: every client could swap the drafter.
  if (!options_.api_key.empty() && options_.api_key == options_.admin_key) {
    Fail(
        "--admin-key must differ from --api-key (every client holding the API key could "
        "otherwise swap the drafter)");
  }
  const int threads = options_.threads > 0
                          ? options_.threads
                          : service_.target().n_seq() + service_.options().max_waiting + 8;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_payload_max_length(options_.max_body_bytes);
  // cpp-httplib listens with a backlog of 5: a burst of clients connecting at once overflows it
  // and some connections fail. Keep the listening socket, to raise its backlog once it listens.
  // Its default options add SO_REUSEPORT, with which a second server binds a port in use and the
  // kernel splits the connections between the two: only SO_REUSEADDR here (a restart may bind
  // while old connections wait in TIME_WAIT; a port another socket listens on is refused).
  server_->set_socket_options([this](socket_t sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_socket_ = sock;
  });
  Route();
}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::Bind() {
  const int port = options_.port == 0
                       ? server_->bind_to_any_port(options_.host)
                       : (server_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port < 0) {
    Fail("cannot listen on ", options_.host, ":", options_.port,
         " (is another server using the port?)");
  }
  // On Linux, listen() again on a listening socket only changes its backlog.
  if (listen_socket_ >= 0) ::listen(listen_socket_, SOMAXCONN);
  return port;
}

void HttpServer::Listen() { server_->listen_after_bind(); }

void HttpServer::Stop() {
  if (server_) server_->stop();
}

void HttpServer::Route() {
  RouteErrors();
  RouteInformation();
  RouteSteps();
  RouteCompletions();
  RouteAdmin();
  RouteUnknown();  // last: the routes above are matched in the order they were added
}

void HttpServer::RouteErrors() {
  // Errors cpp-httplib produces itself (unknown route, body too large) get OpenAI's error object.
  server_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.has_header("Content-Type")) return;  // a handler's own answer
    SendJson(res, res.status,
             ApiError(res.status, LibraryErrorMessage(req, res.status),
                      res.status == 404 ? "not_found_error" : "invalid_request_error")
                 .ToJson());
  });
  server_->set_exception_handler(
      [this](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
        std::string message = "internal error";
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          message = e.what();
        } catch (...) {
        }
        service_.metrics().RequestFailed();
        SendJson(res, 500, ApiError(500, message, "server_error").ToJson());
      });
  server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // A method whose body cpp-httplib would read unbounded and no route takes.
    if (req.method == "PRI") {
      SendJsonAndClose(res, 405, ApiError(405, "method PRI is not served").ToJson());
      return httplib::Server::HandlerResponse::Handled;
    }
    const bool refused = req.path.rfind("/admin/", 0) == 0
                             ? RefusedWithoutAdminKey(options_.admin_key, req, res)
                             : RefusedWithoutApiKey(options_.api_key, req, res);
    return refused ? httplib::Server::HandlerResponse::Handled
                   : httplib::Server::HandlerResponse::Unhandled;
  });
}

void HttpServer::RouteInformation() {
  server_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (service_.healthy()) {
      SendJson(res, 200, {{"status", "ok"}});
    } else {
      SendJson(res, 503, {{"status", "error"}});
    }
  });
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(service_.MetricsText(), "text/plain; version=0.0.4");
  });
  server_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    nlohmann::json data = nlohmann::json::array();
    const ServiceOptions& o = service_.options();
    std::vector<std::string> names = {o.model_id};
    names.insert(names.end(), o.model_aliases.begin(), o.model_aliases.end());
    for (const std::string& name : names) {
      data.push_back({{"id", name},
                      {"object", "model"},
                      {"created", 0},
                      {"owned_by", "grove"},
                      {"meta", {{"n_ctx", service_.target().n_ctx()}}}});
    }
    SendJson(res, 200, {{"object", "list"}, {"data", std::move(data)}});
  });

  server_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kTreeViewPage, "text/html; charset=utf-8");
  });
  server_->Get("/v1/requests", [this](const httplib::Request& req, httplib::Response& res) {
    // A prompt belongs to its client: every client sees the running requests' ids and trees, and
    // only the operator (the admin key) the start of their prompts. vLLM shows no client another's
    // request; llama-server's /slots shows every prompt to whoever may call it.
    const bool operator_view = CarriesKey(req, options_.admin_key);
    nlohmann::json data = nlohmann::json::array();
    for (const auto& r : service_.Running()) {
      nlohmann::json entry = {{"id", r.id}, {"tree", r.tree}};
      if (operator_view) entry["prompt"] = r.prompt;
      data.push_back(std::move(entry));
    }
    SendJson(res, 200, {{"object", "list"}, {"data", std::move(data)}});
  });
}

void HttpServer::RouteSteps() {
  server_->Get("/v1/steps", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.get_param_value("id");
    std::shared_ptr<StepChannel> channel = service_.Steps(id);
    if (!channel) {
      SendJson(res, 404,
               ApiError(404, "no running request '" + id + "' (see /v1/requests, or id=next)",
                        "not_found_error", "id")
                   .ToJson());
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [subscription = channel->Subscribe(),
                              keep_alive = std::chrono::milliseconds(options_.keep_alive_ms)](
                                 std::size_t, httplib::DataSink& sink) {
          std::string event;
          std::string text;
          if (subscription->Next(&event, keep_alive)) {
            text = "event: step\ndata: " + event + "\n\n";
          } else if (subscription->closed()) {
            text = "event: done\ndata: {}\n\n";
          } else {
            text = ": keep-alive\n\n";
          }
          if (!sink.write(text.data(), text.size())) return false;
          if (text.rfind("event: done", 0) == 0) sink.done();
          return true;
        });
  });
}

namespace {

// Nesting is bounded while parsing (base/bounded_json.h): a body of arrays 100,000 deep killed the
// server in the recursive walks after the parse (the error message's dump, the chat copy).
nlohmann::json ParseBody(const std::string& body) {
  try {
    return ParseBoundedJson(body, "the body");
  } catch (const Error& e) {
    throw ApiError(400, e.what());
  }
}

}  // namespace

void HttpServer::RouteWithBody(const char* method, const std::string& pattern,
                               BodyHandler handler) {
  auto read_then_handle = [this, handler = std::move(handler)](
                              const httplib::Request& req, httplib::Response& res,
                              const httplib::ContentReader& reader) {
    std::string body;
    try {
      ReadBody(req, res, reader, options_.max_body_bytes, &body);
    } catch (const ApiError& e) {
      service_.metrics().RequestFailed();
      SendJsonAndClose(res, e.status(), e.ToJson());
      return;
    }
    handler(req, body, res);
  };
  const std::string_view m = method;
  if (m == "POST") {
    server_->Post(pattern, std::move(read_then_handle));
  } else if (m == "PUT") {
    server_->Put(pattern, std::move(read_then_handle));
  } else if (m == "PATCH") {
    server_->Patch(pattern, std::move(read_then_handle));
  } else {
    server_->Delete(pattern, std::move(read_then_handle));
  }
}

void HttpServer::HandleCompletion(const httplib::Request& req, const std::string& body,
                                  httplib::Response& res, bool chat) {
  try {
    CompletionRequest request =
        ParseCompletionRequest(ParseBody(body), chat, {.max_tokens = service_.target().n_ctx()});
    if (chat) SetChatJson(body, &request);
    // One model is served: whatever `model` names, it answers, as llama-server does (OpenAI
    // and vLLM refuse names they do not serve). Responses carry the served model's id.
    const std::string& model = service_.options().model_id;
    std::shared_ptr<Completion> completion = service_.Start(request);
    const std::chrono::milliseconds keep_alive(options_.keep_alive_ms);
    auto cancel_unless_sent = [completion](bool success) {
      if (!success) completion->Cancel();
    };
    if (!request.stream) {
      // Most answers come within the first wait and are sent whole, with their status; a
      // longer one is sent chunked, so that a client that leaves is noticed.
      auto collector = std::make_shared<Collector>(
          completion, chat, model,
          ClientConnection({req.local_addr, req.local_port, req.remote_addr, req.remote_port}));
      if (collector->Gather(keep_alive)) {
        SendJson(res, 200, collector->Body());
        return;
      }
      if (collector->client_left()) return;  // nobody reads an answer now
      res.set_chunked_content_provider(
          "application/json",
          [collector, keep_alive](std::size_t, httplib::DataSink& sink) {
            return collector->Provide(sink, keep_alive);
          },
          cancel_unless_sent);
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        EventStream(completion, chat, model, request.include_usage, keep_alive),
        cancel_unless_sent);
  } catch (const ApiError& e) {
    if (e.status() != 503) service_.metrics().RequestFailed();
    SendError(res, e, options_.retry_after_seconds);
  }
}

void HttpServer::RouteCompletions() {
  // llama-server's POST /apply-template: {"messages": [...], "tools"?: [...]} -> {"prompt": text},
  // the prompt a chat completion would encode, not run.
  RouteWithBody("POST", "/apply-template",
                [this](const httplib::Request&, const std::string& text, httplib::Response& res) {
                  try {
                    nlohmann::json body = ParseBody(text);
                    if (body.is_object() && !body.contains("max_tokens")) body["max_tokens"] = 1;
                    CompletionRequest request = ParseCompletionRequest(
                        body, true, {.max_tokens = service_.target().n_ctx()});
                    SetChatJson(text, &request);
                    SendJson(res, 200, {{"prompt", service_.RenderChatPrompt(request)}});
                  } catch (const ApiError& e) {
                    SendError(res, e, 0);
                  }
                });
  RouteWithBody("POST", "/v1/completions",
                [this](const httplib::Request& req, const std::string& body,
                       httplib::Response& res) { HandleCompletion(req, body, res, false); });
  RouteWithBody("POST", "/v1/chat/completions",
                [this](const httplib::Request& req, const std::string& body,
                       httplib::Response& res) { HandleCompletion(req, body, res, true); });
}

void HttpServer::RouteUnknown() {
  // A body sent to a route that does not exist is read within the limit too (cpp-httplib would
  // read it whole into memory before answering 404), then the 404 is sent.
  for (const char* method : {"POST", "PUT", "PATCH", "DELETE"}) {
    RouteWithBody(
        method, ".*", [](const httplib::Request& req, const std::string&, httplib::Response& res) {
          SendJson(
              res, 404,
              ApiError(404, "no route " + req.method + " " + req.path, "not_found_error").ToJson());
        });
  }
}

void HttpServer::RouteAdmin() {
  // GET: the drafter sequences are admitted with now. POST {"draft": NAME}: swap it
  // (CompletionService::SwapDrafter); requests in flight finish with the old one.
  server_->Get("/admin/drafter", [this](const httplib::Request&, httplib::Response& res) {
    SendJson(res, 200, {{"draft", service_.drafter_name()}});
  });
  RouteWithBody(
      "POST", "/admin/drafter",
      [this](const httplib::Request&, const std::string& text, httplib::Response& res) {
        try {
          const nlohmann::json body = ParseBody(text);
          if (!body.is_object() || !body.contains("draft") || !body.at("draft").is_string()) {
            throw ApiError(400,
                           "expected {\"draft\": NAME} (a draft GGUF's path, ngram, suffix or A+B)",
                           "invalid_request_error", "draft");
          }
          const std::string name = body.at("draft").get<std::string>();
          SendJson(res, 200, {{"draft", SwapDrafter(service_, name)}, {"requested", name}});
        } catch (const ApiError& e) {
          service_.metrics().RequestFailed();
          SendError(res, e, 0);
        }
      });
}

}  // namespace grove::serve
