// nightshiftd's HTTP service (the `http:` config section): the OpenAI
// Batch and Files API, the status page at / and the Prometheus metrics at
// /metrics (daemon/http/routes.h) on its own threads, with its own
// connections to the daemon's queue database.
//
// Contract: the constructor reads http.keys_file and binds http.listen, and
// throws ns::Error(invalid_input) for a configuration problem (keys file
// unreadable or empty, a non-loopback address without keys, an address that
// cannot be bound, named with the fix) before any request is served; then
// serves until stop() or destruction. Every route (/v1/, /, /metrics) needs
// `Authorization: Bearer KEY` (one of the file's keys, compared in constant time) when a
// keys file is set: 401 otherwise. Bodies above http.max_file_bytes (plus the
// multipart framing) get 413. A request turned away (401, 404, 413) has its
// body drained, never kept, so a keep-alive client's next request on the
// connection is answered as itself. Handler errors
// become OpenAI error objects: 400/404/409 for the caller's mistakes, 503 for
// a database that is busy or unreachable (retry), 500 otherwise (logged).
// Keys and request bodies are never logged.
#pragma once

#include <memory>
#include <string>

#include "daemon/lib/config.h"
#include "jobs/sqlite_queue.h"

namespace ns::http {

class HttpService {
 public:
  HttpService(const daemon::Config& config, const std::string& database, const jobs::SqliteOptions& sqlite);
  ~HttpService();
  HttpService(const HttpService&) = delete;
  HttpService& operator=(const HttpService&) = delete;

  int port() const;  // the bound port (http.listen may ask for port 0: any free one)
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ns::http
