// An architecture's tensors, described once (issue 12; gemma.cpp's
// ForEachTensor idea).
//
// Contract: one function in the architecture's file (engine/arch/<arch>.cpp)
// lists every tensor of its model files: name, shape (GGUF/ggml order, from
// Hparams), role, presence, and the field the loader fills. Its consumers read
// that one list and keep no list of their own:
//   - the loader: TensorTable::load fills every bound field through
//     TensorLoader (shape- and type-checked); the tensors it asks for are what
//     Model's memory plan counts;
//   - the model: the loader records each loaded entry's role and block
//     (TensorLoader::note_role), and the model asks those roles, never the
//     names: the routed stacks are what the expert layout and the memory plan
//     stream, every other tensor is resident; each block's router is what the
//     expert cache's predictor reads (tensor_role.h);
//   - nightshift-make-model (tools/make_model/table_plans.cpp): one tensor
//     per entry it writes, in table order (the file order of llama.cpp's
//     converter), its initial scale and type class (quantized or F32) from the role.
// The table is built from hyperparameters alone, so the generator reads it
// from the metadata it writes (Hparams::from_gguf), as the engine does.
// Entries are bound to the caller's weight structs (a null destination: a
// description only, as tensor_table() in engine/arch/architecture.h gives).
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "engine/kernels/kernels.h"
#include "engine/spec/hparams.h"
#include "engine/spec/tensor_loader.h"
#include "engine/spec/tensor_role.h"

namespace ns {

enum class Presence : uint8_t {
  required,   // the loader fails without it; the generator writes it
  optional,   // the loader takes it when present; the generator writes it
  tolerated,  // the loader takes it when present; the generator does not write it
  skipped,    // the generator writes it; the loader never reads it (NextN blocks, which no forward pass reaches)
};

struct TensorSpec {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the row (input features)
  TensorRole role = TensorRole::input;
  Presence presence = Presence::required;
  // Where the loader puts it: a 1-D tensor (or any small one, converted to
  // F32) in a vector, a matrix in a view, a routed stack in an experts view.
  std::variant<std::monostate, std::vector<float>*, kernels::MatrixView*, ExpertsView*, std::vector<int32_t>*> into;
  // A matrix the forward pass also reads by rows or row slices (MLA's fused
  // attn_kv_b), not only as a matmul's weight: it stays in the file's layout.
  bool by_rows = false;
  int64_t block = -1;  // the block (layer) it belongs to (describe_blocks sets it); -1: the head's
};
// Read only as a matmul's weight matrix, so the loader may repack it
// (TensorLoader::set_repack): the projections (input, residual) not marked
// by_rows. The embedding (read by rows; the tied output head is the same
// view), routers (also read from the mapping for prediction) and everything
// kept in F32 are not.
inline bool matmul_only(const TensorSpec& s) {
  return !s.by_rows && (s.role == TensorRole::input || s.role == TensorRole::residual);
}

// "blk.<il>.": the prefix of block il's tensors.
std::string block_prefix(int64_t il);

class TensorTable {
 public:
  // A 1-D tensor of n values.
  void vector(std::string name, int64_t n, TensorRole role, std::vector<float>* into,
              Presence presence = Presence::required);
  // A small tensor of any shape, all its values in `into` (conv weights, ssm_a).
  void values(std::string name, std::vector<uint64_t> dims, TensorRole role, std::vector<float>* into,
              Presence presence = Presence::required);
  // A matrix with `rows` outputs and `cols` inputs (dims [cols, rows]), as
  // TensorLoader::matrix. Returns the entry (to mark it by_rows).
  TensorSpec& matrix(std::string name, int64_t rows, int64_t cols, TensorRole role, kernels::MatrixView* into,
                     Presence presence = Presence::required);
  // An I32 table of any shape (role ids), all its values in `into`.
  void ids(std::string name, std::vector<uint64_t> dims, std::vector<int32_t>* into,
           Presence presence = Presence::required);
  // n_expert stacked matrices of `rows` x `cols` (dims [cols, rows, n_expert]); role routed or routed_residual.
  void experts(std::string name, int64_t n_expert, int64_t rows, int64_t cols, TensorRole role, ExpertsView* into);
  // n stacked per-head matrices of `rows` x `cols` (MLA's attn_k_b, attn_v_b),
  // resident like any projection: role input.
  void heads(std::string name, int64_t n, int64_t rows, int64_t cols, ExpertsView* into,
             Presence presence = Presence::required);

  const std::vector<TensorSpec>& specs() const { return specs_; }
  // Loads every bound entry (required ones must be in the file, the others
  // are loaded when they are) and tells the loader its role and block
  // (TensorLoader::note_role); throws what TensorLoader throws.
  void load(TensorLoader& t) const;
  // Forgets every binding (for a description whose weight structs are gone).
  void unbind();
  // While set, entries are added unbound and Presence::skipped (an
  // architecture's NextN blocks, described into scratch structs).
  void set_skipping(bool on) { skipping_ = on; }
  // Entries added from now on belong to block il (-1: to none); describe_blocks sets it.
  void set_block(int64_t il) { block_ = il; }
  int64_t block() const { return block_; }

 private:
  TensorSpec& add(TensorSpec spec);
  std::vector<TensorSpec> specs_;
  bool skipping_ = false;
  int64_t block_ = -1;
};

// An architecture's binding function: lists the tensors of hp's blocks into
// the table, bound to `weights` (most: a vector of layers, resized to one per
// block that runs; kimi-k3: the layers and its output mix score).
template <class Weights>
using DescribeLayers = void (*)(const Hparams& hp, TensorTable& t, Weights& weights);

// Lists hp's blocks: block(il, prefix, layer) for each block that runs,
// bound to `layers` (resized to one per block), then for the NextN blocks
// after them (Hparams::n_layer_nextn), described into a scratch layer and
// skipped (no forward pass reaches them).
template <class Layer, class Block>
void describe_blocks(const Hparams& hp, TensorTable& t, std::vector<Layer>& layers, Block block) {
  layers.resize(static_cast<size_t>(hp.n_layer));
  Layer nextn;
  for (int64_t il = 0; il < hp.n_layer + hp.n_layer_nextn; ++il) {
    const bool skipped = il >= hp.n_layer;
    t.set_skipping(skipped);
    t.set_block(il);
    block(il, block_prefix(il), skipped ? nextn : layers[static_cast<size_t>(il)]);
  }
  t.set_skipping(false);
  t.set_block(-1);
}

// The architecture's loader: fills `weights` from the file through its table.
template <class Weights>
void load_layers(DescribeLayers<Weights> describe, const Hparams& hp, TensorLoader& loader, Weights& weights) {
  TensorTable t;
  describe(hp, t, weights);
  t.load(loader);
}

// A description only: `describe` run on weight structs that are then
// dropped, the table left unbound.
template <class Weights>
void describe_unbound(DescribeLayers<Weights> describe, const Hparams& hp, TensorTable& t) {
  Weights dropped;
  describe(hp, t, dropped);
  t.unbind();
}

// The output head every architecture shares: token_embd, output_norm, and
// output.weight unless tied_output (the head then reuses token_embd).
void head_tensors(TensorTable& t, const Hparams& hp, bool tied_output, kernels::MatrixView* token_embd,
                  std::vector<float>* output_norm, kernels::MatrixView* output);

}  // namespace ns
