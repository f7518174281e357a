#include "daemon/http/server.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
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

// httplib reads a body for these methods (its expect_content); a request turned away unread would leave its body on
// the connection, to be parsed as the next request of a keep-alive client.
bool carries_body(const httplib::Request& req) {
  return req.method == "POST" || req.method == "PUT" || req.method == "PATCH" || req.method == "DELETE";
}

// Reads the body as httplib would into req.body or req.files of `into`; into == nullptr drains it (kept nowhere).
bool read_body(const httplib::Request& req, const httplib::ContentReader& reader, httplib::Request* into) {
  if (req.is_multipart_form_data()) {
    httplib::MultipartFormData* part = nullptr;
    return reader(
        [&](const httplib::MultipartFormData& header) {
      if (into != nullptr) part = &into->files.emplace(header.name, header)->second;
      return true;
        },
        [&](const char* data, size_t n) {
      if (part != nullptr) part->content.append(data, n);
      return true;
    });
  }
  return reader([&](const char* data, size_t n) {
    if (into != nullptr) into->body.append(data, n);
    return true;
  });
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

  // The reply turning the request away before its body is taken in (no route, no key), if any.
  std::optional<Reply> refusal(const Route* route, const httplib::Request& req) const {
    if (route == nullptr) {
      return error_reply(404, "no route " + req.method + " " + req.path +
                                  " (this server has the OpenAI Files and Batches API under /v1/, the status page at / "
                                  "and Prometheus metrics at /metrics)");
    }
    if (route->access == Access::key && !state.keys.accepts(req.get_header_value("Authorization"))) {
      return error_reply(401,
                         "missing or incorrect API key: send Authorization: Bearer KEY with a key of the daemon's "
                         "http.keys_file",
                         "", "invalid_api_key");
    }
    return std::nullopt;
  }

  // A request with a body: turned away with its body drained, else read whole and served.
  void serve_with_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    const Route* route = route_of(req);
    if (std::optional<Reply> refused = refusal(route, req)) {
      read_body(req, reader, nullptr);
      set_reply(res, *refused);
      return;
    }
    httplib::Request full = req;
    if (!read_body(req, reader, &full)) {
      set_reply(res, res.status == 413 ? error_reply(413,
                                                     "the request body is larger than http.max_file_bytes "
                                                     "allows (plus the form's framing); split the batch")
                                       : error_reply(400,
                                                     "the request body could not be read: a malformed "
                                                     "multipart form, or the connection dropped"));
      return;
    }
    std::regex_match(full.path, full.matches, patterns[static_cast<size_t>(route - routes().data())]);
    serve(*route, full, res);
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
  // A caller without a key cannot make the daemon store an upload: bodiless requests are turned away here.
  server.set_pre_routing_handler([impl](const httplib::Request& req, httplib::Response& res) {
    if (carries_body(req)) return httplib::Server::HandlerResponse::Unhandled;  // serve_with_body decides
    if (std::optional<Reply> refused = impl->refusal(impl->route_of(req), req)) {
      set_reply(res, *refused);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  for (const Route& route : routes()) {
    const Route* r = &route;
    if (std::string(route.method) == "GET") {
      server.Get(route.pattern,
                 [impl, r](const httplib::Request& req, httplib::Response& res) { impl->serve(*r, req, res); });
    }
  }
  // Every request with a body, routed or not, comes here before httplib would read it.
  const auto with_body = [impl](const httplib::Request& req, httplib::Response& res,
                                const httplib::ContentReader& reader) { impl->serve_with_body(req, res, reader); };
  server.Post(".*", with_body);
  server.Put(".*", with_body);
  server.Patch(".*", with_body);
  server.Delete(".*", with_body);
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
