// llama.cpp's rules for special tokens the metadata does not name: tokens
// recognised by their text (EOT, EOM, FIM markers), the end-of-generation set,
// and per-model whitespace-stripping flags. Kept apart from vocab.cpp because
// these lists track llama.cpp's src/llama-vocab.cpp and change with it.
#include <algorithm>
#include <cctype>

#include "engine/tokenizer/vocab.h"

namespace ns::tok {

namespace {

bool one_of(const std::string& s, std::initializer_list<const char*> list) {
  for (const char* x : list)
    if (s == x) return true;
  return false;
}

// Token texts llama.cpp recognises as end-of-turn / end-of-generation markers
// when the metadata does not name them (its workaround for converters that
// do not write tokenizer.ggml.eot_token_id and friends).
const std::initializer_list<const char*> kEotTexts = {"<|eot_id|>",
                                                      "<|im_end|>",
                                                      "<|end|>",
                                                      "<end_of_turn>",
                                                      "<|endoftext|>",
                                                      "<|end_of_text|>",
                                                      "<EOT>",
                                                      "_<EOT>",
                                                      "[EOT]",
                                                      "<\xEF\xBD\x9C"
                                                      "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                                      "<end_of_utterance>"};
const std::initializer_list<const char*> kEogTexts = {"<|eot_id|>",
                                                      "<|im_end|>",
                                                      "<|end|>",
                                                      "<|return|>",
                                                      "<|call|>",
                                                      "<|flush|>",
                                                      "<|calls|>",
                                                      "<end_of_turn>",
                                                      "<|endoftext|>",
                                                      "</s>",
                                                      "<|eom_id|>",
                                                      "<EOT>",
                                                      "_<EOT>",
                                                      "[EOT]",
                                                      "[EOS]",
                                                      "<|end_of_text|>",
                                                      "<end_of_utterance>",
                                                      "<eos>",
                                                      "<turn|>",
                                                      "<|tool_response>",
                                                      "<\xEF\xBD\x9C"
                                                      "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                                      "[e~["};
const std::initializer_list<const char*> kFimPadTexts = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
const std::initializer_list<const char*> kFimRepTexts = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
                                                         "<reponame>"};
const std::initializer_list<const char*> kFimSepTexts = {"<|file_sep|>"};
const std::initializer_list<const char*> kFimPreTexts = {"<|fim_prefix|>",
                                                         "<fim-prefix>",
                                                         "<fim_prefix>",
                                                         "<\xEF\xBD\x9C"
                                                         "fim\xE2\x96\x81"
                                                         "begin\xEF\xBD\x9C>",
                                                         "<PRE>",
                                                         "\xE2\x96\x81<PRE>",
                                                         "<|code_prefix|>",
                                                         "<|prefix|>"};
const std::initializer_list<const char*> kFimSufTexts = {"<|fim_suffix|>",
                                                         "<fim-suffix>",
                                                         "<fim_suffix>",
                                                         "<\xEF\xBD\x9C"
                                                         "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
                                                         "<SUF>",
                                                         "\xE2\x96\x81<SUF>",
                                                         "<|code_suffix|>",
                                                         "<|suffix|>"};
const std::initializer_list<const char*> kFimMidTexts = {"<|fim_middle|>",
                                                         "<fim-middle>",
                                                         "<fim_middle>",
                                                         "<\xEF\xBD\x9C"
                                                         "fim\xE2\x96\x81"
                                                         "end\xEF\xBD\x9C>",
                                                         "<MID>",
                                                         "\xE2\x96\x81<MID>",
                                                         "<|code_middle|>",
                                                         "<|middle|>"};

std::string lower_ascii(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

void Vocab::detect_special_tokens(Vocab& v) {
  // Recognise unnamed special tokens by their text (the lowest id wins, so the
  // result is deterministic; llama.cpp walks a hash map) and make sure they
  // are control tokens, which llama.cpp also enforces.
  const auto detect = [&](int32_t& slot, std::initializer_list<const char*> texts) {
    if (slot >= 0) return;
    for (const char* t : texts) {
      const int32_t id = v.find(t);
      if (id >= 0 && (slot < 0 || id < slot)) slot = id;
    }
    if (slot >= 0) v.attr[slot] |= kAttrControl;
  };
  detect(v.eot, kEotTexts);
  detect(v.eom, {"<|eom_id|>"});
  detect(v.fim_pre, kFimPreTexts);
  detect(v.fim_suf, kFimSufTexts);
  detect(v.fim_mid, kFimMidTexts);
  detect(v.fim_pad, kFimPadTexts);
  detect(v.fim_rep, kFimRepTexts);
  detect(v.fim_sep, kFimSepTexts);

  // End of generation: FIM pad/repo/file-sep, every EOG-looking token, EOS, EOT, EOM.
  std::vector<int32_t> eog;
  for (int32_t id : {v.fim_pad, v.fim_rep, v.fim_sep})
    if (id >= 0) eog.push_back(id);
  for (const char* t : kEogTexts) {
    const int32_t id = v.find(t);
    if (id < 0) continue;
    eog.push_back(id);
    v.attr[id] |= kAttrControl;
  }
  for (int32_t id : {v.eos, v.eot, v.eom})
    if (id >= 0) eog.push_back(id);
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  // gpt-oss / solar-open: "<|end|>" ends a message, not the generation, when
  // the vocabulary also has "<|return|>" and "<|call|>" (or "<|calls|>" and "<|flush|>").
  {
    int32_t end_id = -1;
    bool has_return = false, has_call = false, has_flush = false, has_tool_response = false;
    int32_t s_id = -1;
    for (int32_t id : eog) {
      const std::string& t = v.text[id];
      if (t == "<|return|>")
        has_return = true;
      else if (t == "<|call|>" || t == "<|calls|>")
        has_call = true;
      else if (t == "<|flush|>")
        has_flush = true;
      else if (t == "<|end|>")
        end_id = id;
      else if (t == "<|tool_response>")
        has_tool_response = true;
      else if (t == "</s>")
        s_id = id;
    }
    if (end_id >= 0 && ((has_return && has_call) || (has_call && has_flush))) {
      eog.erase(std::find(eog.begin(), eog.end(), end_id));
      v.attr[end_id] = kAttrUserDefined;
    }
    if (has_tool_response && s_id >= 0) {  // Gemma 4: "</s>" is ordinary text there
      eog.erase(std::find(eog.begin(), eog.end(), s_id));
      v.attr[s_id] = kAttrNormal;
    }
  }
  v.eog = std::move(eog);

  // gpt-oss: these markers are always rendered.
  for (const char* t : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    const int32_t id = v.find(t);
    if (id >= 0) v.attr[id] = kAttrUserDefined;
  }
}

void Vocab::apply_strip_rules(Vocab& v, const VocabSpec& spec) {
  // Per-model strip flags llama.cpp sets by name.
  const std::string name = lower_ascii(spec.model_name);
  const auto set_flag = [&](const char* token, uint32_t flag, bool on) {
    const int32_t id = v.find(token);
    if (id < 0) return;
    v.attr[id] = on ? (v.attr[id] | flag) : (v.attr[id] & ~flag);
  };
  if (one_of(spec.pre, {"jina-v2-de", "jina-v2-es", "jina-v2-code"})) {
    set_flag("<mask>", kAttrLstrip, true);
  } else if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id : v.special_by_length) v.attr[id] |= kAttrRstrip;
    set_flag("</s>", kAttrRstrip, true);
    for (const char* t : {"<unk>", "<s>", "<|endoftext|>"}) set_flag(t, kAttrRstrip, false);
  } else if (name.find("modern-bert") != std::string::npos) {
    set_flag("[MASK]", kAttrLstrip, true);
  }
}

}  // namespace ns::tok
