#include "engine/gguf/gguf_split.h"

#include <algorithm>

#include "common/error.h"
#include "engine/gguf/gguf_writer.h"

namespace ns::gguf {

std::vector<std::string> write_split(const GgufSet& source, const std::string& prefix, const SplitOptions& opts) {
  if (opts.max_tensors == 0) throw Error(ErrorKind::invalid_input, "write_split: max_tensors must be at least 1");
  const std::vector<TensorInfo>& tensors = source.tensors();
  // Which tensors go to which shard: [first[i], first[i + 1]).
  std::vector<size_t> first{0};
  if (opts.metadata_only_first) first.push_back(0);
  for (size_t at = first.back(); at < tensors.size();) {
    at = std::min(tensors.size(), at + opts.max_tensors);
    first.push_back(at);
  }
  if (first.size() == 1) first.push_back(0);  // no tensors at all: one shard of metadata
  const size_t n = first.size() - 1;
  if (n > 65535)
    throw Error(ErrorKind::invalid_input, "write_split: " + std::to_string(n) +
                                              " shards, more than split.count (u16) can say: raise max_tensors");
  if (tensors.size() > 0x7fffffff)
    throw Error(ErrorKind::invalid_input, "write_split: too many tensors for split.tensors.count");
  const GgufFile& meta = source.metadata();
  std::vector<std::string> paths;
  for (size_t i = 0; i < n; ++i) {
    GgufWriter w;
    if (i == 0) {
      for (const auto& [key, value] : meta.metadata())
        if (key.rfind("split.", 0) != 0) w.set(key, value);
    } else if (const Value* a = meta.find("general.alignment")) {
      w.set("general.alignment", *a);
    }
    w.set(kSplitNo, val::u16(static_cast<uint16_t>(i)));
    w.set(kSplitCount, val::u16(static_cast<uint16_t>(n)));
    w.set(kSplitTensorsCount, val::i32(static_cast<int32_t>(tensors.size())));
    for (size_t t = first[i]; t < first[i + 1]; ++t) w.add_tensor(tensors[t].name, tensors[t].dims, tensors[t].type);
    const std::string path = split_shard_path(prefix, static_cast<uint32_t>(i), static_cast<uint32_t>(n));
    w.open(path);
    for (size_t t = first[i]; t < first[i + 1]; ++t)
      w.write_tensor(tensors[t].name, {source.tensor_data(tensors[t]), tensors[t].nbytes});
    w.close();
    paths.push_back(path);
  }
  return paths;
}

}  // namespace ns::gguf
