#include "pipe_mpi/mpi_transport.h"

#include <mpi.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace grove {
namespace {

// A rank's notice that it gave up waiting (BlameSilentRanks); apart from every PipeTag.
constexpr int kTimedOutTag = 1000;

// A message on the wire: two counts, the ints, the floats.
std::vector<char> Pack(const PipeMessage& m) {
  const int64_t header[2] = {static_cast<int64_t>(m.ints.size()),
                             static_cast<int64_t>(m.floats.size())};
  std::vector<char> bytes(sizeof header + m.ints.size() * sizeof(int32_t) +
                          m.floats.size() * sizeof(float));
  char* p = bytes.data();
  std::memcpy(p, header, sizeof header);
  p += sizeof header;
  if (!m.ints.empty()) std::memcpy(p, m.ints.data(), m.ints.size() * sizeof(int32_t));
  p += m.ints.size() * sizeof(int32_t);
  if (!m.floats.empty()) std::memcpy(p, m.floats.data(), m.floats.size() * sizeof(float));
  return bytes;
}

PipeMessage Unpack(const std::vector<char>& bytes, int32_t from) {
  int64_t header[2];
  if (bytes.size() < sizeof header)
    Fail("mpi: a message of ", bytes.size(), " bytes from rank ", from);
  std::memcpy(header, bytes.data(), sizeof header);
  const auto n_ints = static_cast<std::size_t>(header[0]);
  const auto n_floats = static_cast<std::size_t>(header[1]);
  if (header[0] < 0 || header[1] < 0 ||
      bytes.size() != sizeof header + n_ints * sizeof(int32_t) + n_floats * sizeof(float)) {
    Fail("mpi: a malformed message of ", bytes.size(), " bytes from rank ", from);
  }
  PipeMessage m;
  m.ints.resize(n_ints);
  m.floats.resize(n_floats);
  const char* p = bytes.data() + sizeof header;
  if (n_ints) std::memcpy(m.ints.data(), p, n_ints * sizeof(int32_t));
  p += n_ints * sizeof(int32_t);
  if (n_floats) std::memcpy(m.floats.data(), p, n_floats * sizeof(float));
  return m;
}

void Check(int status, const char* what) {
  if (status != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(status, text, &length);
    Fail("mpi: ", what, ": ", std::string(text, static_cast<std::size_t>(length)));
  }
}

}  // namespace

struct MpiTransport::Pending {
  std::vector<char> bytes;
  MPI_Request request = MPI_REQUEST_NULL;
};

MpiTransport::MpiTransport(std::chrono::milliseconds timeout) : timeout_(timeout) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    // Only the main thread calls MPI (the forward's workers never do).
    Check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "init");
  }
  // Errors come back as codes (Check turns them into grove::Error) rather than aborting at once.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  // Sleeps between polls as short as asked (the default slack rounds 10 us up to 60).
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
}

MpiTransport::~MpiTransport() {
  Reap(/*wait=*/true);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void MpiTransport::Reap(bool wait) {
  while (!pending_.empty()) {
    int done = 0;
    if (wait) {
      MPI_Wait(&pending_.front()->request, MPI_STATUS_IGNORE);
      done = 1;
    } else {
      MPI_Test(&pending_.front()->request, &done, MPI_STATUS_IGNORE);
    }
    if (!done) return;
    pending_.pop_front();
  }
}

void MpiTransport::Send(int32_t to, int32_t tag, const PipeMessage& message) {
  if (to < 0 || to >= size_ || to == rank_) Fail("mpi: no rank ", to, " to send to");
  Reap(/*wait=*/false);
  auto pending = std::make_unique<Pending>();
  pending->bytes = Pack(message);
  Check(MPI_Isend(pending->bytes.data(), static_cast<int>(pending->bytes.size()), MPI_BYTE, to, tag,
                  MPI_COMM_WORLD, &pending->request),
        "send");
  pending_.push_back(std::move(pending));
}

PipeMessage MpiTransport::Receive(int32_t from, int32_t tag) {
  if (from < 0 || from >= size_ || from == rank_) Fail("mpi: no rank ", from, " to receive from");
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout_;
  auto pause = std::chrono::microseconds(10);
  MPI_Status status;
  for (;;) {
    int ready = 0;
    Check(MPI_Iprobe(from, tag, MPI_COMM_WORLD, &ready, &status), "probe");
    if (ready) break;
    Reap(/*wait=*/false);  // our own sends progress while we wait
    const auto now = std::chrono::steady_clock::now();
    if (now - start < std::chrono::microseconds(30)) continue;  // a message about to come
    int notice = 0;
    Check(MPI_Iprobe(MPI_ANY_SOURCE, kTimedOutTag, MPI_COMM_WORLD, &notice, MPI_STATUS_IGNORE),
          "probe");
    if (notice || now > deadline) throw PipeTransportError(BlameSilentRanks(from));
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(50));
  }
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  std::vector<char> bytes(static_cast<std::size_t>(count));
  Check(MPI_Recv(bytes.data(), count, MPI_BYTE, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
        "receive");
  return Unpack(bytes, from);
}

std::string MpiTransport::BlameSilentRanks(int32_t waited_for) {
  timed_out_notice_ = waited_for;
  for (int32_t r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Request request = MPI_REQUEST_NULL;
    // A small message leaves at once (eager); the request is let go, as the rank may never read it.
    if (MPI_Isend(&timed_out_notice_, 1, MPI_INT32_T, r, kTimedOutTag, MPI_COMM_WORLD, &request) ==
        MPI_SUCCESS) {
      MPI_Request_free(&request);
    }
  }
  // Ranks that are alive poll every 50 us or come back from a forward within its time; the grace
  // period is far longer than either, and shorter than the timeout.
  const auto grace = std::min<std::chrono::milliseconds>(timeout_ / 2, std::chrono::seconds(5));
  const auto deadline = std::chrono::steady_clock::now() + grace;
  std::vector<int32_t> waiting_for(static_cast<std::size_t>(size_), -2);  // -2: not heard
  waiting_for[static_cast<std::size_t>(rank_)] = waited_for;
  int32_t heard = 1;
  while (heard < size_ && std::chrono::steady_clock::now() < deadline) {
    int ready = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kTimedOutTag, MPI_COMM_WORLD, &ready, &status) != MPI_SUCCESS) {
      break;
    }
    if (!ready) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    int32_t value = -1;
    MPI_Recv(&value, 1, MPI_INT32_T, status.MPI_SOURCE, kTimedOutTag, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    int32_t& slot = waiting_for[static_cast<std::size_t>(status.MPI_SOURCE)];
    if (slot == -2) ++heard;
    slot = value;
  }
  std::string silent;
  for (int32_t r = 0; r < size_; ++r) {
    if (waiting_for[static_cast<std::size_t>(r)] != -2) continue;
    silent += (silent.empty() ? "rank " : ", rank ") + std::to_string(r);
  }
  const std::string waited = "this rank waited for rank " + std::to_string(waited_for);
  if (silent.empty()) {
    // Also what a stopped rank finds when it resumes: every other rank's notice waiting for it.
    return "every other rank gave up waiting too (" + waited +
           "): this rank was stopped or far too slow, or the ranks wait for each other in a "
           "cycle (a bug: please report it)";
  }
  return silent + " stopped answering or died: nothing from it in " +
         std::to_string(timeout_.count()) + " ms, while every other rank was waiting (" + waited +
         ")";
}

void MpiTransport::Abort(const std::string& why) {
  std::fprintf(stderr, "grove pipe: rank %d: %s\n", rank_, why.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

std::string MpiTransport::host() const {
  char name[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  MPI_Get_processor_name(name, &length);
  return std::string(name, static_cast<std::size_t>(length));
}

}  // namespace grove
