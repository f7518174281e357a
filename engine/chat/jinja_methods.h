// Python's methods of str, list and dict as templates call them
// (message.content.strip(), tools.append(x), d.get('k', 'x')), and the two
// string formatting forms ('%s' % x and '{}'.format(x)).
#pragma once

#include <string>

#include "engine/chat/jinja_value.h"

namespace ns::chat::jinja {

// obj.name as a callable bound to obj, or Undefined when obj's type has no
// such method.
Value bound_method(const Value& obj, const std::string& name);

std::string percent_format(const std::string& fmt, const Value& args);
std::string str_format(const std::string& fmt, const CallArgs& args);

// Shared string helpers (filters use them too).
std::string py_strip(const std::string& s, const Value& chars, bool left, bool right);
std::string py_upper(const std::string& s);
std::string py_lower(const std::string& s);
std::string py_capitalize(const std::string& s);
std::string py_title(const std::string& s);
// jinja2's title filter: words start after whitespace, '-', and opening brackets.
std::string jinja_title(const std::string& s);
std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count);

}  // namespace ns::chat::jinja
