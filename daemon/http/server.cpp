#include "daemon/http/server.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <regex>
#include <thread>
#include <vector>

#include "daemon/http/routes.h"
#include "jobs/open_queue.h"

namespace ns::http {
namespace {

constexpr size_t kThreads = 4;               // requests served at once (each holds its own connections)
constexpr size_t kMultipartSlack = 1 << 20;  // an upload's framing on top of http.max_file_bytes

// One thread's connections to the database: a queue and a store.
struct Connections {
  std::unique_ptr<jobs::Queue> queue;
  std::unique_ptr<jobs::ApiStore> store;
};

void set_reply(httplib::Response& res, const Reply& r) {
  res.status = r.status;
  res.set_content(r.body, r.content_type.c_str());
}

}  // namespace

struct HttpService::Impl {
  Impl(const daemon::Config& config, std::string db, const jobs::SqliteOptions& sqlite)
      : state(config), database(std::move(db)), sqlite_options(sqlite), pg_options{config.password_file} {}

  ServiceState state;
  const std::string database;
  jobs::SqliteOptions sqlite_options;
  jobs::PgOptions pg_options;
  httplib::Server server;
  std::thread thread;
  int port = 0;
  std::atomic<bool> listening_ended{false};
  std::vector<std::regex> patterns;  // routes()' patterns, compiled once

  std::mutex pool_mu;
  std::vector<std::unique_ptr<Connections>> pool;  // idle connections, reused by the next request

  std::unique_ptr<Connections> acquire() {
    {
      std::lock_guard lock(pool_mu);
      if (!pool.empty()) {
        std::unique_ptr<Connections> c = std::move(pool.back());
        pool.pop_back();
        return c;
      }
    }
    auto c = std::make_unique<Connections>();
    c->queue = jobs::open_queue(database, sqlite_options, pg_options);
    c->store = jobs::open_api_store(database, sqlite_options, pg_options);
    return c;
  }
  void release(std::unique_ptr<Connections> c) {
    std::lock_guard lock(pool_mu);
    if (pool.size() < kThreads) pool.push_back(std::move(c));
  }

  const Route* route_of(const httplib::Request& req) const {
    for (size_t i = 0; i < routes().size(); ++i) {
      if (req.method == routes()[i].method && std::regex_match(req.path, patterns[i])) return &routes()[i];
    }
    return nullptr;
  }

  void serve(const Route& route, const httplib::Request& req, httplib::Response& res) {
    std::unique_ptr<Connections> c;
    try {
      c = acquire();
      Session session{state, *c->queue, *c->store};
      set_reply(res, route.handler(session, req));
      release(std::move(c));
    } catch (const ApiError& e) {
      if (c) release(std::move(c));
      set_reply(res, error_reply(e.status(), e.what(), e.param(), e.code()));
    } catch (const jobs::DatabaseError& e) {
      // The connections are dropped: the next request opens fresh ones.
      spdlog::warn("http: {} {}: {}", req.method, req.path, e.what());
      set_reply(res, e.transient()
                         ? error_reply(
                               503, std::string("the queue's database is busy or unreachable; try again: ") + e.what())
                         : error_reply(500, std::string("the queue's database failed: ") + e.what()));
    } catch (const Error& e) {
      if (c) release(std::move(c));
      if (e.kind() == ErrorKind::invalid_input) {
        set_reply(res, error_reply(400, e.what()));
      } else {
        spdlog::error("http: {} {}: {}", req.method, req.path, e.what());
        set_reply(res, error_reply(500, e.what()));
      }
    } catch (const std::exception& e) {
      spdlog::error("http: {} {}: internal error: {}", req.method, req.path, e.what());
      set_reply(res, error_reply(500, std::string("internal error: ") + e.what()));
    }
  }
};

HttpService::HttpService(const daemon::Config& config, const std::string& database, const jobs::SqliteOptions& sqlite)
    : impl_(std::make_unique<Impl>(config, database, sqlite)) {
  const daemon::HttpConfig& http = config.http;
  const daemon::ListenAddress address = daemon::parse_listen_address(http.listen);
  if (!http.keys_file.empty()) impl_->state.keys = KeyCheck(load_api_keys(http.keys_file));
  if (!impl_->state.keys.required() && !daemon::is_loopback_host(address.host)) {
    throw Error(ErrorKind::invalid_input, "http.listen " + http.listen +
                                              " is not a loopback address and no http.keys_file is set; give keys_file "
                                              "or listen on 127.0.0.1");
  }
  for (const Route& r : routes()) impl_->patterns.emplace_back(r.pattern);

  Impl* impl = impl_.get();
  httplib::Server& server = impl->server;
  server.new_task_queue = [] { return new httplib::ThreadPool(kThreads); };
  server.set_payload_max_length(http.max_file_bytes + kMultipartSlack);
  server.set_keep_alive_timeout(5);
  // Before the body is read: a caller without a key cannot make the daemon take in an upload.
  server.set_pre_routing_handler([impl](const httplib::Request& req, httplib::Response& res) {
    const Route* route = impl->route_of(req);
    if (route == nullptr) {
      set_reply(res, error_reply(404, "no route " + req.method + " " + req.path +
                                          " (this server has the OpenAI Files and Batches API under /v1/, the "
                                          "status page at / and Prometheus metrics at /metrics)"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (route->access == Access::key && !impl->state.keys.accepts(req.get_header_value("Authorization"))) {
      set_reply(res, error_reply(401,
                                 "missing or incorrect API key: send Authorization: Bearer KEY with a key of the "
                                 "daemon's http.keys_file",
                                 "", "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  for (const Route& route : routes()) {
    const Route* r = &route;
    auto handler = [impl, r](const httplib::Request& req, httplib::Response& res) { impl->serve(*r, req, res); };
    const std::string method = route.method;
    if (method == "GET") server.Get(route.pattern, handler);
    if (method == "POST") server.Post(route.pattern, handler);
    if (method == "DELETE") server.Delete(route.pattern, handler);
  }
  server.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    spdlog::debug("http: {} {} -> {}", req.method, req.path, res.status);  // never headers (keys) nor bodies
  });

  impl->port = address.port == 0 ? server.bind_to_any_port(address.host) : address.port;
  if (impl->port <= 0 || (address.port != 0 && !server.bind_to_port(address.host, address.port))) {
    throw Error(ErrorKind::invalid_input, "http.listen " + http.listen + ": cannot listen there (" +
                                              std::strerror(errno) +
                                              "); is another process (another nightshiftd?) using the port, or is the "
                                              "host not an address of this machine? Give another http.listen");
  }
  impl->thread = std::thread([impl] {
    impl->server.listen_after_bind();
    impl->listening_ended = true;
  });
  spdlog::info("http: the OpenAI Files and Batches API listens on {}:{}{}; the status page at /, metrics at /metrics",
               address.host, impl->port,
               impl->state.keys.required() ? " (bearer keys required)" : " (loopback, no keys)");
}

HttpService::~HttpService() { stop(); }

int HttpService::port() const { return impl_->port; }

void HttpService::stop() {
  if (!impl_->thread.joinable()) return;
  // stop() before the thread has begun listening would be lost: wait for either.
  while (!impl_->server.is_running() && !impl_->listening_ended)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->server.stop();
  impl_->thread.join();
}

}  // namespace ns::http
