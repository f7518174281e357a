// `nightshift run`'s live progress line on stderr, like llama.cpp's timings
// but while it happens: "loading model.gguf (1.20 GiB)..." while the model
// loads, then "prefill [####------] 1024/4096 tok, 210.5 tok/s" (from 0/4096
// before the first chunk, which may take seconds) and
// "decode [##--------] 37/200 tok, 3.10 tok/s, ETA 52s".
//
// Contract: shown only when stderr is a terminal; the loading line at once,
// the prefill line at once after it (else once the generation has run for a
// moment: short prompts print nothing extra); redrawn in place at most
// ~10 times a second; the decode line only when stdout is not that terminal
// (otherwise the streamed text is the progress); the line is erased before
// text is written to a shared terminal and at finish(). Not thread-safe (the
// engine calls back on one thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "engine/engine.h"

namespace ns::cli {

// The line's text for a point in a generation, without terminal codes.
// `phase_elapsed_s` is the time in the current phase (prefill: since the
// start; decode: since the first token).
std::string run_progress_text(const GenerationProgress& p, int32_t max_tokens, double phase_elapsed_s);

class RunProgress {
 public:
  // show_decode: stdout is not the terminal stderr is (the streamed text does not share the line).
  RunProgress(FILE* out, bool enabled, bool show_decode, int32_t max_tokens);
  // The model at `path` is being loaded (call before Engine::load).
  void loading(const std::string& path);
  // Call before writing generated text to stdout (on a shared terminal the line must go first).
  void before_text();
  void update(const GenerationProgress& p);
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  void draw(const std::string& text);
  void erase();
  FILE* out_;
  bool enabled_, show_decode_;
  int32_t max_tokens_;
  Clock::time_point start_ = Clock::now(), phase_start_ = start_, last_draw_{};
  bool decoding_ = false, shown_ = false, prefill_seen_ = false;
};

}  // namespace ns::cli
