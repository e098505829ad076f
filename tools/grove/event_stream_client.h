// The client side of a streamed completion: POSTs a JSON body to an OpenAI-compatible server
// (grove serve, llama-server, ...) and hands each server-sent event's data to a callback as it
// arrives ("[DONE]" included; keep-alive comments skipped). And a plain GET (/metrics, /health).
// For tests and `grove serve-bench`.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace grove::cli {

struct EventStreamResult {
  int status = 0;          // HTTP status; 0 when no response came
  std::string error;       // transport failure (connection refused, read error), else empty
  std::string body;        // the body of a response that was not an event stream (an error object)
  bool cancelled = false;  // on_data returned false: the connection was closed there
};

// on_data returns false to stop reading, which closes the connection as a client that goes away.
EventStreamResult PostEventStream(const std::string& host, int port, const std::string& path,
                                  const std::string& json_body,
                                  const std::function<bool(std::string_view data)>& on_data,
                                  const std::string& api_key = "", int timeout_seconds = 600);

// GETs `path`; the body in result.body whatever its type.
EventStreamResult Get(const std::string& host, int port, const std::string& path,
                      const std::string& api_key = "", int timeout_seconds = 10);

}  // namespace grove::cli
