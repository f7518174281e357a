// The Jinja engine's built-in vocabulary: filters, tests, attribute and item
// access (with the methods of str, list and dict), and the operators with
// Python's semantics. Stateless: the evaluator (jinja_eval.cpp) calls these.
#pragma once

#include <string>
#include <vector>

#include "engine/chat/jinja_value.h"

namespace ns::chat::jinja {

Value apply_filter(const std::string& name, const Value& subject, CallArgs& args);
bool has_filter(const std::string& name);
bool apply_test(const std::string& name, const Value& subject, CallArgs& args);

// obj.name: a dict's method, else its key; a str or list method; Undefined
// (with jinja2's hint) when absent; raises on an undefined obj.
Value get_attr(const Value& obj, const std::string& name);
// obj[key]: the item, else (a string key) the attribute.
Value get_item(const Value& obj, const Value& key);
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

Value binary_op(const std::string& op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);
// The items a for loop visits: a list's items, a dict's keys, a string's characters.
std::vector<Value> iterate(const Value& v);

// Keyword or positional argument k of a builtin call (Undefined when absent).
Value arg(const CallArgs& a, size_t k, const char* name);

}  // namespace ns::chat::jinja
