// The operator's pages of the HTTP service: GET / (the status page,
// daemon/lib/status_page.h) and GET /metrics (the Prometheus text,
// daemon/lib/metrics_text.h), the same bytes `nightshift status --html` and
// `--prometheus` print, read from the queue the service serves.
//
// Contract: both need a bearer key when http.keys_file is set, as the /v1/
// routes do (the page and the metrics name batches, models, daemons and
// failure reasons; without keys the service is on loopback only). GET /
// takes ?batch=NAME (only that batch; 404 for no such batch) and
// ?refresh=SECONDS (0..3600, 0 = no auto-refresh; default 10).
#pragma once

#include <httplib.h>

#include "daemon/http/session.h"

namespace ns::http {

Reply status_page(Session& s, const httplib::Request& req);
Reply metrics_page(Session& s, const httplib::Request& req);

}  // namespace ns::http
