// Jinja parser: tokens to the syntax tree of jinja_ast.h, with jinja2's
// operator precedence (lowest first): conditional, or, and, not, comparisons
// and in, + -, ~, * / // %, **, unary - +, then primary with its postfixes
// (.attr [item] (call)) and filters and tests.
#include <set>

#include "engine/chat/jinja_ast.h"

namespace ns::chat::jinja {

namespace {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& t) : t_(t) {}

  Body parse_all() {
    Body body = parse_body({});
    if (cur().type != Tok::eof) fail_at("unexpected '" + cur().text + "'");
    return body;
  }

 private:
  const Token& cur() const { return t_[p_]; }
  const Token& peek(size_t n = 1) const { return t_[std::min(p_ + n, t_.size() - 1)]; }
  void next() {
    if (p_ + 1 < t_.size()) ++p_;
  }
  bool is_op(const char* op) const { return cur().type == Tok::op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::name && cur().text == n; }
  [[noreturn]] void fail_at(const std::string& msg) const {
    fail("TemplateSyntaxError: " + msg + " (line " + std::to_string(cur().line) + ")");
  }
  void expect_op(const char* op) {
    if (!is_op(op)) fail_at(std::string("expected '") + op + "', got '" + cur().text + "'");
    next();
  }
  std::string expect_name() {
    if (cur().type != Tok::name) fail_at("expected a name, got '" + cur().text + "'");
    std::string n = cur().text;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().type != Tok::block_end) fail_at("expected end of statement block, got '" + cur().text + "'");
    next();
  }

  // Statements until a block tag whose keyword is in `ends` (left unconsumed:
  // the current token is then that keyword).
  Body parse_body(const std::set<std::string>& ends) {
    Body body;
    while (true) {
      const Token& tok = cur();
      if (tok.type == Tok::eof) {
        if (!ends.empty()) fail_at("unexpected end of template, expected '" + *ends.begin() + "'");
        return body;
      }
      if (tok.type == Tok::text) {
        auto s = std::make_shared<Stmt>();
        s->kind = Stmt::Kind::text;
        s->text = tok.text;
        body.push_back(s);
        next();
        continue;
      }
      if (tok.type == Tok::var_begin) {
        next();
        auto s = std::make_shared<Stmt>();
        s->kind = Stmt::Kind::output;
        s->line = cur().line;
        s->expr = parse_tuple_expr();
        if (cur().type != Tok::var_end) fail_at("expected end of print statement, got '" + cur().text + "'");
        next();
        body.push_back(s);
        continue;
      }
      if (tok.type != Tok::block_begin) fail_at("unexpected token");
      next();
      if (cur().type != Tok::name) fail_at("expected a statement keyword");
      if (ends.count(cur().text)) return body;
      body.push_back(parse_statement());
    }
  }

  StmtPtr parse_statement() {
    Nest nest(*this);
    const std::string kw = cur().text;
    const int line = cur().line;
    next();
    auto s = std::make_shared<Stmt>();
    s->line = line;
    if (kw == "if") {
      s->kind = Stmt::Kind::if_;
      s->conds.push_back(parse_expr());
      expect_block_end();
      while (true) {
        s->bodies.push_back(parse_body({"elif", "else", "endif"}));
        std::string k = cur().text;
        next();
        if (k == "elif") {
          s->conds.push_back(parse_expr());
          expect_block_end();
        } else if (k == "else") {
          expect_block_end();
          s->else_body = parse_body({"endif"});
          next();
          expect_block_end();
          break;
        } else {
          expect_block_end();
          break;
        }
      }
    } else if (kw == "for") {
      s->kind = Stmt::Kind::for_;
      parse_targets(*s);
      if (!is_name("in")) fail_at("expected 'in'");
      next();
      s->expr = parse_tuple_expr(/*no_cond=*/true);
      if (is_name("if")) {
        next();
        s->cond = parse_expr();
      }
      if (is_name("recursive")) {
        s->recursive = true;
        next();
      }
      expect_block_end();
      s->body = parse_body({"else", "endfor"});
      if (is_name("else")) {
        next();
        expect_block_end();
        s->else_body = parse_body({"endfor"});
      }
      next();
      expect_block_end();
    } else if (kw == "set") {
      if (cur().type == Tok::name && peek().type == Tok::op && peek().text == ".") {
        auto target = std::make_shared<Expr>();
        target->kind = Expr::Kind::attr;
        auto obj = std::make_shared<Expr>();
        obj->kind = Expr::Kind::name;
        obj->name = expect_name();
        next();  // '.'
        target->name = expect_name();
        target->args.push_back(obj);
        s->target_expr = target;
      } else {
        parse_targets(*s);
      }
      if (is_op("=")) {
        next();
        s->kind = Stmt::Kind::set;
        s->expr = parse_tuple_expr();
        expect_block_end();
      } else {
        s->kind = Stmt::Kind::set_block;
        if (is_op("|")) s->filter = parse_filter_chain();
        expect_block_end();
        s->body = parse_body({"endset"});
        next();
        expect_block_end();
      }
    } else if (kw == "macro") {
      s->kind = Stmt::Kind::macro;
      s->text = expect_name();
      parse_params(*s);
      expect_block_end();
      s->body = parse_body({"endmacro"});
      next();
      if (cur().type == Tok::name) next();
      expect_block_end();
    } else if (kw == "call") {
      s->kind = Stmt::Kind::call_block;
      if (is_op("(")) parse_params(*s);
      s->expr = parse_expr();
      expect_block_end();
      s->body = parse_body({"endcall"});
      next();
      expect_block_end();
    } else if (kw == "filter") {
      s->kind = Stmt::Kind::filter;
      s->filter = parse_filter_chain(/*leading_pipe=*/false);
      expect_block_end();
      s->body = parse_body({"endfilter"});
      next();
      expect_block_end();
    } else if (kw == "break" || kw == "continue") {
      s->kind = kw == "break" ? Stmt::Kind::break_ : Stmt::Kind::continue_;
      expect_block_end();
    } else if (kw == "generation") {
      s->kind = Stmt::Kind::block;
      expect_block_end();
      s->body = parse_body({"endgeneration"});
      next();
      expect_block_end();
    } else {
      fail_at("Encountered unknown tag '" + kw + "'");
    }
    return s;
  }

  void parse_targets(Stmt& s) {
    bool paren = is_op("(");
    if (paren) next();
    s.targets.push_back(expect_name());
    while (is_op(",")) {
      s.target_tuple = true;
      next();
      if (cur().type != Tok::name) break;
      s.targets.push_back(expect_name());
    }
    if (paren) expect_op(")");
  }

  void parse_params(Stmt& s) {
    expect_op("(");
    while (!is_op(")")) {
      std::string n = expect_name();
      ExprPtr def;
      if (is_op("=")) {
        next();
        def = parse_expr();
      }
      s.params.emplace_back(n, def);
      if (!is_op(",")) break;
      next();
    }
    expect_op(")");
  }

  // "|f(args)|g" chain applied to a placeholder (null args[0]).
  ExprPtr parse_filter_chain(bool leading_pipe = true) {
    ExprPtr node;
    bool first = true;
    while (first || is_op("|")) {
      if (leading_pipe || !first) expect_op("|");
      first = false;
      node = parse_filter(node);
    }
    return node;
  }

  std::shared_ptr<Expr> make(Expr::Kind k, int line) {
    auto e = std::make_shared<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // Expression, or an unparenthesized tuple "a, b".
  ExprPtr parse_tuple_expr(bool no_cond = false) {
    const int line = cur().line;
    ExprPtr first = no_cond ? parse_or() : parse_expr();
    if (!is_op(",")) return first;
    auto t = std::make_shared<Expr>();
    t->kind = Expr::Kind::tuple;
    t->line = line;
    t->args.push_back(first);
    while (is_op(",")) {
      next();
      if (cur().type == Tok::var_end || cur().type == Tok::block_end || is_op(")")) break;
      t->args.push_back(no_cond ? parse_or() : parse_expr());
    }
    return t;
  }

  ExprPtr parse_expr() {
    Nest nest(*this);
    ExprPtr e = parse_or();
    while (is_name("if")) {
      auto c = make(Expr::Kind::cond, cur().line);
      next();
      c->args.push_back(parse_or());
      c->args.push_back(e);
      if (is_name("else")) {
        next();
        c->args.push_back(parse_expr());
      } else {
        c->args.push_back(nullptr);
      }
      e = c;
    }
    return e;
  }

  ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b, int line) {
    auto e = make(Expr::Kind::binary, line);
    e->name = op;
    e->args = {std::move(a), std::move(b)};
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      int line = cur().line;
      next();
      e = binary("or", e, parse_and(), line);
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      int line = cur().line;
      next();
      e = binary("and", e, parse_not(), line);
    }
    return e;
  }

  ExprPtr parse_not() {
    Nest nest(*this);
    if (is_name("not")) {
      auto e = make(Expr::Kind::unary, cur().line);
      next();
      e->name = "not";
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr first = parse_math1();
    std::shared_ptr<Expr> cmp;
    while (true) {
      std::string op;
      if (cur().type == Tok::op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                    cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        op = cur().text;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && peek().type == Tok::name && peek().text == "in") {
        op = "not in";
        next();
        next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(Expr::Kind::compare, line);
        cmp->args.push_back(first);
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? cmp : first;
  }

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = cur().text;
      int line = cur().line;
      next();
      e = binary(op, e, parse_concat(), line);
    }
    return e;
  }

  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      int line = cur().line;
      next();
      e = binary("~", e, parse_math2(), line);
    }
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = cur().text;
      int line = cur().line;
      next();
      e = binary(op, e, parse_pow(), line);
    }
    return e;
  }

  ExprPtr parse_pow() {
    ExprPtr e = parse_unary();
    while (is_op("**")) {
      int line = cur().line;
      next();
      e = binary("**", e, parse_unary(), line);
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter = true) {
    Nest nest(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      auto u = make(Expr::Kind::unary, cur().line);
      u->name = cur().text;
      next();
      u->args.push_back(parse_unary(false));
      e = u;
    } else {
      e = parse_primary();
    }
    e = parse_postfix(e);
    if (with_filter) e = parse_filter_expr(e);
    return e;
  }

  ExprPtr parse_primary() {
    const Token& tok = cur();
    const int line = tok.line;
    if (tok.type == Tok::name) {
      auto e = make(Expr::Kind::literal, line);
      const std::string& n = tok.text;
      if (n == "true" || n == "True")
        e->value = Value(true);
      else if (n == "false" || n == "False")
        e->value = Value(false);
      else if (n == "none" || n == "None")
        e->value = Value::none();
      else {
        e->kind = Expr::Kind::name;
        e->name = n;
      }
      next();
      return e;
    }
    if (tok.type == Tok::string) {
      std::string s;
      while (cur().type == Tok::string) {  // adjacent literals concatenate
        s += cur().text;
        next();
      }
      auto e = make(Expr::Kind::literal, line);
      e->value = Value(s);
      return e;
    }
    if (tok.type == Tok::integer || tok.type == Tok::floating) {
      auto e = make(Expr::Kind::literal, line);
      e->value = tok.type == Tok::integer ? Value(tok.i) : Value(tok.f);
      next();
      return e;
    }
    if (is_op("(")) {
      next();
      if (is_op(")")) {
        next();
        return make(Expr::Kind::tuple, line);
      }
      ExprPtr inner = parse_expr();
      if (is_op(",")) {
        auto t = make(Expr::Kind::tuple, line);
        t->args.push_back(inner);
        while (is_op(",")) {
          next();
          if (is_op(")")) break;
          t->args.push_back(parse_expr());
        }
        inner = t;
      }
      expect_op(")");
      return inner;
    }
    if (is_op("[")) {
      next();
      auto e = make(Expr::Kind::list, line);
      while (!is_op("]")) {
        e->args.push_back(parse_expr());
        if (!is_op(",")) break;
        next();
      }
      expect_op("]");
      return e;
    }
    if (is_op("{")) {
      next();
      auto e = make(Expr::Kind::dict, line);
      while (!is_op("}")) {
        e->args.push_back(parse_expr());
        expect_op(":");
        e->args.push_back(parse_expr());
        if (!is_op(",")) break;
        next();
      }
      expect_op("}");
      return e;
    }
    fail_at("unexpected '" + tok.text + "'");
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        next();
        auto a = make(Expr::Kind::attr, cur().line);
        if (cur().type == Tok::integer) {
          a->kind = Expr::Kind::item;
          auto idx = make(Expr::Kind::literal, cur().line);
          idx->value = Value(cur().i);
          next();
          a->args = {e, idx};
        } else {
          a->name = expect_name();
          a->args.push_back(e);
        }
        e = a;
      } else if (is_op("[")) {
        e = parse_subscript(e);
      } else if (is_op("(")) {
        e = parse_call(e);
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj) {
    const int line = cur().line;
    next();  // [
    ExprPtr parts[3];
    int colons = 0;
    while (!is_op("]")) {
      if (is_op(":")) {
        if (++colons > 2) fail_at("too many ':' in slice");
        next();
        continue;
      }
      parts[colons] = parse_expr();
      if (colons == 0 && is_op(",")) fail_at("tuple subscripts are not supported");
    }
    expect_op("]");
    if (colons == 0) {
      if (!parts[0]) fail_at("expected a subscript");
      auto e = make(Expr::Kind::item, line);
      e->args = {obj, parts[0]};
      return e;
    }
    auto e = make(Expr::Kind::slice, line);
    e->args = {obj, parts[0], parts[1], parts[2]};
    return e;
  }

  void parse_args(Expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (cur().type == Tok::name && peek().type == Tok::op && peek().text == "=") {
        std::string k = cur().text;
        next();
        next();
        e.kwargs.emplace_back(k, parse_expr());
      } else {
        e.args.push_back(parse_expr());
      }
      if (!is_op(",")) break;
      next();
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr fn) {
    auto e = make(Expr::Kind::call, cur().line);
    e->args.push_back(fn);
    parse_args(*e);
    return e;
  }

  ExprPtr parse_filter(ExprPtr subject) {
    auto e = make(Expr::Kind::filter, cur().line);
    e->name = expect_name();
    while (is_op(".")) {
      next();
      e->name += "." + expect_name();
    }
    e->args.push_back(subject);
    if (is_op("(")) parse_args(*e);
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        next();
        e = parse_filter(e);
      } else if (is_name("is")) {
        next();
        auto t = make(Expr::Kind::test, cur().line);
        if (is_name("not")) {
          t->negated = true;
          next();
        }
        t->name = expect_name();
        t->args.push_back(e);
        const Token& c = cur();
        if (is_op("(")) {
          parse_args(*t);
        } else if ((c.type == Tok::name || c.type == Tok::string || c.type == Tok::integer || c.type == Tok::floating ||
                    is_op("[") || is_op("{")) &&
                   !(is_name("else") || is_name("or") || is_name("and"))) {
          if (is_name("is")) fail_at("You cannot chain multiple tests with is");
          t->args.push_back(parse_postfix(parse_primary()));
        }
        e = t;
      } else if (is_op("(")) {
        e = parse_call(e);
      } else {
        return e;
      }
    }
  }

  // Nesting guard: a template nested deeper than this (expressions or
  // blocks) is refused, so parsing and rendering cannot exhaust the stack.
  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxNesting) p.fail_at("nesting deeper than " + std::to_string(kMaxNesting));
    }
    ~Nest() { --p.depth_; }
  };
  static constexpr int kMaxNesting = 256;

  const std::vector<Token>& t_;
  size_t p_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse_template(const std::vector<Token>& tokens) { return Parser(tokens).parse_all(); }

}  // namespace ns::chat::jinja
