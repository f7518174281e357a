// The Jinja engine's syntax tree: expressions and statements as the parser
// (jinja_parser.cpp) builds them and the evaluator (jinja_eval.cpp) walks
// them. Immutable once parsed.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/chat/jinja_lexer.h"
#include "engine/chat/jinja_value.h"

namespace ns::chat::jinja {

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct Expr {
  enum class Kind {
    literal,  // value
    name,     // name
    list,     // args
    tuple,    // args
    dict,     // args: key, value, key, value...
    attr,     // args[0].name
    item,     // args[0][args[1]]
    slice,    // args[0][args[1]:args[2]:args[3]] (null parts absent)
    call,     // args[0](args[1..], kwargs)
    filter,   // name: args[0] | name(args[1..], kwargs)
    test,     // name: args[0] is [not] name(args[1..], kwargs)
    unary,    // name in "-", "+", "not": args[0]
    binary,   // name in + - * / // % ** ~ and or in "not in" == != < <= > >=
    compare,  // chained: args[0] ops[0] args[1] ops[1] args[2]...
    cond,     // args[1] if args[0] else args[2] (args[2] may be null)
  };
  Kind kind;
  int line = 0;
  std::string name;
  Value value;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

struct Stmt;
using StmtPtr = std::shared_ptr<const Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    text,        // text
    output,      // {{ expr }}
    if_,         // conds[k] -> bodies[k]; else_body
    for_,        // targets in expr [if cond] body [else else_body]
    set,         // targets (or target_expr for ns.attr) = expr
    set_block,   // targets = rendered body (filtered by filter if set)
    macro,       // name(params) body
    call_block,  // {% call(params) expr %} body: caller
    filter,      // {% filter f %} body: filter is an Expr whose args[0] is null
    break_,
    continue_,
    block,  // generation, and other bodies rendered in place
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  ExprPtr target_expr;  // set ns.attr = ...
  ExprPtr filter;
  std::vector<std::string> targets;
  bool target_tuple = false;
  std::vector<ExprPtr> conds;
  std::vector<Body> bodies;
  Body body, else_body;
  // Macro and call-block parameters: name and default (null if none).
  std::vector<std::pair<std::string, ExprPtr>> params;
  bool recursive = false;
};

// Throws ns::Error(invalid_input) "TemplateSyntaxError: ..." on bad syntax.
Body parse_template(const std::vector<Token>& tokens);

}  // namespace ns::chat::jinja
