// The Jinja engine's values: Python's objects as jinja2 sees them (None,
// bool, int, float, str, list, tuple, dict, callables, namespace, Undefined),
// with Python's equality, ordering, truth, str() and repr(), and json.dumps.
//
// Lists and dicts are shared references like Python's (append through one
// name is seen through every other); dicts keep insertion order. Strings are
// UTF-8; lengths and indices count code points (jinja_value.cpp's helpers).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"

namespace ns::chat::jinja {

class Value;

// Arguments of a call: positional, then keyword in the order written.
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

using Function = std::function<Value(CallArgs&)>;

struct ListData {
  std::vector<Value> items;
  bool tuple = false;      // prints (a, b); never equal to a list
  bool generator = false;  // what select/map return: always true, no len(), no JSON
};

struct DictData {
  std::vector<std::pair<Value, Value>> items;  // insertion order
  bool is_namespace = false;                   // namespace(): attribute assignment allowed
  const Value* find(const Value& key) const;
  Value* find(const Value& key);
  void set(const Value& key, Value v);
  bool erase(const Value& key);
};

enum class Kind { undefined, none, boolean, integer, floating, string, list, dict, function };

class Value {
 public:
  Value() = default;  // Undefined
  static Value undefined(std::string hint = {});
  static Value none();
  Value(bool b);
  Value(int v) : Value(static_cast<int64_t>(v)) {}
  Value(int64_t v);
  Value(double v);
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}
  static Value list(std::vector<Value> items = {}, bool tuple = false);
  static Value generator(std::vector<Value> items);
  static Value dict();
  static Value ns_object();
  static Value function(Function f, std::string name = {});
  static Value from_json(const nlohmann::ordered_json& j);
  // A string marked safe (markupsafe's Markup): what |safe and |escape
  // return; str + Markup escapes the plain side.
  static Value markup(std::string s);
  bool is_markup() const { return kind_ == Kind::string && markup_; }

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool is_none() const { return kind_ == Kind::none; }
  bool is_bool() const { return kind_ == Kind::boolean; }
  bool is_int() const { return kind_ == Kind::integer; }
  bool is_float() const { return kind_ == Kind::floating; }
  bool is_number() const { return kind_ == Kind::integer || kind_ == Kind::floating || kind_ == Kind::boolean; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_list() const { return kind_ == Kind::list; }
  bool is_dict() const { return kind_ == Kind::dict; }
  bool is_function() const { return kind_ == Kind::function; }
  bool is_namespace() const { return kind_ == Kind::dict && dict_->is_namespace; }
  bool is_generator() const { return kind_ == Kind::list && list_->generator; }
  bool is_tuple() const { return kind_ == Kind::list && list_->tuple; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::boolean ? (b_ ? 1 : 0) : i_; }
  double as_double() const;
  const std::string& str() const { return s_; }  // the text of a string, the hint of an undefined
  ListData& list_data() const { return *list_; }
  DictData& dict_data() const { return *dict_; }
  std::vector<Value>& items() const { return list_->items; }
  const Function& fn() const { return *fn_; }
  const std::string& fn_name() const { return s_; }

  bool truthy() const;
  std::string to_str() const;     // Python str(), as {{ x }} prints it
  std::string repr() const;       // Python repr(), as inside a printed list
  std::string type_name() const;  // Python's type name for messages: 'dict object' style

 private:
  Kind kind_ = Kind::undefined;
  bool b_ = false;
  bool markup_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<ListData> list_;
  std::shared_ptr<DictData> dict_;
  std::shared_ptr<Function> fn_;
};

// Raised by the engine: a template error with jinja2's message.
[[noreturn]] void fail(const std::string& message);
// The message jinja2 gives when an undefined value is used: its hint, or "'x' is undefined".
[[noreturn]] void fail_undefined(const Value& v);

bool py_equal(const Value& a, const Value& b);
int py_compare(const Value& a, const Value& b);  // <0, 0, >0; throws on unorderable types
std::string py_float_repr(double d);
std::string py_str_repr(const std::string& s);

struct JsonOptions {
  bool ensure_ascii = false;
  int indent = -1;         // -1: no indent (one line)
  std::string indent_str;  // when indent was given as a string
  bool has_separators = false;
  std::string item_sep = ", ", key_sep = ": ";
  bool sort_keys = false;
};
std::string py_json_dumps(const Value& v, const JsonOptions& o);

std::string html_escape(const std::string& s);

// UTF-8 by code point, like Python's str.
size_t u8_length(const std::string& s);
std::vector<std::string> u8_chars(const std::string& s);

}  // namespace ns::chat::jinja
