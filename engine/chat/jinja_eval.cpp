// The Jinja evaluator (see jinja_eval.h). Scoping follows jinja2: a for loop's
// body gets a fresh scope each iteration (a set inside it is gone after the
// loop), a macro's body a scope under the one it was defined in; if blocks
// share their enclosing scope. namespace() objects carry state across scopes.
#include "engine/chat/jinja_eval.h"

#include <optional>

#include "engine/chat/jinja_builtins.h"

namespace ns::chat::jinja {

namespace {

void bind_targets(const Stmt& s, const FramePtr& f, const Value& v) {
  if (!s.target_tuple) {
    f->vars[s.targets[0]] = v;
    return;
  }
  std::vector<Value> parts = iterate(v);
  if (parts.size() != s.targets.size())
    fail(std::string("ValueError: ") + (parts.size() > s.targets.size() ? "too many" : "not enough") +
         " values to unpack (expected " + std::to_string(s.targets.size()) + ")");
  for (size_t k = 0; k < parts.size(); ++k) f->vars[s.targets[k]] = parts[k];
}

}  // namespace

void Renderer::append(std::string& out, const std::string& s) const {
  out += s;
  if (out.size() > limits_.max_output_bytes)
    fail("TemplateError: rendered output exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
}

std::string Renderer::render(const Body& body, const Value& context) {
  auto globals = std::make_shared<Frame>();
  install_globals(globals);
  auto top = std::make_shared<Frame>();
  top->parent = globals;
  if (context.is_dict())
    for (const auto& kv : context.dict_data().items) top->vars[kv.first.to_str()] = kv.second;
  std::string out;
  exec(body, top, out);
  return out;
}

Value Renderer::lookup(const std::string& name, const FramePtr& f) const {
  for (const Frame* p = f.get(); p; p = p->parent.get()) {
    auto it = p->vars.find(name);
    if (it != p->vars.end()) return it->second;
  }
  return Value::undefined("'" + name + "' is undefined");
}

Renderer::Flow Renderer::exec(const Body& body, const FramePtr& f, std::string& out) {
  for (const StmtPtr& sp : body) {
    const Stmt& s = *sp;
    switch (s.kind) {
      case Stmt::Kind::text: append(out, s.text); break;
      case Stmt::Kind::output: {
        append(out, eval(*s.expr, f).to_str());
        break;
      }
      case Stmt::Kind::if_: {
        bool done = false;
        for (size_t k = 0; k < s.conds.size() && !done; ++k) {
          if (eval(*s.conds[k], f).truthy()) {
            done = true;
            Flow fl = exec(s.bodies[k], f, out);
            if (fl != Flow::normal) return fl;
          }
        }
        if (!done) {
          Flow fl = exec(s.else_body, f, out);
          if (fl != Flow::normal) return fl;
        }
        break;
      }
      case Stmt::Kind::for_: {
        Flow fl = exec_for(s, f, eval(*s.expr, f), 1, out);
        if (fl != Flow::normal) return fl;
        break;
      }
      case Stmt::Kind::set: exec_set(s, f, eval(*s.expr, f)); break;
      case Stmt::Kind::set_block: {
        std::string captured;
        exec(s.body, f, captured);
        Value v(captured);
        if (s.filter) v = eval_filter(*s.filter, f, &v);
        exec_set(s, f, v);
        break;
      }
      case Stmt::Kind::macro: f->vars[s.text] = make_macro(s, f, false); break;
      case Stmt::Kind::call_block: {
        Value caller = make_macro(s, f, true);
        if (s.expr->kind != Expr::Kind::call) fail("TemplateSyntaxError: expected a call in {% call %}");
        append(out, eval_call(*s.expr, f, &caller).to_str());
        break;
      }
      case Stmt::Kind::filter: {
        std::string captured;
        exec(s.body, f, captured);
        Value v(captured);
        append(out, eval_filter(*s.filter, f, &v).to_str());
        break;
      }
      case Stmt::Kind::break_: return Flow::break_;
      case Stmt::Kind::continue_: return Flow::continue_;
      case Stmt::Kind::block: {
        Flow fl = exec(s.body, f, out);
        if (fl != Flow::normal) return fl;
        break;
      }
    }
  }
  return Flow::normal;
}

void Renderer::exec_set(const Stmt& s, const FramePtr& f, const Value& v) {
  if (s.target_expr) {
    const Expr& t = *s.target_expr;
    Value obj = lookup(t.args[0]->name, f);
    if (!obj.is_namespace()) fail("TemplateRuntimeError: cannot assign attribute on non-namespace object");
    obj.dict_data().set(Value(t.name), v);
    return;
  }
  bind_targets(s, f, v);
}

// A recursive loop's `loop` is also callable: loop(children) renders the body
// over children one level deeper (its "__call__" member, which eval_call uses).
Renderer::Flow Renderer::exec_for(const Stmt& s, const FramePtr& f, const Value& seq, int depth, std::string& out) {
  if (seq.is_none() || seq.is_number() || seq.is_function())
    fail("TypeError: '" + seq.type_name() + "' object is not iterable");
  std::vector<Value> items = iterate(seq);
  if (s.cond) {
    std::vector<Value> kept;
    for (const Value& item : items) {
      auto cf = std::make_shared<Frame>();
      cf->parent = f;
      bind_targets(s, cf, item);
      if (eval(*s.cond, cf).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  const size_t n = items.size();
  // loop.changed(*values): true when the values differ from the previous call's.
  auto last_changed = std::make_shared<std::optional<Value>>();
  for (size_t k = 0; k < n; ++k) {
    auto lf = std::make_shared<Frame>();
    lf->parent = f;
    bind_targets(s, lf, items[k]);
    Value loop = Value::dict();
    auto& d = loop.dict_data();
    const auto i = static_cast<int64_t>(k), len = static_cast<int64_t>(n);
    d.set(Value("index"), Value(i + 1));
    d.set(Value("index0"), Value(i));
    d.set(Value("revindex"), Value(len - i));
    d.set(Value("revindex0"), Value(len - i - 1));
    d.set(Value("first"), Value(k == 0));
    d.set(Value("last"), Value(k + 1 == n));
    d.set(Value("length"), Value(len));
    d.set(Value("depth"), Value(int64_t{depth}));
    d.set(Value("depth0"), Value(int64_t{depth - 1}));
    if (k > 0) d.set(Value("previtem"), items[k - 1]);
    if (k + 1 < n) d.set(Value("nextitem"), items[k + 1]);
    d.set(Value("cycle"), Value::function(
                              [k](CallArgs& a) -> Value {
                                if (a.pos.empty()) fail("TypeError: no items for cycling given");
                                return a.pos[k % a.pos.size()];
                              },
                              "cycle"));
    d.set(Value("changed"), Value::function(
                                [last_changed](CallArgs& a) -> Value {
                                  Value now = Value::list(a.pos, true);
                                  if (*last_changed && py_equal(**last_changed, now)) return Value(false);
                                  *last_changed = now;
                                  return Value(true);
                                },
                                "changed"));
    if (s.recursive) {
      const Stmt* sp = &s;
      d.set(Value("__call__"),
            Value::function(
                [this, sp, f, depth](CallArgs& a) -> Value {
                  if (depth >= limits_.max_call_depth)
                    fail("TemplateError: recursive loop deeper than " + std::to_string(limits_.max_call_depth));
                  std::string o;
                  exec_for(*sp, f, a.pos.empty() ? Value() : a.pos[0], depth + 1, o);
                  return Value(o);
                },
                "loop"));
    }
    lf->vars["loop"] = loop;
    Flow fl = exec(s.body, lf, out);
    if (fl == Flow::break_) break;
  }
  if (n == 0) {
    Flow fl = exec(s.else_body, f, out);
    if (fl != Flow::normal) return fl;
  }
  return Flow::normal;
}

Value Renderer::make_macro(const Stmt& s, const FramePtr& def, bool is_caller) {
  const Stmt* sp = &s;
  macro_scopes_.push_back(def);
  std::weak_ptr<Frame> weak_def = def;
  return Value::function(
      [this, sp, weak_def](CallArgs& a) -> Value {
        if (++depth_ > limits_.max_call_depth) {
          --depth_;
          fail("TemplateError: macro calls nest deeper than " + std::to_string(limits_.max_call_depth));
        }
        struct Guard {
          int& d;
          ~Guard() { --d; }
        } guard{depth_};
        auto mf = std::make_shared<Frame>();
        mf->parent = weak_def.lock();
        const auto& params = sp->params;
        std::vector<Value> varargs;
        for (size_t k = 0; k < a.pos.size(); ++k) {
          if (k < params.size())
            mf->vars[params[k].first] = a.pos[k];
          else
            varargs.push_back(a.pos[k]);
        }
        Value kwargs = Value::dict();
        for (auto& kv : a.kw) {
          bool known = kv.first == "caller";
          for (const auto& p : params) known = known || p.first == kv.first;
          if (known)
            mf->vars[kv.first] = kv.second;
          else
            kwargs.dict_data().set(Value(kv.first), kv.second);
        }
        for (size_t k = a.pos.size(); k < params.size(); ++k) {
          if (mf->vars.count(params[k].first)) continue;
          mf->vars[params[k].first] = params[k].second ? eval(*params[k].second, mf)
                                                       : Value::undefined("'" + params[k].first + "' is undefined");
        }
        mf->vars["varargs"] = Value::list(std::move(varargs), /*tuple=*/true);
        mf->vars["kwargs"] = kwargs;
        std::string out;
        exec(sp->body, mf, out);
        return Value(out);
      },
      is_caller ? "caller" : s.text);
}

Value Renderer::eval_call(const Expr& e, const FramePtr& f, const Value* caller) {
  Value fn = eval(*e.args[0], f);
  if (fn.is_dict() && !fn.is_namespace())
    if (const Value* call = fn.dict_data().find(Value("__call__")); call && call->is_function()) fn = *call;
  if (!fn.is_function()) {
    if (fn.is_undefined()) fail_undefined(fn);
    fail("TypeError: '" + fn.type_name() + "' object is not callable");
  }
  CallArgs a;
  for (size_t k = 1; k < e.args.size(); ++k) a.pos.push_back(eval(*e.args[k], f));
  for (const auto& kv : e.kwargs) a.kw.emplace_back(kv.first, eval(*kv.second, f));
  if (caller) a.kw.emplace_back("caller", *caller);
  return fn.fn()(a);
}

Value Renderer::eval_filter(const Expr& e, const FramePtr& f, const Value* placeholder) {
  Value subject;
  if (e.args[0])
    subject = e.args[0]->kind == Expr::Kind::filter ? eval_filter(*e.args[0], f, placeholder) : eval(*e.args[0], f);
  else if (placeholder)
    subject = *placeholder;
  CallArgs a;
  for (size_t k = 1; k < e.args.size(); ++k) a.pos.push_back(eval(*e.args[k], f));
  for (const auto& kv : e.kwargs) a.kw.emplace_back(kv.first, eval(*kv.second, f));
  return apply_filter(e.name, subject, a);
}

Value Renderer::eval(const Expr& e, const FramePtr& f) {
  switch (e.kind) {
    case Expr::Kind::literal: return e.value;
    case Expr::Kind::name: return lookup(e.name, f);
    case Expr::Kind::list:
    case Expr::Kind::tuple: {
      std::vector<Value> items;
      for (const auto& a : e.args) items.push_back(eval(*a, f));
      return Value::list(std::move(items), e.kind == Expr::Kind::tuple);
    }
    case Expr::Kind::dict: {
      Value d = Value::dict();
      for (size_t k = 0; k + 1 < e.args.size(); k += 2) d.dict_data().set(eval(*e.args[k], f), eval(*e.args[k + 1], f));
      return d;
    }
    case Expr::Kind::attr: return get_attr(eval(*e.args[0], f), e.name);
    case Expr::Kind::item: return get_item(eval(*e.args[0], f), eval(*e.args[1], f));
    case Expr::Kind::slice: {
      Value obj = eval(*e.args[0], f);
      Value parts[3];
      for (int k = 0; k < 3; ++k)
        parts[k] = e.args[static_cast<size_t>(k) + 1] ? eval(*e.args[static_cast<size_t>(k) + 1], f) : Value::none();
      return get_slice(obj, parts[0], parts[1], parts[2]);
    }
    case Expr::Kind::call: return eval_call(e, f, nullptr);
    case Expr::Kind::filter: return eval_filter(e, f, nullptr);
    case Expr::Kind::test: {
      Value subject = eval(*e.args[0], f);
      CallArgs a;
      for (size_t k = 1; k < e.args.size(); ++k) a.pos.push_back(eval(*e.args[k], f));
      for (const auto& kv : e.kwargs) a.kw.emplace_back(kv.first, eval(*kv.second, f));
      return Value(apply_test(e.name, subject, a) != e.negated);
    }
    case Expr::Kind::unary: {
      Value v = eval(*e.args[0], f);
      if (e.name == "not") return Value(!v.truthy());
      if (v.is_undefined()) fail_undefined(v);
      if (!v.is_number()) fail("TypeError: bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
      if (e.name == "+") return v.is_float() ? v : Value(v.as_int());
      return v.is_float() ? Value(-v.as_double()) : Value(-v.as_int());
    }
    case Expr::Kind::binary: {
      if (e.name == "and") {
        Value a = eval(*e.args[0], f);
        return a.truthy() ? eval(*e.args[1], f) : a;
      }
      if (e.name == "or") {
        Value a = eval(*e.args[0], f);
        return a.truthy() ? a : eval(*e.args[1], f);
      }
      Value a = eval(*e.args[0], f);
      Value b = eval(*e.args[1], f);
      return binary_op(e.name, a, b);
    }
    case Expr::Kind::compare: {
      Value left = eval(*e.args[0], f);
      for (size_t k = 0; k < e.ops.size(); ++k) {
        Value right = eval(*e.args[k + 1], f);
        const std::string& op = e.ops[k];
        bool r;
        if (op == "in")
          r = contains(right, left);
        else if (op == "not in")
          r = !contains(right, left);
        else if (op == "==")
          r = py_equal(left, right);
        else if (op == "!=")
          r = !py_equal(left, right);
        else {
          int c = py_compare(left, right);
          r = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
        }
        if (!r) return Value(false);
        left = right;
      }
      return Value(true);
    }
    case Expr::Kind::cond: {
      if (eval(*e.args[0], f).truthy()) return eval(*e.args[1], f);
      return e.args[2] ? eval(*e.args[2], f)
                       : Value::undefined("the inline if's condition was false and it has no else");
    }
  }
  return Value();
}

void Renderer::install_globals(const FramePtr& g) {
  g->vars["raise_exception"] = Value::function(
      [](CallArgs& a) -> Value {
        fail(a.pos.empty() ? std::string("TemplateError") : "TemplateError: " + a.pos[0].to_str());
      },
      "raise_exception");
  g->vars["range"] = Value::function(
      [](CallArgs& a) -> Value {
        int64_t start = 0, stop = 0, step = 1;
        for (const auto& v : a.pos)
          if (!v.is_int() && !v.is_bool()) fail("TypeError: range() takes integers, not '" + v.type_name() + "'");
        if (a.pos.size() == 1)
          stop = a.pos[0].as_int();
        else if (a.pos.size() >= 2)
          start = a.pos[0].as_int(), stop = a.pos[1].as_int();
        if (a.pos.size() >= 3) step = a.pos[2].as_int();
        if (step == 0) fail("ValueError: range() arg 3 must not be zero");
        std::vector<Value> out;
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
          if (out.size() >= 10'000'000) fail("OverflowError: range too large");
          out.emplace_back(i);
        }
        return Value::list(std::move(out));
      },
      "range");
  auto make_dict = [](bool ns) {
    return [ns](CallArgs& a) -> Value {
      Value d = ns ? Value::ns_object() : Value::dict();
      for (const auto& p : a.pos) {
        if (p.is_dict())
          for (const auto& kv : p.dict_data().items) d.dict_data().set(kv.first, kv.second);
      }
      for (auto& kv : a.kw) d.dict_data().set(Value(kv.first), kv.second);
      return d;
    };
  };
  g->vars["namespace"] = Value::function(make_dict(true), "namespace");
  g->vars["dict"] = Value::function(make_dict(false), "dict");
  const bool has_now = limits_.has_now;
  const std::time_t now = limits_.now;
  g->vars["strftime_now"] = Value::function(
      [has_now, now](CallArgs& a) -> Value {
        std::time_t t = has_now ? now : std::time(nullptr);
        std::tm tm{};
        gmtime_r(&t, &tm);
        std::string fmt = a.pos.empty() ? std::string() : a.pos[0].to_str();
        char buf[512];
        size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
        return Value(std::string(buf, n));
      },
      "strftime_now");
}

}  // namespace ns::chat::jinja
