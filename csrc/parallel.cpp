#include "parallel.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tbdfs {

namespace {

struct Job {
  const std::function<void(int64_t, int64_t)>* fn;
  int64_t n, chunk, num_chunks;
  int max_helpers;
  std::atomic<int64_t> next{0};
  std::atomic<int> helpers{0};
  std::mutex mu;
  std::condition_variable finished;
  int64_t done = 0;  // guarded by mu

  // Runs chunks until none is left; returns when this thread has no more to do.
  void work() {
    for (int64_t c; (c = next.fetch_add(1)) < num_chunks;) {
      const int64_t b = c * chunk, e = std::min(n, b + chunk);
      (*fn)(b, e);
      std::lock_guard<std::mutex> lock(mu);
      if (++done == num_chunks) finished.notify_all();
    }
  }
};

class Pool {
 public:
  // Runs job on the caller plus up to job->max_helpers sleeping workers.
  void run(const std::shared_ptr<Job>& job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Another Python thread is using the pool: do the work alone rather than queue.
      if (busy_) {
        job->max_helpers = 0;
      } else {
        busy_ = true;
        while (static_cast<int>(workers_.size()) < job->max_helpers)
          workers_.emplace_back([this] { loop(); });
        job_ = job;
        ++generation_;
        wake_.notify_all();
      }
    }
    job->work();
    {
      std::unique_lock<std::mutex> lock(job->mu);
      job->finished.wait(lock, [&] { return job->done == job->num_chunks; });
    }
    if (job->max_helpers > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      job_.reset();
      busy_ = false;
    }
  }

 private:
  void loop() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      std::shared_ptr<Job> job = job_;
      if (!job || job->helpers.fetch_add(1) >= job->max_helpers) continue;
      lock.unlock();
      job->work();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::thread> workers_;
  std::shared_ptr<Job> job_;
  uint64_t generation_ = 0;
  bool busy_ = false;
};

// One pool per process, never destroyed (workers may still sleep at exit).  A forked child
// (DataLoader workers) has no threads, so it starts a pool of its own.
Pool& pool() {
  static std::mutex mu;
  static Pool* p = nullptr;
  static pid_t owner = 0;
  std::lock_guard<std::mutex> lock(mu);
  if (!p || owner != getpid()) {
    p = new Pool;
    owner = getpid();
  }
  return *p;
}

}  // namespace

void parallel_for(int64_t n, int num_threads, int64_t min_chunk,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  // Only whole chunks earn a thread: waking a helper for a fraction of one costs more
  // than the work it would take over.
  const int threads = static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(num_threads, n / min_chunk)));
  if (threads == 1) {
    fn(0, n);
    return;
  }
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n = n;
  // A few chunks per thread, so a thread that lost its core holds up little work.
  job->chunk = std::max(min_chunk, (n + 4 * threads - 1) / (4 * threads));
  job->num_chunks = (n + job->chunk - 1) / job->chunk;
  job->max_helpers = threads - 1;
  pool().run(job);
}

}  // namespace tbdfs
