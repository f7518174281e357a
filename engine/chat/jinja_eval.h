// The Jinja evaluator: runs a parsed template (jinja_ast.h) against a context.
// One Renderer per render call; it owns the scopes and the macros the
// template defines, so a parsed tree is shared read-only between renders.
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/chat/jinja_ast.h"

namespace ns::chat::jinja {

struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;
};
using FramePtr = std::shared_ptr<Frame>;

struct RenderLimits {
  size_t max_output_bytes = 64u << 20;
  int max_call_depth = 200;
  bool has_now = false;
  std::time_t now = 0;
};

class Renderer {
 public:
  explicit Renderer(const RenderLimits& limits) : limits_(limits) {}
  std::string render(const Body& body, const Value& context);

 private:
  enum class Flow { normal, break_, continue_ };

  Flow exec(const Body& body, const FramePtr& f, std::string& out);
  Flow exec_for(const Stmt& s, const FramePtr& f, const Value& seq, int depth, std::string& out);
  void exec_set(const Stmt& s, const FramePtr& f, const Value& v);
  Value eval(const Expr& e, const FramePtr& f);
  Value eval_call(const Expr& e, const FramePtr& f, const Value* caller);
  Value eval_filter(const Expr& e, const FramePtr& f, const Value* placeholder);
  Value lookup(const std::string& name, const FramePtr& f) const;
  Value make_macro(const Stmt& s, const FramePtr& def, bool is_caller);
  void install_globals(const FramePtr& f);
  void append(std::string& out, const std::string& s) const;

  RenderLimits limits_;
  int depth_ = 0;
  // Scopes that define macros, kept until the render ends: a macro holds its
  // scope weakly, since the scope holds the macro (no reference cycle).
  std::vector<FramePtr> macro_scopes_;
};

}  // namespace ns::chat::jinja
