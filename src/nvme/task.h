// Task<T>: the C++20 coroutine every PA-Tree operation is written as (issue
// 14). An operation is a state machine that stops at each node I/O and each
// latch it must wait for; written as a coroutine, the compiler keeps its
// state (the frame: the node it is at, the latches it holds, the key) and
// the executor (nvme/executor.h) decides what a stop means:
// - PA-Tree's engine (nvme/engine.h) suspends the operation, runs others,
//   and resumes it when its I/O completes or its latch is granted;
// - the synchronous baselines (dedicated and shared) never suspend: the
//   awaited I/O or latch is done blocking, in the calling thread.
// One tree algorithm (nvme/tree.h) thus serves all three, as the paper's
// comparison needs ("same tree and latch coupling").
//
// Task is lazy (it starts when awaited or when start() resumes it) and
// resumes its awaiter by symmetric transfer when it ends, so a chain of
// nested tasks uses no stack per level and a task awaited from a
// non-suspending executor runs to its end inside one resume().
// Exceptions are not used (errors are Status); one escaping a task
// terminates.
#pragma once

#include <coroutine>
#include <exception>
#include <utility>

namespace nvindex::nvme {

template <class T>
class [[nodiscard]] Task {
 public:
  struct promise_type {
    T value{};
    std::coroutine_handle<> continuation;

    Task get_return_object() {
      return Task(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct Final {
      bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept {
        std::coroutine_handle<> c = h.promise().continuation;
        return c ? c : std::noop_coroutine();
      }
      void await_resume() noexcept {}
    };
    Final final_suspend() noexcept { return {}; }
    void return_value(T v) { value = std::move(v); }
    void unhandled_exception() { std::terminate(); }
  };

  Task() = default;
  explicit Task(std::coroutine_handle<promise_type> h) : h_(h) {}
  Task(Task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  Task& operator=(Task&& o) noexcept {
    if (this != &o) {
      if (h_) h_.destroy();
      h_ = std::exchange(o.h_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() {
    if (h_) h_.destroy();
  }

  // Awaiting a task starts it; the awaiter resumes with its result.
  bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiter) noexcept {
    h_.promise().continuation = awaiter;
    return h_;
  }
  T await_resume() { return std::move(h_.promise().value); }

  /// Top level: runs the task until its first suspension (or its end).
  void start() { h_.resume(); }
  bool done() const { return h_.done(); }
  /// The result, once done().
  T& result() { return h_.promise().value; }

 private:
  std::coroutine_handle<promise_type> h_;
};

}  // namespace nvindex::nvme
