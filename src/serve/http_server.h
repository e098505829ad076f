// The OpenAI-compatible HTTP front of a CompletionService, on cpp-httplib:
//   POST /v1/completions, POST /v1/chat/completions   (stream: true → server-sent events, [DONE])
//   GET  /v1/models, GET /health, GET /metrics (Prometheus text)
//   GET, POST /admin/drafter  (with --admin-key: the drafter, and swapping it while serving)
// With --api-key every route but /health and the tree view's page needs the key. Every error is
// OpenAI's error object with a fitting status: 400 bad request, 401 without the API key (the
// admin key for /admin/), 403 /admin/ on a server started without --admin-key, 404 unknown route
// or model, 413 body too large (however it is sent: request_body.h), 415 a body that is not JSON
// or is compressed in an unknown way, 503 queue full (with Retry-After).
// Binds to loopback unless told otherwise.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "serve/completion_service.h"

namespace httplib {
class Server;
class ContentReader;
struct Request;
struct Response;
}  // namespace httplib

namespace grove::serve {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;        // 0: any free port (tests)
  std::string api_key;    // empty: none required
  std::string admin_key;  // the /admin/ endpoints' key; empty: they answer 403
  std::size_t max_body_bytes = 1 << 20;
  int threads = 0;              // HTTP worker threads; 0: --parallel + queue + 8
  int retry_after_seconds = 1;  // Retry-After of a 503
  // Longest silence of a response under way: a streamed one sends an SSE comment, a non-streamed
  // one still running sends a space before its JSON body. A failed write is how a client that went
  // away is found (its sequences are then cancelled).
  int keep_alive_ms = 1000;
};

class HttpServer {
 public:
  HttpServer(CompletionService& service, HttpServerOptions options);
  ~HttpServer();

  // Binds the socket; returns the port (the chosen one for port 0). Throws grove::Error when the
  // address cannot be bound.
  int Bind();
  // Serves until Stop (from another thread or a signal handler's thread).
  void Listen();
  void Stop();

 private:
  void Route();
  // Errors cpp-httplib produces, exceptions, and the API key.
  void RouteErrors();
  // /health, /metrics, /v1/models, the tree view page and /v1/requests.
  void RouteInformation();
  // /v1/steps: the live view's step events of a running request.
  void RouteSteps();
  // /v1/completions, /v1/chat/completions and /apply-template.
  void RouteCompletions();
  void HandleCompletion(const httplib::Request& req, const std::string& body,
                        httplib::Response& res, bool chat);
  // /admin/drafter.
  void RouteAdmin();
  // A body sent to no route is read within the limit before the 404.
  void RouteUnknown();
  // A route (POST, PUT, PATCH or DELETE) whose body is read through ReadBody (request_body.h):
  // within the limit, whatever its transfer or content encoding.
  using BodyHandler =
      std::function<void(const httplib::Request&, const std::string& body, httplib::Response&)>;
  void RouteWithBody(const char* method, const std::string& pattern, BodyHandler handler);

  CompletionService& service_;
  HttpServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
  int listen_socket_ = -1;
};

}  // namespace grove::serve
