#include "engine/model/model.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "engine/ops.h"
#include "engine/util/error.h"

namespace ns {

std::unique_ptr<Model> Model::load(const std::string& path, const ModelOptions& opts) {
  std::unique_ptr<Model> m(new Model());
  m->file_ = gguf::GgufFile::open(path);
  const gguf::GgufFile& f = *m->file_;
  m->hp_ = Hparams::from_gguf(f);
  Hparams& hp = m->hp_;
  m->tokenizer_ = Tokenizer::from_gguf(f);

  TensorLoader t(f);
  const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd || embd->dims.size() != 2)
    throw Error(ErrorKind::bad_model, path + ": tensor 'token_embd.weight' is missing or not 2-D");
  hp.n_vocab = static_cast<int64_t>(embd->dims[1]);
  if (hp.n_vocab != m->tokenizer_->n_vocab())
    throw Error(ErrorKind::bad_model, path + ": token_embd.weight has " + std::to_string(hp.n_vocab) +
                                          " rows but the tokenizer has " + std::to_string(m->tokenizer_->n_vocab()) +
                                          " tokens");
  m->token_embd_ = t.matrix("token_embd.weight", hp.n_vocab, hp.n_embd);
  m->output_norm_ = t.vector("output_norm.weight", hp.n_embd);
  // Tied embeddings: no output.weight, the embedding matrix is the output head.
  m->output_ = t.has("output.weight") ? t.matrix("output.weight", hp.n_vocab, hp.n_embd) : m->token_embd_;
  m->arch_ = make_architecture(hp, t);
  for (const auto& name : t.unused()) spdlog::warn("{}: tensor '{}' is not used by the {} architecture", path, name, hp.arch);
  for (const auto& ti : f.tensors()) m->n_params_ += ti.n_elements();

  int64_t n_ctx = opts.context > 0 ? opts.context : std::min<int64_t>(hp.n_ctx_train, 4096);
  if (n_ctx < 8) n_ctx = 8;
  const BufferSizes bs = m->arch_->buffer_sizes();
  m->kv_ = std::make_unique<KvCache>(hp.n_layer, n_ctx, bs.kv_k, bs.kv_v);
  m->pool_ = std::make_unique<ThreadPool>(opts.threads);

  ForwardState& s = m->state_;
  const int64_t B = std::max<int64_t>(1, opts.max_batch);
  const auto sz = [B](int64_t width) { return static_cast<size_t>(B * std::max<int64_t>(width, 1)); };
  s.max_batch = B;
  s.x.resize(sz(hp.n_embd));
  s.xn.resize(sz(hp.n_embd));
  s.out.resize(sz(hp.n_embd));
  s.q.resize(sz(bs.q));
  s.k.resize(sz(bs.k));
  s.v.resize(sz(bs.v));
  s.att.resize(sz(bs.att));
  s.ff_a.resize(sz(bs.ff));
  s.ff_b.resize(sz(bs.ff));
  s.q16.resize(static_cast<size_t>(m->pool_->size() * std::max(bs.q, bs.k)));
  if (hp.is_moe()) {
    s.router.resize(sz(hp.n_expert));
    s.chosen.resize(sz(hp.n_expert_used));
    s.chosen_w.resize(sz(hp.n_expert_used));
    s.expert_count.resize(static_cast<size_t>(hp.n_expert));
    s.expert_first.resize(static_cast<size_t>(hp.n_expert));
    s.expert_rows.resize(sz(hp.n_expert_used));
    s.ex_in.resize(sz(hp.n_embd));
    s.ex_out.resize(sz(hp.n_embd));
    s.ex_a.resize(sz(hp.n_ff_expert));
    s.ex_b.resize(sz(hp.n_ff_expert));
  }
  s.pool = m->pool_.get();
  s.kv = m->kv_.get();
  return m;
}

void Model::forward(std::span<const int32_t> tokens, int64_t pos0, bool all_logits, std::vector<float>& logits) {
  ForwardState& s = state_;
  const int64_t n = static_cast<int64_t>(tokens.size()), d = hp_.n_embd;
  if (n <= 0 || n > s.max_batch || pos0 < 0 || pos0 + n > n_ctx())
    throw Error(ErrorKind::internal, "forward: " + std::to_string(n) + " tokens at position " + std::to_string(pos0) +
                                         " do not fit (batch " + std::to_string(s.max_batch) + ", context " +
                                         std::to_string(n_ctx()) + ")");
  s.n = n;
  s.pos0 = pos0;
  const size_t embd_row = token_embd_.row_stride;
  for (int64_t t = 0; t < n; ++t) {
    const int32_t id = tokens[static_cast<size_t>(t)];
    if (id < 0 || id >= hp_.n_vocab)
      throw Error(ErrorKind::invalid_input, "token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                                std::to_string(hp_.n_vocab - 1) + ")");
    kernels::dequantize_row(token_embd_.type, static_cast<const uint8_t*>(token_embd_.data) + embd_row * id,
                            &s.x[t * d], d);
  }
  for (int64_t il = 0; il < hp_.n_layer; ++il) arch_->layer(il, s);

  // Only the rows whose logits are wanted go through the output head.
  const int64_t first = all_logits ? 0 : n - 1, rows = n - first;
  for (int64_t t = first; t < n; ++t) ops::rms_norm(&s.x[t * d], output_norm_.data(), d, hp_.rms_eps, &s.xn[(t - first) * d]);
  logits.resize(static_cast<size_t>(rows * hp_.n_vocab));
  kernels::matmul(output_, s.xn.data(), rows, logits.data(), *s.pool, s.mm);
}

}  // namespace ns
