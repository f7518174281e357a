// ns-trace-dump: nightshift's named intermediates for one golden prompt, in the
// format ns-ref-dump's NS_REF_TENSORS writes (tests/conformance/reference/
// ns_ref_dump.cpp), so the two engines compare layer by layer (issue 34).
//
//   ns_trace_dump MODEL.gguf GOLDEN.json CASE OUT_DIR [CHUNK]
//
// Feeds case CASE's prompt_tokens (the reference's ids) in one forward pass (or
// in forward calls of CHUNK tokens) and writes every traced intermediate
// (engine/state/trace.h) to OUT_DIR/NAME-LAYER.K.bin (NAME.K.bin for the head),
// K the call it came from: four int64 sizes ne[0..3] (width, tokens, 1, 1),
// then the values as F32. NS_CPU_FEATURES=avx2|scalar|... picks the kernels'
// path (the cpu_features setting). Not a test; a tool for the conformance
// notes in docs/models.md.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "engine/kernels/kernels.h"
#include "engine/model/model.h"

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s MODEL.gguf GOLDEN.json CASE OUT_DIR [CHUNK]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[4];
  std::ifstream in(argv[2]);
  const nlohmann::json doc = nlohmann::json::parse(in);
  const nlohmann::json& cases = doc.is_array() ? doc : doc["cases"];
  const std::vector<int32_t> toks = cases.at(static_cast<size_t>(std::atoi(argv[3])))["prompt_tokens"];
  const size_t chunk = argc > 5 ? static_cast<size_t>(std::atoi(argv[5])) : toks.size();
  if (const char* isa = std::getenv("NS_CPU_FEATURES")) ns::kernels::set_isa_override(isa);
  ns::ModelOptions mo;
  mo.engine.context = 512;
  auto model = ns::Model::load(argv[1], mo);
  std::map<std::string, int> seen;
  model->set_trace_observer([&](const char* name, int64_t layer, const float* rows, int64_t n, int64_t width) {
    const std::string base = layer < 0 ? std::string(name) : std::string(name) + "-" + std::to_string(layer);
    const std::string path = dir + "/" + base + "." + std::to_string(seen[base]++) + ".bin";
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return;
    const int64_t ne[4] = {width, n, 1, 1};
    std::fwrite(ne, sizeof ne, 1, f);
    std::fwrite(rows, sizeof(float), static_cast<size_t>(n * width), f);
    std::fclose(f);
  });
  std::vector<float> logits;
  for (size_t at = 0; at < toks.size(); at += chunk) {
    const size_t len = std::min(chunk, toks.size() - at);
    model->forward(std::span<const int32_t>(toks).subspan(at, len), static_cast<int64_t>(at), true, logits);
  }
  return 0;
}
