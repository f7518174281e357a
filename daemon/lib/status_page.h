// The status page: one self-contained HTML document (inline CSS and SVG, no
// script, nothing fetched from elsewhere, so it works offline and from a
// file) for a server's `/` and `nightshift status --html > status.html`.
//
// Contract: status_page_html() is a pure function of a snapshot taken with
// status_page_request() (daemon/lib/status_snapshot.h), the same data as
// `nightshift status --json`. It shows the queue's counts; each batch with a
// <progress class="batch-progress" data-batch="NAME" data-finished="N"
// data-total="M"> element, its throughput (the decode rate of its running
// jobs) and ETA (its unfinished lines at the rate its lines have finished
// since it was submitted, at least its running jobs' longest ETA); the
// running jobs; a tok/s-over-time chart of the
// last history hours as inline SVG (<svg id="throughput-chart">: completion
// tokens of the jobs that finished in each bucket over the bucket's length);
// the daemons and what each runs; the last failures with their reasons.
// Every text from the queue (batch names, models, workers, errors) is
// HTML-escaped, invalid UTF-8 replaced. With refresh_s > 0 the page reloads
// itself (<meta http-equiv="refresh">).
#pragma once

#include <string>
#include <string_view>

#include "daemon/lib/status_snapshot.h"

namespace ns::daemon {

struct StatusPageOptions {
  int refresh_s = 10;  // 0: no auto-refresh
};

// The page's HTTP Content-Type.
inline constexpr const char* kStatusPageContentType = "text/html; charset=utf-8";

// What the page reads: batches, running and recent jobs, failures, workers, 6 hours of history in 10-minute
// buckets.
StatusRequest status_page_request();

std::string status_page_html(const StatusSnapshot& s, const StatusPageOptions& options = {});

// `text` as HTML text or attribute value: & < > " ' escaped, invalid UTF-8 replaced by U+FFFD.
std::string html_escape(std::string_view text);

}  // namespace ns::daemon
