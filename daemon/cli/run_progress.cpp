#include "daemon/cli/run_progress.h"

#include "daemon/lib/progress_format.h"

#include <algorithm>
#include <filesystem>

#include "common/human_size.h"

namespace ns::cli {
// The progress pieces (daemon/lib/progress_format.h).
using daemon::ago;
using daemon::eta_seconds;
using daemon::format_duration;
using daemon::format_rate;
using daemon::progress_bar;
namespace {

// Below this a generation is short enough that a progress line is only noise.
constexpr double kShowAfterS = 0.5;
constexpr double kRedrawEveryS = 0.1;

}  // namespace

std::string run_progress_text(const GenerationProgress& p, int32_t max_tokens, double phase_elapsed_s) {
  const bool prefill = p.generated == 0 && p.prefilled < p.prompt_tokens;
  const int64_t done = prefill ? p.prefilled : p.generated;
  const int64_t total = prefill ? p.prompt_tokens : max_tokens;
  // The decode phase starts at the first token (it closes the prefill): its
  // speed counts the tokens after it.
  const int64_t counted = prefill ? done : std::max<int64_t>(done - 1, 0);
  const double rate = phase_elapsed_s > 0 ? static_cast<double>(counted) / phase_elapsed_s : 0;
  std::string s = std::string(prefill ? "prefill " : "decode  ") + progress_bar(done, total, 24) + " " +
                  std::to_string(done) + "/" + std::to_string(total) + (prefill ? " prompt tok" : " tok");
  if (rate > 0) {
    s += ", " + format_rate(rate) + " tok/s";
    if (auto eta = eta_seconds(done, total, rate)) s += ", ETA " + format_duration(*eta);
  }
  return s;
}

RunProgress::RunProgress(FILE* out, bool enabled, bool show_decode, int32_t max_tokens)
    : out_(out), enabled_(enabled), show_decode_(show_decode), max_tokens_(max_tokens) {}

void RunProgress::loading(const std::string& path) {
  if (!enabled_) return;
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  draw("loading " + std::filesystem::path(path).filename().string() +
       (ec ? std::string() : " (" + format_size(bytes) + ")") + "...");
}

void RunProgress::before_text() {
  if (!show_decode_) erase();
}

void RunProgress::update(const GenerationProgress& p) {
  if (!enabled_) return;
  const Clock::time_point now = Clock::now();
  if (!decoding_ && p.generated > 0) {
    decoding_ = true;
    phase_start_ = now;
    if (!show_decode_) {
      erase();
      return;
    }
  }
  if (decoding_ && !show_decode_) return;
  // The first report (prefilled 0) starts the prefill phase; it replaces a
  // loading line at once, so the line never shows a finished load.
  const bool first = !prefill_seen_;
  if (first) {
    prefill_seen_ = true;
    if (!decoding_) phase_start_ = now;
  }
  if (!(first && shown_)) {
    if (std::chrono::duration<double>(now - start_).count() < kShowAfterS) return;
    if (shown_ && std::chrono::duration<double>(now - last_draw_).count() < kRedrawEveryS) return;
  }
  last_draw_ = now;
  draw(run_progress_text(p, max_tokens_, std::chrono::duration<double>(now - phase_start_).count()));
}

void RunProgress::finish() { erase(); }

void RunProgress::draw(const std::string& text) {
  std::fprintf(out_, "\r\x1b[K%s", text.c_str());
  std::fflush(out_);
  shown_ = true;
}

void RunProgress::erase() {
  if (!shown_) return;
  std::fprintf(out_, "\r\x1b[K");
  std::fflush(out_);
  shown_ = false;
}

}  // namespace ns::cli
