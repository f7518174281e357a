#include "daemon/http/status_routes.h"

#include <charconv>
#include <string>

#include "daemon/lib/metrics_text.h"
#include "daemon/lib/status_page.h"
#include "daemon/lib/status_snapshot.h"

namespace ns::http {

Reply status_page(Session& s, const httplib::Request& req) {
  daemon::StatusRequest request = daemon::status_page_request();
  daemon::StatusPageOptions options;
  if (req.has_param("refresh")) {
    const std::string text = req.get_param_value("refresh");
    int value = -1;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value < 0 || value > 3600) {
      throw ApiError(400, "refresh must be a whole number of seconds from 0 (no auto-refresh) to 3600", "refresh");
    }
    options.refresh_s = value;
  }
  if (req.has_param("batch")) {
    request.batch = req.get_param_value("batch");
    const jobs::QueueCounts c = s.queue.counts(request.batch);
    if (c.queued + c.running + c.done + c.failed + c.cancelled + c.dead == 0) {
      throw ApiError(404, "no batch named '" + request.batch + "' in the queue", "batch");
    }
  }
  return {200, daemon::status_page_html(daemon::take_status(s.queue, request), options),
          daemon::kStatusPageContentType};
}

Reply metrics_page(Session& s, const httplib::Request&) {
  return {200, daemon::metrics_text(daemon::take_status(s.queue, daemon::metrics_request())),
          daemon::kMetricsContentType};
}

}  // namespace ns::http
