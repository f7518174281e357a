#include "engine/spec/tensor_table.h"

#include "common/error.h"

namespace ns {

const char* role_name(TensorRole r) {
  switch (r) {
    case TensorRole::embedding: return "embedding";
    case TensorRole::norm: return "norm";
    case TensorRole::bias: return "bias";
    case TensorRole::input: return "input";
    case TensorRole::residual: return "residual";
    case TensorRole::router: return "router";
    case TensorRole::score: return "score";
    case TensorRole::selection: return "selection";
    case TensorRole::conv: return "conv";
    case TensorRole::routed: return "routed";
    case TensorRole::routed_residual: return "routed_residual";
    case TensorRole::ids: return "ids";
  }
  return "?";
}

namespace {
// A null destination leaves the entry unbound (a description only).
template <class T>
decltype(TensorSpec::into) bind(T* into) {
  if (into == nullptr) return std::monostate{};
  return into;
}
}  // namespace

std::string block_prefix(int64_t il) { return "blk." + std::to_string(il) + "."; }

TensorSpec& TensorTable::add(TensorSpec spec) {
  if (skipping_) {
    spec.presence = Presence::skipped;
    spec.into = std::monostate{};
  }
  spec.block = block_;
  return specs_.emplace_back(std::move(spec));
}

void TensorTable::vector(std::string name, int64_t n, TensorRole role, std::vector<float>* into, Presence presence) {
  add({std::move(name), {static_cast<uint64_t>(n)}, role, presence, bind(into)});
}

void TensorTable::values(std::string name, std::vector<uint64_t> dims, TensorRole role, std::vector<float>* into,
                         Presence presence) {
  add({std::move(name), std::move(dims), role, presence, bind(into)});
}

void TensorTable::ids(std::string name, std::vector<uint64_t> dims, std::vector<int32_t>* into, Presence presence) {
  add({std::move(name), std::move(dims), TensorRole::ids, presence, bind(into)});
}

TensorSpec& TensorTable::matrix(std::string name, int64_t rows, int64_t cols, TensorRole role,
                                kernels::MatrixView* into, Presence presence) {
  return add({std::move(name), {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)}, role, presence, bind(into)});
}

void TensorTable::experts(std::string name, int64_t n_expert, int64_t rows, int64_t cols, TensorRole role,
                          ExpertsView* into) {
  if (!is_routed(role))
    throw Error(ErrorKind::internal, "tensor table: '" + name + "' is an experts' stack with role " + role_name(role));
  add({std::move(name),
       {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows), static_cast<uint64_t>(n_expert)},
       role,
       Presence::required,
       bind(into)});
}

void TensorTable::heads(std::string name, int64_t n, int64_t rows, int64_t cols, ExpertsView* into, Presence presence) {
  add({std::move(name),
       {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows), static_cast<uint64_t>(n)},
       TensorRole::input,
       presence,
       bind(into)});
}

void TensorTable::load(TensorLoader& t) const {
  for (const TensorSpec& s : specs_) {
    if (s.presence == Presence::skipped || (s.presence != Presence::required && !t.has(s.name))) continue;
    const auto n = [&](size_t i) { return static_cast<int64_t>(s.dims[i]); };
    if (auto* v = std::get_if<std::vector<float>*>(&s.into))
      **v = s.dims.size() == 1 ? t.vector(s.name, n(0)) : t.values(s.name, s.dims);
    else if (auto* m = std::get_if<kernels::MatrixView*>(&s.into))
      **m = t.matrix(s.name, n(1), n(0), matmul_only(s));
    else if (auto* e = std::get_if<ExpertsView*>(&s.into))
      **e = t.experts(s.name, n(2), n(1), n(0));
    else if (auto* ids = std::get_if<std::vector<int32_t>*>(&s.into))
      **ids = t.ids(s.name, s.dims);
    else
      continue;  // unbound: a description only
    t.note_role(s.name, s.role, s.block);
  }
}

void TensorTable::unbind() {
  for (TensorSpec& s : specs_) s.into = std::monostate{};
}

void head_tensors(TensorTable& t, const Hparams& hp, bool tied_output, kernels::MatrixView* token_embd,
                  std::vector<float>* output_norm, kernels::MatrixView* output) {
  t.matrix("token_embd.weight", hp.n_vocab, hp.n_embd, TensorRole::embedding, token_embd);
  t.vector("output_norm.weight", hp.n_embd, TensorRole::norm, output_norm);
  if (!tied_output) t.matrix("output.weight", hp.n_vocab, hp.n_embd, TensorRole::input, output);
}

}  // namespace ns
