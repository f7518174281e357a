// The HTTP API's routes: one table row per method and path (a regular
// expression; its groups are the handler's req.matches). Adding a page is
// one row here, e.g. {"GET", "/metrics", Access::key, metrics_page}.
#pragma once

#include <httplib.h>

#include <vector>

#include "daemon/http/session.h"

namespace ns::http {

enum class Access {
  key,   // needs a bearer key when http.keys_file is set (every route now: /v1/, /, /metrics)
  open,  // no key (pages meant for a browser on a trusted network)
};

struct Route {
  const char* method;   // "GET", "POST", "DELETE"
  const char* pattern;  // matched against the whole path
  Access access;
  Reply (*handler)(Session&, const httplib::Request&);
};

const std::vector<Route>& routes();

}  // namespace ns::http
