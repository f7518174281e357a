#include "common/redact.h"

#include <cctype>
#include <vector>

namespace ns {
namespace {

constexpr std::string_view kMask = "***";

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// The length of a scheme "postgres://" or "postgresql://" at the start of `s`, else 0.
size_t pg_scheme_length(std::string_view s) {
  for (std::string_view scheme : {std::string_view("postgresql://"), std::string_view("postgres://")}) {
    if (s.size() >= scheme.size() && iequal(s.substr(0, scheme.size()), scheme)) return scheme.size();
  }
  return 0;
}

// Every "password=VALUE" of a query ("?a=b&password=c#f"): VALUE up to '&' or '#'.
std::string redact_query(std::string_view query, std::vector<std::string>* found) {
  std::string out;
  size_t at = 0;
  while (at < query.size()) {
    const size_t end = query.find_first_of("&#", at);
    const std::string_view param = query.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    const size_t eq = param.find('=');
    if (eq != std::string_view::npos && iequal(param.substr(0, eq), "password")) {
      out.append(param.substr(0, eq + 1));
      out.append(kMask);
      if (found != nullptr) found->emplace_back(param.substr(eq + 1));
    } else {
      out.append(param);
    }
    if (end == std::string_view::npos) break;
    out.push_back(query[end]);
    if (query[end] == '#') {  // the fragment is not parameters
      out.append(query.substr(end + 1));
      break;
    }
    at = end + 1;
  }
  return out;
}

std::string redact_uri(std::string_view uri, size_t scheme_length, std::vector<std::string>* found) {
  std::string out(uri.substr(0, scheme_length));
  std::string_view rest = uri.substr(scheme_length);
  const size_t first_at = rest.find('@');
  if (first_at != std::string_view::npos) {
    // The userinfo ends at the last '@' before the first '/' after the first '@'.
    const size_t slash = rest.find('/', first_at);
    const size_t at = rest.rfind('@', slash == std::string_view::npos ? std::string_view::npos : slash);
    const std::string_view userinfo = rest.substr(0, at);
    const size_t colon = userinfo.find(':');
    if (colon != std::string_view::npos) {
      out.append(userinfo.substr(0, colon + 1));
      out.append(kMask);
      if (found != nullptr) found->emplace_back(userinfo.substr(colon + 1));
    } else {
      out.append(userinfo);
    }
    out.push_back('@');
    rest = rest.substr(at + 1);
  }
  const size_t question = rest.find('?');
  if (question == std::string_view::npos) {
    out.append(rest);
  } else {
    out.append(rest.substr(0, question + 1));
    out.append(redact_query(rest.substr(question + 1), found));
  }
  return out;
}

// libpq's key = value form: keys are words, values bare (to whitespace) or
// single-quoted with backslash escapes.
std::string redact_conninfo(std::string_view s, std::vector<std::string>* found) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (is_space(s[i])) {
      out.push_back(s[i++]);
      continue;
    }
    const size_t key_start = i;
    while (i < s.size() && !is_space(s[i]) && s[i] != '=') ++i;
    const std::string_view key = s.substr(key_start, i - key_start);
    out.append(key);
    size_t j = i;
    while (j < s.size() && is_space(s[j])) ++j;
    if (j >= s.size() || s[j] != '=') {
      continue;  // a word without '=': not a pair, copied as it is
    }
    ++j;
    out.append(s.substr(i, j - i));  // the spaces and '='
    i = j;
    while (i < s.size() && is_space(s[i])) out.push_back(s[i++]);
    const size_t value_start = i;
    if (i < s.size() && s[i] == '\'') {
      ++i;
      while (i < s.size() && s[i] != '\'') i += (s[i] == '\\' && i + 1 < s.size()) ? 2 : 1;
      if (i < s.size()) ++i;  // the closing quote
    } else {
      while (i < s.size() && !is_space(s[i])) i += (s[i] == '\\' && i + 1 < s.size()) ? 2 : 1;
    }
    if (iequal(key, "password")) {
      out.append(kMask);
      if (found != nullptr) found->emplace_back(s.substr(value_start, i - value_start));
    } else {
      out.append(s.substr(value_start, i - value_start));
    }
  }
  return out;
}

std::string redact(std::string_view text, std::vector<std::string>* found) {
  // A URI anywhere in the text (a message quoting one) is redacted where it
  // stands: from its scheme to the next whitespace.
  if (const size_t scheme = pg_scheme_length(text); scheme > 0)
    return redact_uri(text, scheme, found);  // the URL itself
  std::string out;
  size_t i = 0;
  bool any_uri = false;
  while (i < text.size()) {
    const size_t scheme = pg_scheme_length(text.substr(i));
    if (scheme > 0 && (i == 0 || !std::isalnum(static_cast<unsigned char>(text[i - 1])))) {
      size_t end = i;
      while (end < text.size() && !is_space(text[end])) ++end;
      out.append(redact_uri(text.substr(i, end - i), scheme, found));
      i = end;
      any_uri = true;
      continue;
    }
    out.push_back(text[i++]);
  }
  // key=value pairs around (or without) a URL: a URL is one word whose key
  // is not "password", so it passes through unchanged.
  return redact_conninfo(any_uri ? std::string_view(out) : text, found);
}

}  // namespace

std::string redact_secrets(std::string_view text) { return redact(text, nullptr); }

std::vector<std::string> secrets_in(std::string_view text) {
  std::vector<std::string> found;
  redact(text, &found);
  std::erase_if(found, [](const std::string& s) { return s.empty(); });
  return found;
}

}  // namespace ns
