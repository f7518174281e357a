#include "engine/gguf/gguf_set.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "common/error.h"

namespace ns::gguf {
namespace {

constexpr const char* kNaming = "NAME-00001-of-00003.gguf, NAME-00002-of-00003.gguf, ...";

[[noreturn]] void bad(const std::string& what) { throw Error(ErrorKind::bad_model, what); }

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// A split key of shard `f` as an integer, or nullopt when absent; throws naming the shard when it is not one.
std::optional<int64_t> split_key(const GgufFile& f, const char* key) {
  const Value* v = f.find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer())
    bad(f.path() + ": metadata key '" + key + "' should be an integer but is " + value_type_name(v->type));
  return v->i;
}

std::string shard_label(size_t no, size_t count) {
  return "shard " + std::to_string(no + 1) + " of " + std::to_string(count);
}

}  // namespace

std::optional<SplitName> parse_split_name(const std::string& path) {
  constexpr std::string_view ext = ".gguf", of = "-of-";
  if (path.size() < ext.size() || path.compare(path.size() - ext.size(), ext.size(), ext) != 0) return std::nullopt;
  const std::string stem = path.substr(0, path.size() - ext.size());
  const size_t of_at = stem.rfind(of);
  if (of_at == std::string::npos) return std::nullopt;
  const std::string count = stem.substr(of_at + of.size());
  const size_t dash = stem.rfind('-', of_at == 0 ? 0 : of_at - 1);
  if (dash == std::string::npos || dash >= of_at) return std::nullopt;
  const std::string no = stem.substr(dash + 1, of_at - dash - 1);
  if (!all_digits(no) || !all_digits(count) || no.size() > 9 || count.size() > 9) return std::nullopt;
  SplitName s;
  s.prefix = stem.substr(0, dash);
  const unsigned long n = std::stoul(no), c = std::stoul(count);
  if (n == 0 || c == 0 || n > c || s.prefix.empty() || s.prefix.back() == '/') return std::nullopt;
  s.no = static_cast<uint32_t>(n - 1);
  s.count = static_cast<uint32_t>(c);
  return s;
}

std::string split_shard_path(const std::string& prefix, uint32_t no, uint32_t count) {
  char tail[48];
  std::snprintf(tail, sizeof tail, "-%05u-of-%05u.gguf", no + 1, count);
  return prefix + tail;
}

std::shared_ptr<GgufSet> GgufSet::open(const std::string& path) {
  auto given = GgufFile::open(path);
  const std::optional<int64_t> count = split_key(*given, kSplitCount);
  const std::optional<SplitName> name = parse_split_name(path);
  if (count && (*count < 0 || *count > 65535))
    bad(path + ": split.count is " + std::to_string(*count) + " (0 to 65535 allowed): the file is damaged");
  if (!count || *count <= 1) {
    // An unsplit file, a set of one shard, or a merged one (gguf-split --merge
    // writes split.count 0): the name does not matter.
    return of({std::move(given)});
  }
  const auto n = static_cast<uint32_t>(*count);
  if (!name)
    bad(path + ": this file is one shard of a model split into " + std::to_string(n) +
        " (split.count) but its name does not follow gguf-split's naming (" + kNaming +
        "), so the other shards cannot be found: keep the names the shards were published with");
  if (name->count != n)
    bad(path + ": the name says " + std::to_string(name->count) + " shards but the file's split.count is " +
        std::to_string(n) + ": the file was renamed or belongs to another split of the model; download the set again");
  // Every shard present before any is mapped: one message names all that are missing.
  std::string missing;
  uint32_t n_missing = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const std::string p = split_shard_path(name->prefix, i, n);
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) {
      missing += (n_missing++ ? ", " : "") + p + " (" + shard_label(i, n) + ": " + std::strerror(errno) + ")";
    }
  }
  if (n_missing > 0)
    throw IncompleteFileError(
        path + ": the model is split into " + std::to_string(n) + " shards and " + std::to_string(n_missing) +
        (n_missing == 1 ? " is" : " are") + " missing: " + missing +
        ": download the missing shards into the same folder, with the names they were published with");
  std::vector<std::shared_ptr<GgufFile>> shards;
  shards.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    if (i == name->no) {
      shards.push_back(given);
      continue;
    }
    shards.push_back(GgufFile::open(split_shard_path(name->prefix, i, n)));
  }
  return of(std::move(shards));
}

std::shared_ptr<GgufSet> GgufSet::of(std::vector<std::shared_ptr<GgufFile>> shards) {
  if (shards.empty()) throw Error(ErrorKind::internal, "GgufSet::of: no files");
  std::shared_ptr<GgufSet> set(new GgufSet());
  const size_t n = shards.size();
  const GgufFile& first = *shards.front();
  const std::optional<int64_t> first_count = split_key(first, kSplitCount);
  set->split_ = first_count && *first_count >= 1;
  if (n == 1 && (!first_count || *first_count <= 1)) {
    // One file: an unsplit model, a set of one shard, or a merged one (split.count 0).
  } else {
    for (size_t i = 0; i < n; ++i) {
      const GgufFile& f = *shards[i];
      const std::optional<int64_t> c = split_key(f, kSplitCount), no = split_key(f, kSplitNo);
      if (!c || !no)
        bad(f.path() + ": " + shard_label(i, n) + " has no '" + (c ? kSplitNo : kSplitCount) +
            "' key: it is not a gguf-split shard (a file of another model, or renamed): replace it with the "
            "published shard");
      if (*c != static_cast<int64_t>(n))
        bad(f.path() + ": " + shard_label(i, n) + " says split.count " + std::to_string(*c) + " but the set (" +
            first.path() + ") has " + std::to_string(n) +
            " shards: the shards come from different splits of the model; download the set again");
      if (*no != static_cast<int64_t>(i))
        bad(f.path() + ": " + shard_label(i, n) + " says split.no " + std::to_string(*no) + " (shard " +
            std::to_string(*no + 1) + "): it was renamed or belongs to another split; download the set again");
    }
  }
  uint64_t total = 0;
  std::map<std::string, size_t> owner;  // tensor name -> shard, for the duplicate message
  for (size_t i = 0; i < n; ++i) {
    for (const TensorInfo& t : shards[i]->tensors()) {
      auto [it, fresh] = owner.emplace(t.name, i);
      if (!fresh)
        bad(shards[i]->path() + ": tensor '" + t.name + "' of " + shard_label(i, n) + " is also in " +
            shards[it->second]->path() + " (" + shard_label(it->second, n) +
            "): the shards come from different splits; download the set again");
      TensorInfo ti = t;
      ti.file = static_cast<uint32_t>(i);
      set->index_.emplace(ti.name, set->tensors_.size());
      set->tensors_.push_back(std::move(ti));
      ++total;
    }
  }
  if (set->split_) {
    const std::optional<int64_t> want = split_key(first, kSplitTensorsCount);
    if (!want)
      bad(first.path() + ": a split model's first shard has no '" + std::string(kSplitTensorsCount) +
          "' key: the file is damaged or not a gguf-split shard");
    if (*want != static_cast<int64_t>(total)) {
      std::string per;
      for (size_t i = 0; i < n; ++i)
        per += (i ? ", " : "") + shards[i]->path() + ": " + std::to_string(shards[i]->tensors().size());
      bad(first.path() + ": split.tensors.count says " + std::to_string(*want) + " tensors but the " +
          std::to_string(n) + " shard" + (n == 1 ? "" : "s") + " hold " + std::to_string(total) + " (" + per +
          "): a shard is from another split of the model or damaged; download the set again");
    }
  }
  set->shards_ = std::move(shards);
  return set;
}

std::vector<std::string> GgufSet::paths() const {
  std::vector<std::string> out;
  out.reserve(shards_.size());
  for (const auto& s : shards_) out.push_back(s->path());
  return out;
}

uint64_t GgufSet::total_bytes() const {
  uint64_t b = 0;
  for (const auto& s : shards_) b += s->file_size();
  return b;
}

size_t GgufSet::n_devices() const {
  std::set<uint64_t> devices;
  for (const auto& s : shards_) devices.insert(s->device());
  return devices.size();
}

const TensorInfo* GgufSet::find_tensor(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

bool GgufSet::advise_random() const {
  bool ok = true;
  for (const auto& s : shards_) ok = s->advise_random() && ok;
  return ok;
}

}  // namespace ns::gguf
