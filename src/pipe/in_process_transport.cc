#include "pipe/in_process_transport.h"

#include <algorithm>
#include <exception>
#include <thread>

namespace grove {

class InProcessNetwork::Rank : public PipeTransport {
 public:
  Rank(InProcessNetwork& network, int32_t rank) : network_(network), rank_(rank) {}
  int32_t rank() const override { return rank_; }
  int32_t size() const override { return network_.size(); }

  void Send(int32_t to, int32_t tag, const PipeMessage& message) override {
    if (to < 0 || to >= size() || to == rank_)
      grove::Fail("pipe transport: no rank ", to, " to send to");
    {
      std::lock_guard lock(network_.mutex_);
      network_.mail_[{to, rank_, tag}].push_back(message);
    }
    network_.arrived_[static_cast<std::size_t>(to)].notify_one();
  }

  void set_timeout(std::chrono::milliseconds timeout) override {
    std::lock_guard lock(network_.mutex_);
    network_.timeout_ = timeout;
  }

  PipeMessage Receive(int32_t from, int32_t tag) override {
    if (from < 0 || from >= size() || from == rank_) {
      grove::Fail("pipe transport: no rank ", from, " to receive from");
    }
    std::unique_lock lock(network_.mutex_);
    std::deque<PipeMessage>& box = network_.mail_[{rank_, from, tag}];
    const bool came = network_.arrived_[static_cast<std::size_t>(rank_)].wait_for(
        lock, network_.timeout_, [&] { return !box.empty() || !network_.failure_.empty(); });
    if (!network_.failure_.empty()) {
      throw PipeTransportError("rank " + std::to_string(rank_) + ": " + network_.failure_);
    }
    if (!came) {
      throw PipeTransportError(
          "rank " + std::to_string(rank_) + ": nothing from rank " + std::to_string(from) + " in " +
          std::to_string(network_.timeout_.count()) + " ms; it died or stopped answering");
    }
    PipeMessage message = std::move(box.front());
    box.pop_front();
    return message;
  }

 private:
  InProcessNetwork& network_;
  int32_t rank_;
};

InProcessNetwork::InProcessNetwork(int32_t n_ranks, std::chrono::milliseconds timeout)
    : arrived_(static_cast<std::size_t>(std::max(n_ranks, 0))), timeout_(timeout) {
  if (n_ranks < 1) grove::Fail("pipe transport: ", n_ranks, " ranks");
  for (int32_t r = 0; r < n_ranks; ++r) ranks_.push_back(std::make_unique<Rank>(*this, r));
}

InProcessNetwork::~InProcessNetwork() = default;

PipeTransport& InProcessNetwork::transport(int32_t rank) {
  return *ranks_.at(static_cast<std::size_t>(rank));
}

void InProcessNetwork::Fail(int32_t rank, const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    if (failure_.empty()) failure_ = "rank " + std::to_string(rank) + " failed: " + why;
  }
  for (std::condition_variable& cv : arrived_) cv.notify_all();
}

void RunThreadsFailingTogether(InProcessNetwork& network,
                               const std::function<void(int32_t rank)>& body) {
  std::mutex mutex;
  std::exception_ptr first;  // the first error that is not a broken receive, else the first
  bool first_is_cause = false;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(network.size()));
  for (int32_t r = 0; r < network.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        const bool cause = dynamic_cast<const PipeTransportError*>(&e) == nullptr;
        {
          std::lock_guard lock(mutex);
          if (!first || (cause && !first_is_cause)) {
            first = std::current_exception();
            first_is_cause = cause;
          }
        }
        network.Fail(r, e.what());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace grove
