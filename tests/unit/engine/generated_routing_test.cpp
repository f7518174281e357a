// Generated models route like trained ones (tests/bench/README.md, "Honest
// benchmark models"): over a batch of random tokens, every MoE layer of each
// sigmoid-routed generator (selection bias exp_probs_b of the generator's
// default distribution, many experts and few used, as DeepSeek V3, GLM-4.5,
// Kimi Linear and Kimi K3 have them) touches nearly as many distinct experts
// as uniform routing would. A selection bias too wide for the router's score
// spread sends every token to the experts it favours (the former fixed
// N(0, 0.05) bias gave a top-8-of-384 model 71-74 % of the uniform count).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "engine/spec/routing_spread.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;

namespace {

// Distinct experts n tokens would touch, n_used each, if every token chose
// uniformly: n_expert (1 - (1 - n_used / n_expert)^n).
double uniform_distinct(int64_t n_expert, int64_t n_used, int64_t n) {
  return double(n_expert) * (1.0 - std::pow(1.0 - double(n_used) / double(n_expert), double(n)));
}

void check_spread(const std::string& name, const std::string& flags) {
  CAPTURE(name);
  auto m = Model::load(test::make_model(name, flags + " --type F32 --seed 5"),
                       {.engine = {.context = 80, .max_batch_tokens = 64}});
  RoutingSpread spread;
  m->set_routing_observer([&spread](const RoutingEvent& e) { spread.observe(e); });
  std::mt19937_64 rng(1);
  std::vector<int32_t> toks(64);
  for (auto& t : toks) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(m->n_vocab()));
  std::vector<float> logits;
  m->forward(toks, 0, false, logits);
  const auto layers = spread.layers();
  REQUIRE(layers.size() == 2);
  for (const LayerSpread& l : layers) {
    const double uniform = uniform_distinct(l.n_expert, l.choices / l.tokens, l.tokens);
    MESSAGE(name << ": " << RoutingSpread::describe(l) << "; uniform routing: " << uniform);
    CHECK(double(l.distinct) >= 0.85 * uniform);
  }
}

}  // namespace

TEST_CASE("generated sigmoid-routed models touch >= 85 % of the experts uniform routing would") {
  // One dense layer, then two MoE layers; every FFN and expert tiny.
  check_spread("spread-deepseek2",
               "--arch deepseek2 --n-embd 256 --n-layer 3 --n-head 2 --n-ff 64 --n-expert 256 --n-expert-used 8 "
               "--q-lora-rank 32 --kv-lora-rank 32 --qk-rope-dim 16 --qk-nope-dim 16 --v-head-dim 16 "
               "--n-ff-expert 8 --n-expert-group 8 --n-expert-group-used 4 --gating sigmoid");
  check_spread("spread-glm4moe",
               "--arch glm4moe --n-embd 256 --n-layer 3 --n-head 2 --n-head-kv 1 --glm-head-dim 32 --n-ff 64 "
               "--n-expert 160 --n-expert-used 8 --glm-n-ff-expert 8");
  const std::string kimi =
      "--n-embd 256 --n-layer 3 --n-head 2 --n-ff 64 --n-expert 384 --n-expert-used 8 "
      "--mla-every 2 --kda-head-dim 16 --conv-kernel 4 --kl-n-ff-expert 8 "
      "--kl-kv-lora-rank 32 --kl-qk-rope-dim 16 --kl-qk-nope-dim 16 --kl-v-head-dim 16";
  check_spread("spread-kimi-linear", "--arch kimi-linear " + kimi);
  check_spread("spread-kimi-k3", "--arch kimi-k3 " + kimi + " --expert-latent 32 --attn-res-block 2");
  check_spread("spread-bailingmoe3",
               "--arch bailingmoe3 --n-embd 256 --n-layer 3 --n-head 2 --n-ff 64 --n-expert 256 --n-expert-used 8 "
               "--ling3-group 2 --ling3-kda-head-dim 16 --ling3-n-ff-expert 8 --ling3-n-ff-shexp 8 "
               "--ling3-kv-lora-rank 32 --ling3-qk-rope-dim 16 --ling3-qk-nope-dim 16 --ling3-v-head-dim 16");
}
