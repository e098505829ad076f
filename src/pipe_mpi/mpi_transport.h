// The pipeline's ranks as MPI processes (pipe_transport.h): `mpirun -np N grove pipe --transport
// mpi ...`, one rank per unit, on one host or across the hosts of a hostfile.
//
// Sends are non-blocking (MPI_Isend, the buffer kept until the message has left). A receive polls
// (MPI_Iprobe), for 30 us without pause (a message about to come), then sleeping between polls,
// from 10 us up to 50 us, rather than blocking in MPI: a
// rank waiting on its neighbour leaves the cores to the ranks computing (on one small host the
// stages share them), and it can give up after its timeout. A rank that dies is seen by mpirun,
// which stops the job; a rank that stops answering makes its neighbours' receives time out. The
// rank it waited for may be a victim itself (waiting for the stopped one), so a rank that times
// out tells every other rank so; each rank that hears it (while polling) does the same, and after
// a short grace period the ranks that said nothing are the ones named as stopped. The rank then
// aborts the job (MPI_Abort), so no rank hangs.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "pipe/pipe_transport.h"

namespace grove {

class MpiTransport : public PipeTransport {
 public:
  // Initializes MPI (once per process). Throws grove::Error when it cannot.
  explicit MpiTransport(std::chrono::milliseconds timeout);
  // Waits for the sends still under way, then finalizes MPI.
  ~MpiTransport() override;
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  int32_t rank() const override { return rank_; }
  int32_t size() const override { return size_; }
  void Send(int32_t to, int32_t tag, const PipeMessage& message) override;
  PipeMessage Receive(int32_t from, int32_t tag) override;
  void set_timeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }

  // Prints `why` for this rank on stderr and stops every rank of the job (MPI_Abort). Does not
  // return.
  [[noreturn]] void Abort(const std::string& why);
  // The name of this host (MPI_Get_processor_name).
  std::string host() const;

 private:
  struct Pending;
  void Reap(bool wait);
  // After this rank timed out waiting for `waited_for` (or heard that another did): tells the
  // others, listens for their notices for a grace period, and returns the error text naming the
  // ranks that stayed silent.
  std::string BlameSilentRanks(int32_t waited_for);

  int32_t rank_ = 0;
  int32_t size_ = 1;
  std::chrono::milliseconds timeout_;
  std::deque<std::unique_ptr<Pending>> pending_;  // sends under way
  int32_t timed_out_notice_ = -1;  // what BlameSilentRanks sends: the rank waited for
};

}  // namespace grove
