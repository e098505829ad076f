// How the units of a pipeline run (the draft and the target's stages, pipedec.h) talk: each is a
// rank that sends messages to the others and receives from them, behind one small interface with
// two implementations, threads of one process (in_process_transport.h, for tests and the
// simulator) and MPI ranks (pipe_mpi/mpi_transport.h, across processes and hosts). The runs are
// written once against this interface.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"

namespace grove {

// A message: a few integers (tokens, node ids, counts) and floats (hidden rows, log-probs).
struct PipeMessage {
  std::vector<int32_t> ints;
  std::vector<float> floats;
};

// What a message carries; messages of one tag between two ranks arrive in the order sent.
enum PipeTag : int32_t {
  kPipeHiddenTag = 1,  // a stage's hidden rows to the next stage (and, in STPP, the tree)
  kPipeTokenTag = 2,   // the last stage's tokens to every rank
  kPipeLayerTag = 3,   // the draft's candidates for the next tree layer to every rank
  kPipeTreeTag = 4,    // STPP: the static tree the draft filled, to every stage
  kPipeToolTag = 5,    // what a tool exchanges around the runs (measurements, link probes)
};

// A rank that failed or stopped answering, seen from another rank.
class PipeTransportError : public Error {
 public:
  using Error::Error;
};

class PipeTransport {
 public:
  virtual ~PipeTransport() = default;
  virtual int32_t rank() const = 0;
  virtual int32_t size() const = 0;
  // Hands `message` to rank `to` and returns without waiting for it to be received.
  virtual void Send(int32_t to, int32_t tag, const PipeMessage& message) = 0;
  // The next message of `tag` from rank `from`. Throws PipeTransportError when another rank failed
  // or none comes within the transport's timeout (a rank that died or stopped answering).
  virtual PipeMessage Receive(int32_t from, int32_t tag) = 0;
  // How long Receive waits from now on (a tool may wait longer while ranks load and measure).
  virtual void set_timeout(std::chrono::milliseconds timeout) = 0;
};

// A transport over another, forwarding every call: what a wrapper that changes one of them (times
// the receives, injects a failure) derives from.
class ForwardingTransport : public PipeTransport {
 public:
  explicit ForwardingTransport(PipeTransport& inner) : inner_(inner) {}
  int32_t rank() const override { return inner_.rank(); }
  int32_t size() const override { return inner_.size(); }
  void Send(int32_t to, int32_t tag, const PipeMessage& message) override {
    inner_.Send(to, tag, message);
  }
  PipeMessage Receive(int32_t from, int32_t tag) override { return inner_.Receive(from, tag); }
  void set_timeout(std::chrono::milliseconds timeout) override { inner_.set_timeout(timeout); }

 private:
  PipeTransport& inner_;
};

// `root`'s message on every rank: root sends it to each other rank, the others receive it.
PipeMessage Broadcast(PipeTransport& transport, int32_t root, int32_t tag, PipeMessage message);

// One part of what a run was given (a model file, the prompt, the options), as its name and a
// fingerprint of its contents.
struct RankInput {
  std::string name;  // plural, as in "different target model files"
  uint64_t fingerprint = 0;
};

// Ranks started with other inputs (another model file, prompt or option on one host) would run
// and produce other tokens in silence. Every rank calls this with its inputs, in the same order;
// rank 0 compares them with its own, and every rank throws the same grove::Error naming the first
// rank and part that differ, or every rank returns.
void CheckRanksAgree(PipeTransport& transport, int32_t tag, const std::vector<RankInput>& inputs);

}  // namespace grove
