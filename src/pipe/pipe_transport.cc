#include "pipe/pipe_transport.h"

namespace grove {

PipeMessage Broadcast(PipeTransport& transport, int32_t root, int32_t tag, PipeMessage message) {
  if (transport.rank() != root) return transport.Receive(root, tag);
  for (int32_t r = 0; r < transport.size(); ++r) {
    if (r != root) transport.Send(r, tag, message);
  }
  return message;
}

}  // namespace grove
