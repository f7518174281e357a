#include "engine/batch/batch_sequence.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace ns {

BatchSequence::BatchSequence(GenerationRequest request, std::span<const int32_t> prompt, const Model& model,
                             grammar::GrammarCache& grammars) {
  const int64_t n_vocab = model.n_vocab(), n_ctx = model.n_ctx();
  sampler.emplace(request.params, static_cast<int32_t>(n_vocab));
  stops.emplace(request.params.stop, 4096);
  if (request.params.logprobs) recorder.emplace(request.params.top_logprobs, static_cast<int32_t>(n_vocab));
  const Tokenizer& tok = model.tokenizer();
  if (!request.params.grammar.empty()) {
    grammar = grammars.get(request.params.grammar, tok);
    matcher.emplace(grammar->g);
  }
  history.assign(prompt.begin(), prompt.end());
  n_prompt = static_cast<int64_t>(history.size());
  for (const int32_t id : request.resume)
    if (id < 0 || id >= n_vocab)
      throw Error(ErrorKind::invalid_input, "checkpointed token " + std::to_string(id) + " is outside the vocabulary");
  rows = std::min<int64_t>(n_ctx, n_prompt + std::max(1, request.params.max_tokens));
  history.reserve(static_cast<size_t>(rows));
  result.tokens.reserve(static_cast<size_t>(request.params.max_tokens));
  result.stats.prompt_tokens = static_cast<int32_t>(n_prompt);
  progress.prompt_tokens = result.stats.prompt_tokens;
  progress.tokens = &result.tokens;
  self = &result;
  progress.choices = {&self, 1};

  size_t replay = std::min(request.resume.size(), static_cast<size_t>(std::max(0, request.params.max_tokens - 1)));
  if (recorder) {
    result.logprobs.k = recorder->k();
    const sampler::ChoiceLogprobs& saved = request.resume_logprobs;
    replay = saved.k == recorder->k() ? std::min(replay, saved.tokens()) : 0;
  }
  for (size_t i = 0; i < replay && static_cast<int64_t>(history.size()) < n_ctx - 1; ++i) {
    if (matcher && !matcher->accept_bytes(tok.token_to_piece(request.resume[i])))
      throw Error(ErrorKind::invalid_input, "checkpointed token " + std::to_string(i) +
                                                " does not follow the job's grammar: delete the job's checkpoint "
                                                "and it starts over");
    history.push_back(request.resume[i]);
    result.tokens.push_back(request.resume[i]);
    stops->feed(tok.token_to_piece(request.resume[i]));
  }
  n_resume = result.tokens.size();
  if (recorder) {
    result.logprobs.entries = request.resume_logprobs.entries;
    result.logprobs.truncate(n_resume);
  }
  sampler->skip_draws(n_resume);
  n_fill = static_cast<int64_t>(history.size());
  req = std::move(request);
  share.t_start = RequestShare::Clock::now();
}

const char* BatchSequence::sample(float* lg, const Model& model, grammar::GrammarCache& grammars, bool& accepted) {
  const int64_t n_vocab = model.n_vocab(), n_ctx = model.n_ctx();
  const Tokenizer& tok = model.tokenizer();
  // Logprobs are of the raw row (engine/sampler/logprobs.h); the grammar's mask comes after.
  if (recorder) recorder->observe({lg, static_cast<size_t>(n_vocab)});
  if (matcher && !grammars.constrain(*grammar, *matcher, lg, n_vocab)) {
    result.error = "no token of the vocabulary can continue the output under its grammar (after " +
                   std::to_string(result.tokens.size()) + " tokens); the grammar needs text this model cannot write";
    return "error";
  }
  const int32_t id = sampler->sample({lg, static_cast<size_t>(n_vocab)}, history);
  if (!req.params.ignore_eos && tok.is_end_of_generation(id)) return "stop";
  accepted = true;
  history.push_back(id);
  result.tokens.push_back(id);
  if (recorder) recorder->append(id, result.logprobs);
  progress.generated = static_cast<int32_t>(result.tokens.size());
  progress.piece = tok.token_to_piece(id);
  if (matcher && !matcher->accept_bytes(progress.piece))
    throw Error(ErrorKind::internal, "token " + std::to_string(id) + " was sampled against its grammar's mask");
  if (stops->feed(progress.piece) || (matcher && !matcher->can_continue())) return "stop";
  if (progress.generated >= req.params.max_tokens || static_cast<int64_t>(history.size()) >= std::min(n_ctx, rows))
    return "length";
  return nullptr;
}

bool BatchSequence::report() {
  if (!req.on_progress) return true;
  if (!group) return req.on_progress(progress);
  ChoiceGroup& g = *group;
  GenerationProgress& p = g.progress;
  p.prefilled = progress.prefilled;
  p.generated = 0;
  for (const GenerationChoice* c : g.choices) p.generated += static_cast<int32_t>(c->tokens.size());
  p.piece = progress.piece;
  p.tokens = &g.choices[0]->tokens;
  p.choices = g.choices;
  if (req.on_progress(p)) return true;
  g.cancelled = true;
  return false;
}

bool ChoiceGroup::add(int k, GenerationResult r, double choice_read_busy_s) {
  const auto c = static_cast<size_t>(k);
  results[c] = std::move(r);
  choices[c] = &results[c];
  read_busy_s += choice_read_busy_s;
  return --remaining == 0;
}

GenerationResult ChoiceGroup::take_result() {
  merge_choice_stats(results, read_busy_s);
  GenerationResult out = std::move(results[0]);
  for (size_t c = 1; c < results.size(); ++c)
    out.more_choices.push_back(std::move(static_cast<GenerationChoice&>(results[c])));
  return out;
}

void add_pieces(GenerationResult& r, const Tokenizer& tok) {
  auto add = [&](const GenerationChoice& c) {
    for (const sampler::TokenLogprob& e : c.logprobs.entries)
      if (!r.pieces.count(e.id)) r.pieces.emplace(e.id, tok.token_to_piece(e.id));
  };
  add(r);
  for (const GenerationChoice& c : r.more_choices) add(c);
}

}  // namespace ns
