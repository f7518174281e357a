#include "engine/gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "engine/gguf/map_guard.h"

namespace ns::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
// Limits that no real file reaches; they stop a corrupt count from turning into
// a huge allocation before the bounds check on the bytes themselves would.
constexpr uint64_t kMaxStringBytes = 1ull << 30;
constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 8;

[[noreturn]] void fail(const std::string& source, uint64_t offset, const std::string& what) {
  throw Error(ErrorKind::bad_model, source + ": invalid GGUF at byte offset " + std::to_string(offset) + ": " + what);
}
// The file ends before what its own header describes: cut off, or still being written.
[[noreturn]] void fail_short(const std::string& source, uint64_t offset, const std::string& what) {
  throw IncompleteFileError(source + ": incomplete GGUF at byte offset " + std::to_string(offset) + ": " + what);
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

}  // namespace

// Reads the header, metadata and tensor index from a byte span, checking each
// read against the span's end.
class Parser {
 public:
  Parser(std::span<const uint8_t> bytes, std::string source) : b_(bytes), src_(std::move(source)) {}

  GgufFile run() {
    GgufFile f;
    f.path_ = src_;
    f.file_size_ = b_.size();
    f.base_ = b_.data();
    if (b_.size() < 4 || read_u32() != kMagic)
      fail(src_, 0, "missing GGUF magic (not a GGUF file, or truncated to " + std::to_string(b_.size()) + " bytes)");
    f.version_ = read_u32();
    if (f.version_ != 2 && f.version_ != 3)
      fail(src_, 4, "unsupported GGUF version " + std::to_string(f.version_) + " (this build reads versions 2 and 3)");
    const uint64_t n_tensors = read_u64("tensor count");
    const uint64_t n_kv = read_u64("metadata count");
    // Each entry needs at least 8 bytes (its name length); a count larger than
    // the file can hold is corrupt.
    if (n_kv > remaining() / 8)
      short_or_corrupt(n_kv <= kPlausibleCount, pos_ - 8,
                       "metadata count " + std::to_string(n_kv) + " exceeds what the file can hold");
    if (n_tensors > remaining() / 8)
      short_or_corrupt(n_tensors <= kPlausibleCount, pos_ - 16,
                       "tensor count " + std::to_string(n_tensors) + " exceeds what the file can hold");

    for (uint64_t i = 0; i < n_kv; ++i) {
      const uint64_t at = pos_;
      std::string key = read_string(("metadata key #" + std::to_string(i)).c_str());
      const uint32_t type = read_u32_ctx("type of key '" + key + "'");
      Value v = read_value(type, key, 0);
      if (!f.kv_.emplace(key, std::move(v)).second) fail(src_, at, "duplicate metadata key '" + key + "'");
    }

    if (const Value* a = f.find("general.alignment")) {
      if (!a->is_integer() || a->u == 0 || (a->u & (a->u - 1)) != 0 || a->u > (1u << 16))
        fail(src_, 0, "general.alignment must be a power of two between 1 and 65536");
      f.alignment_ = a->u;
    }

    f.tensors_.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) {
      const uint64_t at = pos_;
      TensorInfo t;
      t.name = read_string("name of tensor #" + std::to_string(i));
      const uint32_t n_dims = read_u32_ctx("dimension count of tensor '" + t.name + "'");
      if (n_dims == 0 || n_dims > kMaxDims)
        fail(src_, at, "tensor '" + t.name + "' has " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
      for (uint32_t d = 0; d < n_dims; ++d) {
        const uint64_t dim = read_u64("dimension of tensor '" + t.name + "'");
        if (dim == 0 || dim > (1ull << 40))
          fail(src_, pos_ - 8, "tensor '" + t.name + "' has dimension " + std::to_string(dim));
        t.dims.push_back(dim);
      }
      const uint32_t type_id = read_u32_ctx("type of tensor '" + t.name + "'");
      auto tt = type_traits(type_id);
      if (!tt) fail(src_, pos_ - 4, "tensor '" + t.name + "' has unknown type id " + std::to_string(type_id));
      t.type = tt->type;
      t.offset = read_u64("offset of tensor '" + t.name + "'");
      uint64_t n = 1;
      for (uint64_t d : t.dims)
        if (mul_overflows(n, d, &n)) fail(src_, at, "tensor '" + t.name + "' element count overflows");
      if (t.dims[0] % tt->block_elems != 0)
        fail(src_, at,
             "tensor '" + t.name + "' row length " + std::to_string(t.dims[0]) + " is not a multiple of the " +
                 std::string(tt->name) + " block size " + std::to_string(tt->block_elems));
      if (mul_overflows(n / tt->block_elems, tt->block_bytes, &t.nbytes))
        fail(src_, at, "tensor '" + t.name + "' byte size overflows");
      if (!f.tensor_index_.emplace(t.name, f.tensors_.size()).second)
        fail(src_, at, "duplicate tensor name '" + t.name + "'");
      f.tensors_.push_back(std::move(t));
    }

    // The data section starts at the next multiple of the alignment.
    const uint64_t align = f.alignment_;
    f.data_offset_ = (pos_ + align - 1) / align * align;
    if (f.data_offset_ > b_.size() && !f.tensors_.empty())
      fail(src_, pos_,
           "file ends before the tensor data section (expected it at byte " + std::to_string(f.data_offset_) + ")");
    for (auto& t : f.tensors_) {
      if (t.offset % align != 0)
        fail(src_, f.data_offset_ + t.offset,
             "tensor '" + t.name + "' data offset " + std::to_string(t.offset) +
                 " is not a multiple of the alignment " + std::to_string(align));
      // A corrupt offset can wrap the 64-bit sum: say so, rather than report
      // the wrapped (small, false) position as where the tensor would be.
      uint64_t abs, end;
      if (__builtin_add_overflow(f.data_offset_, t.offset, &abs) || __builtin_add_overflow(abs, t.nbytes, &end))
        fail(src_, f.data_offset_,
             "tensor '" + t.name + "' data offset " + std::to_string(t.offset) + " plus its size " +
                 std::to_string(t.nbytes) + " bytes (after the data section start " + std::to_string(f.data_offset_) +
                 ") overflows 64 bits: the tensor table is corrupt (a damaged or wrongly written file)");
      if (end > b_.size())
        fail_short(src_, abs,
                   "tensor '" + t.name + "' " + t.shape_string() + " " + std::string(type_name(t.type)) + " needs " +
                       std::to_string(t.nbytes) + " bytes at offset " + std::to_string(abs) + " but the file has " +
                       std::to_string(b_.size()) + " bytes (truncated download?)");
      t.offset = abs;
    }
    return f;
  }

 private:
  uint64_t remaining() const { return b_.size() - pos_; }
  // A size the file cannot hold: a file cut short when the size itself is
  // plausible (a copy in progress), else a corrupt field.
  static constexpr uint64_t kPlausibleCount = 1ull << 26;
  [[noreturn]] void short_or_corrupt(bool plausible, uint64_t at, const std::string& what) const {
    if (plausible) fail_short(src_, at, what);
    fail(src_, at, what);
  }

  // `what` and `key` describe the read for the error message, which is only
  // built on failure: the parser reads millions of array elements.
  void need(uint64_t n, const char* what, const std::string* key = nullptr) {
    if (n > remaining())
      fail_short(src_, pos_,
                 std::string("unexpected end of file reading ") + what + (key ? " '" + *key + "'" : "") + " (needs " +
                     std::to_string(n) + " bytes, " + std::to_string(remaining()) + " left)");
  }
  template <typename T>
  T read_raw(const char* what, const std::string* key = nullptr) {
    need(sizeof(T), what, key);
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  uint32_t read_u32() { return read_raw<uint32_t>("header"); }
  uint32_t read_u32_ctx(const std::string& what) { return read_raw<uint32_t>(what.c_str()); }
  uint64_t read_u64(const std::string& what) { return read_raw<uint64_t>(what.c_str()); }

  std::string read_string(const char* what, const std::string* key = nullptr) {
    const uint64_t at = pos_;
    const uint64_t len = read_raw<uint64_t>(what, key);
    if (len > kMaxStringBytes || len > remaining())
      short_or_corrupt(len <= kMaxStringBytes, at,
                       std::string(what) + (key ? " '" + *key + "'" : "") + ": string length " + std::to_string(len) +
                           " runs past the end of the file");
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), len);
    pos_ += len;
    return s;
  }
  std::string read_string(const std::string& what) { return read_string(what.c_str()); }

  Value read_value(uint32_t type, const std::string& key, int depth) {
    Value v;
    const uint64_t at = pos_;
    if (type > static_cast<uint32_t>(ValueType::FLOAT64))
      fail(src_, at - 4, "key '" + key + "' has unknown value type " + std::to_string(type));
    v.type = static_cast<ValueType>(type);
    const char* what = "the value of key";
    const std::string* k = &key;
    switch (v.type) {
      case ValueType::UINT8:
        v.u = read_raw<uint8_t>(what, k);
        v.i = static_cast<int64_t>(v.u);
        break;
      case ValueType::INT8:
        v.i = read_raw<int8_t>(what, k);
        v.u = static_cast<uint64_t>(v.i);
        break;
      case ValueType::UINT16:
        v.u = read_raw<uint16_t>(what, k);
        v.i = static_cast<int64_t>(v.u);
        break;
      case ValueType::INT16:
        v.i = read_raw<int16_t>(what, k);
        v.u = static_cast<uint64_t>(v.i);
        break;
      case ValueType::UINT32:
        v.u = read_raw<uint32_t>(what, k);
        v.i = static_cast<int64_t>(v.u);
        break;
      case ValueType::INT32:
        v.i = read_raw<int32_t>(what, k);
        v.u = static_cast<uint64_t>(v.i);
        break;
      case ValueType::UINT64:
        v.u = read_raw<uint64_t>(what, k);
        v.i = static_cast<int64_t>(v.u);
        break;
      case ValueType::INT64:
        v.i = read_raw<int64_t>(what, k);
        v.u = static_cast<uint64_t>(v.i);
        break;
      case ValueType::FLOAT32: v.f = read_raw<float>(what, k); break;
      case ValueType::FLOAT64: v.f = read_raw<double>(what, k); break;
      case ValueType::BOOL: {
        const uint8_t b = read_raw<uint8_t>(what, k);
        if (b > 1) fail(src_, at, "key '" + key + "' is a bool with value " + std::to_string(b));
        v.u = b;
        v.i = b;
        break;
      }
      case ValueType::STRING: v.s = read_string(what, k); break;
      case ValueType::ARRAY: {
        if (depth >= kMaxArrayDepth)
          fail(src_, at, "key '" + key + "' nests arrays deeper than " + std::to_string(kMaxArrayDepth));
        const uint32_t et = read_raw<uint32_t>("the element type of key", k);
        if (et > static_cast<uint32_t>(ValueType::FLOAT64))
          fail(src_, at, "key '" + key + "' is an array of unknown type " + std::to_string(et));
        v.elem_type = static_cast<ValueType>(et);
        const uint64_t n = read_raw<uint64_t>("the element count of key", k);
        // Every element takes at least one byte (a nested array at least 12), so
        // a larger count is corrupt; checking it first bounds the allocation.
        const uint64_t min_elem = et == static_cast<uint32_t>(ValueType::ARRAY)    ? 12
                                  : et == static_cast<uint32_t>(ValueType::STRING) ? 8
                                                                                   : 1;
        if (n > remaining() / min_elem)
          short_or_corrupt(n <= kPlausibleCount, at,
                           "key '" + key + "' claims " + std::to_string(n) + " elements, more than the file can hold");
        v.arr.reserve(n);
        for (uint64_t i = 0; i < n; ++i) v.arr.push_back(read_value(et, key, depth + 1));
        break;
      }
    }
    return v;
  }

  std::span<const uint8_t> b_;
  std::string src_;
  uint64_t pos_ = 0;
};

const char* value_type_name(ValueType t) {
  static const char* names[] = {"uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
                                "bool",  "string", "array",  "uint64", "int64",  "float64"};
  const auto i = static_cast<uint32_t>(t);
  return i < 13 ? names[i] : "unknown";
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::UINT16:
    case ValueType::INT16:
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::BOOL: return true;
    default: return false;
  }
}

uint64_t TensorInfo::n_elements() const {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  return n;
}

std::string TensorInfo::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

GgufFile GgufFile::parse(std::span<const uint8_t> bytes, std::string source_name) {
  return Parser(bytes, std::move(source_name)).run();
}

std::shared_ptr<GgufFile> GgufFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    throw Error(e == ENOENT ? ErrorKind::invalid_input : ErrorKind::io,
                path + ": cannot open model file: " + std::strerror(e));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorKind::invalid_input, path + ": not a regular file");
  }
  const size_t len = static_cast<size_t>(st.st_size);
  if (len == 0) {
    ::close(fd);
    throw IncompleteFileError(path + ": invalid GGUF at byte offset 0: the file is empty");
  }
  void* map = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
  const int e = errno;
  ::close(fd);
  if (map == MAP_FAILED) throw Error(ErrorKind::io, path + ": cannot map model file: " + std::strerror(e));
  try {
    auto f = std::make_shared<GgufFile>(parse({static_cast<const uint8_t*>(map), len}, path));
    f->map_ = map;
    f->map_len_ = len;
    guard_mapping(map, len, path);  // a later truncation of the file: a finding, not a dead process
    f->device_ = static_cast<uint64_t>(st.st_dev);
    return f;
  } catch (...) {
    munmap(map, len);
    throw;
  }
}

GgufFile::GgufFile(GgufFile&& o) noexcept { *this = std::move(o); }

GgufFile& GgufFile::operator=(GgufFile&& o) noexcept {
  if (this == &o) return *this;
  if (map_) {
    unguard_mapping(map_);
    munmap(map_, map_len_);
  }
  version_ = o.version_;
  alignment_ = o.alignment_;
  data_offset_ = o.data_offset_;
  file_size_ = o.file_size_;
  device_ = o.device_;
  path_ = std::move(o.path_);
  kv_ = std::move(o.kv_);
  tensors_ = std::move(o.tensors_);
  tensor_index_ = std::move(o.tensor_index_);
  base_ = o.base_;
  map_ = o.map_;
  map_len_ = o.map_len_;
  o.map_ = nullptr;
  o.map_len_ = 0;
  o.base_ = nullptr;
  return *this;
}

GgufFile::~GgufFile() {
  if (map_) {
    unguard_mapping(map_);
    munmap(map_, map_len_);
  }
}

bool GgufFile::advise_random() const { return !map_ || madvise(map_, map_len_, MADV_RANDOM) == 0; }

void GgufFile::copy_out(const TensorInfo& t, void* dst) const {
  const uint8_t* src = tensor_data(t);
  if (!map_) {
    std::memcpy(dst, src, t.nbytes);
    return;
  }
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(src), end = begin + t.nbytes;
  const uintptr_t first = begin / page * page, inner = (begin + page - 1) / page * page, last = end / page * page;
  // Advice only: a refusal costs speed (page-sized faults) or RSS, never bytes.
  (void)madvise(reinterpret_cast<void*>(first), end - first, MADV_WILLNEED);
  std::memcpy(dst, src, t.nbytes);
  if (last > inner) (void)madvise(reinterpret_cast<void*>(inner), last - inner, MADV_DONTNEED);
}

const Value* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

const TensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
[[noreturn]] void key_error(const std::string& path, const std::string& key, const std::string& what) {
  throw Error(ErrorKind::bad_model, path + ": metadata key '" + key + "' " + what);
}
}  // namespace

std::string GgufFile::get_string(const std::string& key) const {
  const Value* v = find(key);
  if (!v) key_error(path_, key, "is missing");
  if (v->type != ValueType::STRING)
    key_error(path_, key, std::string("should be a string but is ") + value_type_name(v->type));
  return v->s;
}

std::string GgufFile::get_string_or(const std::string& key, const std::string& def) const {
  return has(key) ? get_string(key) : def;
}

uint64_t GgufFile::get_u64(const std::string& key) const {
  const Value* v = find(key);
  if (!v) key_error(path_, key, "is missing");
  if (!v->is_integer()) key_error(path_, key, std::string("should be an integer but is ") + value_type_name(v->type));
  const bool is_signed = v->type == ValueType::INT8 || v->type == ValueType::INT16 || v->type == ValueType::INT32 ||
                         v->type == ValueType::INT64;
  if (is_signed && v->i < 0) key_error(path_, key, "is negative (" + std::to_string(v->i) + ")");
  return v->u;
}

uint64_t GgufFile::get_u64_or(const std::string& key, uint64_t def) const { return has(key) ? get_u64(key) : def; }

int64_t GgufFile::get_i64_or(const std::string& key, int64_t def) const {
  const Value* v = find(key);
  if (!v) return def;
  if (!v->is_integer()) key_error(path_, key, std::string("should be an integer but is ") + value_type_name(v->type));
  return v->i;
}

double GgufFile::get_f64(const std::string& key) const {
  const Value* v = find(key);
  if (!v) key_error(path_, key, "is missing");
  if (v->is_float()) return v->f;
  if (v->is_integer()) return static_cast<double>(v->i);
  key_error(path_, key, std::string("should be a number but is ") + value_type_name(v->type));
}

double GgufFile::get_f64_or(const std::string& key, double def) const { return has(key) ? get_f64(key) : def; }

bool GgufFile::get_bool_or(const std::string& key, bool def) const {
  const Value* v = find(key);
  if (!v) return def;
  if (!v->is_integer()) key_error(path_, key, std::string("should be a bool but is ") + value_type_name(v->type));
  return v->u != 0;
}

namespace {
const Value& array_of(const GgufFile& f, const std::string& key) {
  const Value* v = f.find(key);
  if (!v) key_error(f.path(), key, "is missing");
  if (v->type != ValueType::ARRAY)
    key_error(f.path(), key, std::string("should be an array but is ") + value_type_name(v->type));
  return *v;
}

// Each element of array `v` through element(), which calls key_error() for
// one it cannot take.
template <class T, class Element>
std::vector<T> array_elements(const Value& v, Element element) {
  std::vector<T> out;
  out.reserve(v.arr.size());
  for (const auto& e : v.arr) out.push_back(element(e));
  return out;
}
}  // namespace

std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  const Value& v = array_of(*this, key);
  if (v.elem_type != ValueType::STRING)
    key_error(path_, key, std::string("should be an array of strings but holds ") + value_type_name(v.elem_type));
  return array_elements<std::string>(v, [](const Value& e) { return e.s; });
}

std::vector<float> GgufFile::get_f32_array(const std::string& key) const {
  const Value& v = array_of(*this, key);
  return array_elements<float>(v, [&](const Value& e) {
    if (e.is_float()) return static_cast<float>(e.f);
    if (e.is_integer()) return static_cast<float>(e.i);
    key_error(path_, key, std::string("should be a numeric array but holds ") + value_type_name(v.elem_type));
  });
}

std::vector<int32_t> GgufFile::get_i32_array(const std::string& key) const {
  const Value& v = array_of(*this, key);
  return array_elements<int32_t>(v, [&](const Value& e) {
    if (!e.is_integer())
      key_error(path_, key, std::string("should be an integer array but holds ") + value_type_name(v.elem_type));
    if (e.i < std::numeric_limits<int32_t>::min() || e.i > std::numeric_limits<int32_t>::max())
      key_error(path_, key, "holds " + std::to_string(e.i) + ", outside the int32 range");
    return static_cast<int32_t>(e.i);
  });
}

}  // namespace ns::gguf
