// The Jinja engine's public face (see jinja.h): parse once, render many.
#include "engine/chat/jinja.h"

#include "engine/chat/jinja_ast.h"
#include "engine/chat/jinja_eval.h"

namespace ns::chat::jinja {

struct Template::Impl {
  std::vector<StmtPtr> body;
};

Template::Template(const std::string& source, const RenderOptions& o) {
  auto impl = std::make_shared<Impl>();
  impl->body = parse_template(tokenize(source, LexOptions{o.trim_blocks, o.lstrip_blocks}));
  impl_ = std::move(impl);
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const nlohmann::ordered_json& context, const RenderOptions& o) const {
  RenderLimits limits;
  limits.max_output_bytes = o.max_output_bytes;
  limits.max_call_depth = o.max_call_depth;
  limits.has_now = o.has_now;
  limits.now = o.now;
  Renderer r(limits);
  return r.render(impl_->body, Value::from_json(context));
}

std::string render_chat_template(const std::string& source, const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json* tools, bool add_generation_prompt,
                                 const std::string& bos, const std::string& eos, std::time_t now) {
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["messages"] = messages;
  if (tools) ctx["tools"] = *tools;
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["bos_token"] = bos;
  ctx["eos_token"] = eos;
  RenderOptions o;
  o.has_now = true;
  o.now = now;
  return Template(source, o).render(ctx, o);
}

}  // namespace ns::chat::jinja
