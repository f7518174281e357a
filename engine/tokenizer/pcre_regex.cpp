#include "engine/tokenizer/pcre_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <map>
#include <mutex>

#include "common/error.h"

namespace ns::tok {

namespace {

std::string pcre_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

// Per-thread match state: match data plus a JIT stack big enough for long
// runs of one character class (the default 32 KiB machine stack is not).
struct ThreadMatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  ThreadMatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (context && jit_stack) pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~ThreadMatchState() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
  }
};

ThreadMatchState& thread_state() {
  thread_local ThreadMatchState state;
  if (!state.data || !state.context)
    throw Error(ErrorKind::internal, "PCRE2 could not allocate match data (out of memory)");
  return state;
}

}  // namespace

Regex::Regex(std::string pattern) : pattern_(std::move(pattern)) {
  int err = 0;
  PCRE2_SIZE err_off = 0;
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(), options, &err, &err_off, nullptr);
  if (!code) {
    throw Error(ErrorKind::internal, "pre-tokenizer regex '" + pattern_ + "' does not compile at offset " +
                                         std::to_string(err_off) + ": " + pcre_message(err));
  }
  code_ = code;
  // JIT is an optimisation only: the interpreter gives the same matches.
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::shared_ptr<const Regex> Regex::compile(const std::string& pattern) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const Regex>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(pattern);
  if (it != cache.end()) return it->second;
  std::shared_ptr<const Regex> re(new Regex(pattern));
  cache.emplace(pattern, re);
  return re;
}

bool Regex::find(std::string_view subject, size_t start, std::pair<size_t, size_t>& match, bool anchored) const {
  ThreadMatchState& st = thread_state();
  auto* code = static_cast<pcre2_code*>(code_);
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  uint32_t options = PCRE2_NO_UTF_CHECK | (anchored ? PCRE2_ANCHORED : 0);
  int rc = pcre2_match(code, s, subject.size(), start, options, st.data, st.context);
  if (rc < 0 && rc != PCRE2_ERROR_NOMATCH && jit_) {
    // JIT stack exhausted (or another JIT limit): the interpreter keeps its
    // backtracking state on the heap, so retry there before giving up.
    rc = pcre2_match(code, s, subject.size(), start, options | PCRE2_NO_JIT, st.data, st.context);
  }
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    throw Error(ErrorKind::invalid_input, "pre-tokenizer regex '" + pattern_ + "' failed on a " +
                                              std::to_string(subject.size()) + "-byte text: " + pcre_message(rc) +
                                              " (split the text into smaller pieces)");
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
  match = {ov[0], ov[1]};
  return true;
}

bool Regex::matches_at(std::string_view subject, size_t at) const {
  std::pair<size_t, size_t> m;
  return find(subject, at, m, /*anchored=*/true);
}

}  // namespace ns::tok
