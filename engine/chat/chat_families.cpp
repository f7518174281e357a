// The families nightshift renders and their llama.cpp names: one table, so a
// name, its enum value and the list in error messages never disagree.
#include <array>
#include <string>
#include <utility>

#include "engine/chat/chat_template.h"

namespace ns::chat {
namespace {

constexpr std::array<std::pair<ChatTemplate, const char*>, 18> kNames = {{
    {ChatTemplate::chatml, "chatml"},
    {ChatTemplate::llama2, "llama2"},
    {ChatTemplate::llama2_sys, "llama2-sys"},
    {ChatTemplate::llama2_sys_bos, "llama2-sys-bos"},
    {ChatTemplate::llama2_sys_strip, "llama2-sys-strip"},
    {ChatTemplate::mistral_v1, "mistral-v1"},
    {ChatTemplate::mistral_v3, "mistral-v3"},
    {ChatTemplate::mistral_v3_tekken, "mistral-v3-tekken"},
    {ChatTemplate::mistral_v7, "mistral-v7"},
    {ChatTemplate::mistral_v7_tekken, "mistral-v7-tekken"},
    {ChatTemplate::llama3, "llama3"},
    {ChatTemplate::deepseek2, "deepseek2"},
    {ChatTemplate::deepseek3, "deepseek3"},
    {ChatTemplate::kimi_k2, "kimi-k2"},
    {ChatTemplate::kimi_k3, "kimi-k3"},
    {ChatTemplate::qwen35, "qwen3.5"},
    {ChatTemplate::glm45, "glm-4.5"},
    {ChatTemplate::gpt_oss, "gpt-oss"},
}};

}  // namespace

const char* template_name(ChatTemplate t) {
  for (const auto& [value, name] : kNames)
    if (value == t) return name;
  return "unknown";
}

const std::vector<ChatTemplate>& supported_templates() {
  static const std::vector<ChatTemplate> all = [] {
    std::vector<ChatTemplate> v;
    for (const auto& entry : kNames) v.push_back(entry.first);
    return v;
  }();
  return all;
}

std::string supported_template_names() {
  std::string out;
  for (const auto& entry : kNames) out += (out.empty() ? "" : ", ") + std::string(entry.second);
  return out;
}

std::optional<ChatTemplate> template_from_name(std::string_view name) {
  for (const auto& [value, n] : kNames)
    if (name == n) return value;
  return std::nullopt;
}

}  // namespace ns::chat
