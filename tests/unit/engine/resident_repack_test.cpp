// Resident Q4_0 matrices repacked into Q4_0_R16 at load (TensorLoader::set_repack,
// the switch EngineOptions::repack_experts): the loader's copy is the
// file's matrix repacked, only matrices read solely as a matmul's weight are
// repacked (not the embedding, the routers, the experts' stacks, MLA's fused
// attn_kv_b), and the logits are those of the file's layout: bit for bit on
// the scalar path, within float rounding on the SIMD ones (the tile sums in
// the scalar reference's order), and the same through the mapping and the
// expert cache.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/gguf/gguf_file.h"
#include "engine/gguf/gguf_set.h"
#include "engine/kernels/kernels.h"
#include "engine/model/model.h"
#include "engine/spec/tensor_loader.h"
#include "tests/unit/engine/asan_budget.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

namespace {

// A DeepSeek-V2-Lite-like model in Q4_0: MLA without q_lora (wq, kv_a, wo),
// a dense lead layer, two shared experts, softmax routing. `layout` split:
// attn_k_b/attn_v_b (read per head, never repacked); kv_b: the fused
// attn_kv_b, which is sliced by rows and must stay in the file's layout.
std::string ds2_q4(const std::string& layout) {
  return test::make_model(
      "resident-ds2-" + layout,
      "--arch deepseek2 --n-embd 64 --n-layer 3 --n-head 2 --n-ff 128 --n-expert 8 --n-expert-used 2 "
      "--q-lora-rank 0 --kv-lora-rank 32 --qk-rope-dim 16 --qk-nope-dim 32 --v-head-dim 32 --n-ff-expert 32 "
      "--n-shared-expert 2 --n-dense-lead 1 --gating softmax --mla-layout " +
          layout + " --type Q4_0 --seed 17");
}

// What the loader should repack, from the file alone: 2-D Q4_0 matrices of at
// least one group of rows, less those read otherwise than by matmul.
struct Expected {
  size_t tensors = 0;
  uint64_t bytes = 0;
};
Expected expected_repack(const std::string& path) {
  const auto f = gguf::GgufFile::open(path);
  Expected e;
  for (const auto& t : f->tensors()) {
    const bool other_use = t.name == "token_embd.weight" || t.name.find("attn_kv_b") != std::string::npos ||
                           t.name.find("ffn_gate_inp") != std::string::npos;
    if (t.type == gguf::GgmlType::Q4_0 && t.dims.size() == 2 && t.dims[1] >= 16 && !other_use) {
      ++e.tensors;
      e.bytes += t.nbytes;
    }
  }
  return e;
}

struct Logits {
  std::vector<float> values;
  size_t repacked = 0;
  uint64_t repacked_bytes = 0;
};

// A 10-token prompt (all logits) and three single-token steps.
Logits run(const std::string& path, bool repack, const std::string& io_mode = "mmap") {
  ModelOptions mo;
  mo.engine.threads = 2;
  mo.engine.context = 64;
  mo.engine.io_mode = io_mode;
  mo.engine.repack_experts = repack;
  mo.tuning.max_cache_experts = io_mode == "mmap" ? 0 : 4;
  auto m = Model::load(path, mo);
  Logits r;
  r.repacked = m->repacked_tensors();
  r.repacked_bytes = m->repacked_bytes();
  m->forward(test::some_tokens(m->n_vocab(), 10), 0, true, r.values);
  std::vector<float> last;
  for (int i = 0; i < 3; ++i) {
    const int32_t one[1] = {static_cast<int32_t>((i * 11 + 3) % m->n_vocab())};
    m->forward(one, 10 + i, false, last);
    r.values.insert(r.values.end(), last.begin(), last.end());
  }
  return r;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::fabs(double(x)));
  return m;
}

// Repack on against off: the expected matrices repacked, and the same logits
// (bit for bit on the scalar path; within a tight bound on the detected ISA,
// where today's tile sums in the scalar order and the file layout's kernels
// in ggml's 8 lanes).
void check_on_equals_off(const std::string& path) {
  const Expected want = expected_repack(path);
  REQUIRE(want.tensors > 0);
  const kernels::Isa saved = kernels::active_isa();
  kernels::set_isa(kernels::Isa::scalar);
  const Logits off = run(path, false), on = run(path, true);
  kernels::set_isa(saved);
  CHECK(off.repacked == 0);
  CHECK(on.repacked == want.tensors);
  CHECK(on.repacked_bytes == want.bytes);
  CHECK(on.values == off.values);

  const Logits off_simd = run(path, false), on_simd = run(path, true);
  CAPTURE(kernels::isa_name(saved));
  CHECK(test::max_abs_diff(on_simd.values, off_simd.values) <= 1e-4 * max_abs(off_simd.values));
}

}  // namespace

TEST_CASE("resident repack: the loader's copy is the file's matrix in Q4_0_R16, and only when asked") {
  const std::string path = ds2_q4("split");
  const auto f = gguf::GgufSet::open(path);
  const gguf::TensorInfo* t = f->find_tensor("blk.0.attn_q.weight");
  REQUIRE(t != nullptr);
  REQUIRE(t->type == gguf::GgmlType::Q4_0);
  const auto rows = static_cast<int64_t>(t->dims[1]), cols = static_cast<int64_t>(t->dims[0]);

  TensorLoader plain(*f);  // off by default
  const kernels::MatrixView mapped = plain.matrix(t->name, rows, cols, true);
  CHECK(mapped.type == gguf::GgmlType::Q4_0);
  CHECK(mapped.data == f->tensor_data(*t));

  TensorLoader copy(*f);
  copy.set_repack(TensorLoader::Repack::copy);
  CHECK(copy.matrix(t->name, rows, cols, false).data == f->tensor_data(*t));  // not repackable: the mapping
  CHECK(copy.repacked_tensors() == 0);
  const kernels::MatrixView v = copy.matrix(t->name, rows, cols, true);
  CHECK(v.type == gguf::GgmlType::Q4_0_R16);
  CHECK(v.data != f->tensor_data(*t));
  CHECK(v.row_stride == mapped.row_stride);
  CHECK(copy.matrix(t->name, rows, cols, true).data == v.data);  // asked again: the same copy
  CHECK(copy.repacked_tensors() == 1);
  CHECK(copy.repacked_bytes() == t->nbytes);
  std::vector<uint8_t> back(static_cast<const uint8_t*>(v.data), static_cast<const uint8_t*>(v.data) + t->nbytes);
  kernels::unpack_rows(t->type, back.data(), rows, cols);
  CHECK(std::memcmp(back.data(), f->tensor_data(*t), t->nbytes) == 0);
  const auto owned = copy.take_owned();
  CHECK(owned.size() == 1);

  TensorLoader count(*f);
  count.set_repack(TensorLoader::Repack::count);
  CHECK(count.matrix(t->name, rows, cols, true).data == f->tensor_data(*t));  // counted, not copied
  CHECK(count.repacked_bytes() == t->nbytes);
  CHECK(count.take_owned().empty());
}

TEST_CASE("resident repack: a Q4_0 deepseek2 (split k_b/v_b) gives the file layout's logits") {
  check_on_equals_off(ds2_q4("split"));
}

TEST_CASE("resident repack: a Q4_0 deepseek2 with the fused attn_kv_b keeps it in the file's layout") {
  check_on_equals_off(ds2_q4("kv_b"));
}

TEST_CASE("resident repack: a Q4_0 llama MoE gives the file layout's logits; Q8_0 has nothing to repack") {
  check_on_equals_off(test::moe_model());
  CHECK(run(test::dense_model(), true).repacked == 0);
}

TEST_CASE("resident repack: the mapping and the expert cache repack the same matrices, the same logits") {
  // Scalar path: the experts the cache lands repacked give the mapping's bits there too.
  const std::string path = ds2_q4("split");
  const kernels::Isa saved = kernels::active_isa();
  kernels::set_isa(kernels::Isa::scalar);
  const Logits mapped = run(path, true, "mmap"), streamed = run(path, true, "uring");
  kernels::set_isa(saved);
  CHECK(streamed.repacked == mapped.repacked);
  CHECK(streamed.repacked_bytes == mapped.repacked_bytes);
  CHECK(streamed.values == mapped.values);
}

TEST_CASE("resident repack: the memory plan names the repacked bytes within the resident weights") {
  const std::string path = ds2_q4("split");
  ModelOptions mo;
  mo.engine.context = 64;
  mo.engine.memory_budget = test::with_asan_rss(64ull << 20);
  mo.engine.repack_experts = true;
  for (const bool plan_only : {false, true}) {
    CAPTURE(plan_only);
    mo.plan_only = plan_only;
    auto m = Model::load(path, mo);
    const stream::BudgetPlan& plan = m->streaming().plan;
    CHECK(plan.repacked_bytes == expected_repack(path).bytes);
    CHECK(plan.repacked_bytes < plan.resident_bytes);
    CHECK(plan.describe().find("of them repacked to Q4_0_R16") != std::string::npos);
  }
  mo.engine.repack_experts = false;
  CHECK(Model::load(path, mo)->streaming().plan.repacked_bytes == 0);
}
