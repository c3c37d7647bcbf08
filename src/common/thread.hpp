// Threads a library starts: they take no process signal. A caller (the CLI's
// `follow`) may block SIGINT and SIGTERM in its own threads and wait for them with
// sigwait; a thread that left them unblocked would take them instead, and their
// default action would end the whole process.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

namespace boxlite {

// std::thread or std::jthread, started with every signal blocked (which it
// inherits); the caller's own mask is as it was when this returns or throws.
template <typename Thread = std::thread, typename Fn>
Thread start_thread_without_signals(Fn&& fn) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  struct Restore {
    const sigset_t& mask;
    ~Restore() { pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
  } restore{old};
  return Thread(std::forward<Fn>(fn));
}

}  // namespace boxlite
