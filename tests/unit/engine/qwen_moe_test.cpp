// qwen3moe and qwen2moe on generated models (there are no reference goldens
// for them here): they load, batched prefill equals token-by-token decoding
// (the cache, RoPE and routing agree between the two paths), and the shapes
// and cache size follow the metadata.
#include <doctest/doctest.h>

#include <cmath>

#include "engine/gguf/gguf_file.h"
#include "engine/model/model.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

namespace {

// Qwen3-MoE-like: the head size (32) is not n_embd / n_head (16).
std::string qwen3() {
  return test::make_model("qwen3moe",
                          "--arch qwen3moe --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --head-dim 32 "
                          "--n-ff 32 --n-expert 8 --n-expert-used 2 --rope-base 1000000 --type Q8_0 --seed 21");
}
std::string qwen2() {
  return test::make_model("qwen2moe",
                          "--arch qwen2moe --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 32 "
                          "--n-ff-shexp 64 --n-expert 8 --n-expert-used 2 --type Q8_0 --seed 22");
}

}  // namespace

TEST_CASE("qwen3moe and qwen2moe: batched prefill equals token-by-token decoding") {
  for (const std::string& path : {qwen3(), qwen2()}) {
    const double d = test::batched_vs_sequential(path);
    MESSAGE(path << ": max |batched - sequential| = " << d);
    CHECK(d < 1e-3);
  }
}

TEST_CASE("qwen3moe and qwen2moe: shapes, NEOX rope and the GQA cache size") {
  const ModelOptions mo{.engine = {.context = 16}};
  auto q3 = Model::load(qwen3(), mo);
  CHECK(q3->hparams().head_dim == 32);
  CHECK(q3->hparams().rope_type == RopeType::neox);
  CHECK(q3->hparams().n_ff_expert == 32);
  CHECK(q3->sequence_state().bytes_per_token() == 2u * (2u * 32u) * 2u * 2u);  // layers * (K + V of 2 heads) * F16
  auto q2 = Model::load(qwen2(), mo);
  CHECK(q2->hparams().n_ff_shexp == 64);
  CHECK(q2->sequence_state().bytes_per_token() == 2u * (2u * 16u) * 2u * 2u);
}
