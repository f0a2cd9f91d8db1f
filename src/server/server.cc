// The server's event loop (server.h) over libevent 2.1: evconnlistener on
// the listener thread, a bufferevent per connection on its worker thread.
#include "server/server.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

namespace nvindex::server {

namespace {

struct Worker;

/// One client connection, owned by its worker.
struct Conn {
  Worker* worker = nullptr;
  bufferevent* bev = nullptr;
  Session session;
  bool closing = false;  ///< free once the replies are written
  explicit Conn(ServerState& st) : session(st) {}
};

struct Worker {
  Server::Impl* server = nullptr;
  event_base* base = nullptr;
  event* notify = nullptr;  ///< activated by the listener when fds are queued
  event* halt = nullptr;    ///< activated by stop(): leaves the loop
  std::mutex mu;
  std::vector<evutil_socket_t> queued;  ///< accepted fds not yet taken (mu)
  std::unordered_set<Conn*> conns;      ///< this worker's thread only
  std::thread thread;
};

}  // namespace

struct Server::Impl {
  ServerState* state = nullptr;
  ServerOptions options;
  event_base* listen_base = nullptr;
  event* listen_halt = nullptr;
  evconnlistener* listener = nullptr;
  std::thread listen_thread;
  std::vector<std::unique_ptr<Worker>> workers;
  size_t next = 0;
  uint16_t port = 0;
};

namespace {

void free_conn(Conn* c) {
  c->worker->conns.erase(c);
  bufferevent_free(c->bev);  // closes the socket (BEV_OPT_CLOSE_ON_FREE)
  c->worker->server->state->curr_connections.fetch_sub(1, std::memory_order_relaxed);
  delete c;
}

void on_read(bufferevent* bev, void* arg) {
  auto* c = static_cast<Conn*>(arg);
  if (c->closing) return;
  ServerState& st = *c->worker->server->state;
  evbuffer* in = bufferevent_get_input(bev);
  std::string out;
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  char buf[16384];
  After after = After::kContinue;
  for (;;) {
    const int n = evbuffer_remove(in, buf, sizeof(buf));
    if (n <= 0) break;
    after = c->session.feed(std::string_view(buf, static_cast<size_t>(n)), now, &out);
    if (after == After::kClose) break;
  }
  if (!out.empty()) {
    st.bytes_written.fetch_add(out.size(), std::memory_order_relaxed);
    bufferevent_write(bev, out.data(), out.size());
  }
  evbuffer* o = bufferevent_get_output(bev);
  if (after == After::kClose) {
    c->closing = true;
    bufferevent_disable(bev, EV_READ);
    if (evbuffer_get_length(o) == 0) free_conn(c);  // else on_write frees it
    return;
  }
  // A client that sends and does not read: stop reading until its replies
  // drain (on_write re-enables at the low watermark).
  if (evbuffer_get_length(o) > c->worker->server->options.max_output_bytes) {
    bufferevent_disable(bev, EV_READ);
  }
}

void on_write(bufferevent* bev, void* arg) {
  auto* c = static_cast<Conn*>(arg);
  if (c->closing) {
    if (evbuffer_get_length(bufferevent_get_output(bev)) == 0) free_conn(c);
    return;
  }
  bufferevent_enable(bev, EV_READ);
}

void on_event(bufferevent*, short what, void* arg) {
  if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) free_conn(static_cast<Conn*>(arg));
}

/// Takes the fds the listener queued for this worker.
void on_notify(evutil_socket_t, short, void* arg) {
  auto* w = static_cast<Worker*>(arg);
  std::vector<evutil_socket_t> fds;
  {
    std::lock_guard<std::mutex> g(w->mu);
    fds.swap(w->queued);
  }
  for (evutil_socket_t fd : fds) {
    auto* c = new Conn(*w->server->state);
    c->worker = w;
    c->bev = bufferevent_socket_new(w->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (c->bev == nullptr) {
      ::close(fd);
      w->server->state->curr_connections.fetch_sub(1, std::memory_order_relaxed);
      delete c;
      continue;
    }
    w->conns.insert(c);
    const size_t half = w->server->options.max_output_bytes / 2;
    bufferevent_setwatermark(c->bev, EV_WRITE, half, 0);
    bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
  }
}

/// stop()'s event: an event activated before its loop runs is still run
/// once it does, unlike event_base_loopbreak, which a loop not yet started
/// forgets.
void on_halt(evutil_socket_t, short, void* arg) {
  event_base_loopbreak(static_cast<event_base*>(arg));
}

void on_accept(evconnlistener*, evutil_socket_t fd, sockaddr*, int, void* arg) {
  auto* s = static_cast<Server::Impl*>(arg);
  ServerState& st = *s->state;
  if (st.curr_connections.load(std::memory_order_relaxed) >= s->options.max_connections) {
    static const char kFull[] = "ERROR Too many open connections\r\n";
    (void)!::write(fd, kFull, sizeof(kFull) - 1);
    ::close(fd);
    st.rejected_connections.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  st.curr_connections.fetch_add(1, std::memory_order_relaxed);
  st.total_connections.fetch_add(1, std::memory_order_relaxed);
  Worker& w = *s->workers[s->next++ % s->workers.size()];
  {
    std::lock_guard<std::mutex> g(w.mu);
    w.queued.push_back(fd);
  }
  event_active(w.notify, EV_READ, 0);
}

}  // namespace

Status Server::start(ServerState* state, const ServerOptions& o, std::unique_ptr<Server>* out) {
  if (o.threads == 0) return Status::InvalidArgument("serve: --threads must be 1 or more");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(o.port);
  if (::inet_pton(AF_INET, o.listen.c_str(), &addr.sin_addr) != 1) {
    return Status::InvalidArgument("serve: --listen '" + o.listen +
                                   "' is not an IPv4 address (e.g. 127.0.0.1)");
  }
  static std::once_flag threads_once;
  std::call_once(threads_once, [] { evthread_use_pthreads(); });
  std::unique_ptr<Server> srv(new Server);
  srv->impl_ = std::make_unique<Impl>();
  Impl& s = *srv->impl_;
  s.state = state;
  s.options = o;
  s.listen_base = event_base_new();
  if (s.listen_base == nullptr) return Status::IOError("serve: event_base_new failed");
  s.listen_halt = event_new(s.listen_base, -1, 0, on_halt, s.listen_base);
  s.listener =
      evconnlistener_new_bind(s.listen_base, on_accept, &s,
                              LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
                              1024, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  if (s.listener == nullptr) {
    const int e = errno;
    return Status::IOError("serve: cannot listen on " + o.listen + ":" + std::to_string(o.port) +
                           ": " + std::strerror(e));
  }
  sockaddr_in bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(evconnlistener_get_fd(s.listener), reinterpret_cast<sockaddr*>(&bound), &len);
  s.port = ntohs(bound.sin_port);
  for (unsigned i = 0; i < o.threads; ++i) {
    auto w = std::make_unique<Worker>();
    w->server = &s;
    w->base = event_base_new();
    if (w->base == nullptr) return Status::IOError("serve: event_base_new failed");
    w->notify = event_new(w->base, -1, EV_PERSIST, on_notify, w.get());
    // A persistent event with no fd stays pending (keeps the loop alive)
    // only once added: add it with no timeout.
    event_add(w->notify, nullptr);
    w->halt = event_new(w->base, -1, 0, on_halt, w->base);
    s.workers.push_back(std::move(w));
  }
  for (auto& w : s.workers) {
    Worker* wp = w.get();
    wp->thread = std::thread([wp] { event_base_loop(wp->base, EVLOOP_NO_EXIT_ON_EMPTY); });
  }
  s.listen_thread = std::thread([&s] { event_base_loop(s.listen_base, EVLOOP_NO_EXIT_ON_EMPTY); });
  *out = std::move(srv);
  return Status::Ok();
}

uint16_t Server::port() const { return impl_->port; }

void Server::stop() {
  if (impl_->listen_halt != nullptr) event_active(impl_->listen_halt, EV_READ, 0);
  for (auto& w : impl_->workers) {
    if (w->halt != nullptr) event_active(w->halt, EV_READ, 0);
  }
}

Server::~Server() {
  if (impl_ == nullptr) return;
  stop();
  if (impl_->listen_thread.joinable()) impl_->listen_thread.join();
  for (auto& w : impl_->workers) {
    if (w->thread.joinable()) w->thread.join();
  }
  if (impl_->listener != nullptr) evconnlistener_free(impl_->listener);
  for (auto& w : impl_->workers) {
    while (!w->conns.empty()) free_conn(*w->conns.begin());
    {
      std::lock_guard<std::mutex> g(w->mu);
      for (evutil_socket_t fd : w->queued) {
        ::close(fd);
        impl_->state->curr_connections.fetch_sub(1, std::memory_order_relaxed);
      }
      w->queued.clear();
    }
    if (w->notify != nullptr) event_free(w->notify);
    if (w->halt != nullptr) event_free(w->halt);
    if (w->base != nullptr) event_base_free(w->base);
  }
  if (impl_->listen_halt != nullptr) event_free(impl_->listen_halt);
  if (impl_->listen_base != nullptr) event_base_free(impl_->listen_base);
}

}  // namespace nvindex::server
