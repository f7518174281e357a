#include "engine/gguf/gguf_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "common/error.h"

namespace ns::gguf {

namespace val {
namespace {
// Integers fill both u and i, as the reader does, so either accessor works
// (a negative value's u is its two's complement, as the reader's).
template <class Int>
Value integer_value(ValueType t, Int v) {
  Value x;
  x.type = t;
  x.u = static_cast<uint64_t>(v);
  x.i = static_cast<int64_t>(v);
  return x;
}
}  // namespace

Value u8(uint8_t v) { return integer_value(ValueType::UINT8, v); }
Value i8(int8_t v) { return integer_value(ValueType::INT8, v); }
Value u16(uint16_t v) { return integer_value(ValueType::UINT16, v); }
Value i16(int16_t v) { return integer_value(ValueType::INT16, v); }
Value u32(uint32_t v) { return integer_value(ValueType::UINT32, v); }
Value i32(int32_t v) { return integer_value(ValueType::INT32, v); }
Value u64(uint64_t v) { return integer_value(ValueType::UINT64, v); }
Value i64(int64_t v) { return integer_value(ValueType::INT64, v); }
Value boolean(bool v) { return integer_value(ValueType::BOOL, v ? 1u : 0u); }

Value f32(float v) {
  Value x;
  x.type = ValueType::FLOAT32;
  x.f = v;
  return x;
}

Value f64(double v) {
  Value x;
  x.type = ValueType::FLOAT64;
  x.f = v;
  return x;
}

Value str(std::string v) {
  Value x;
  x.type = ValueType::STRING;
  x.s = std::move(v);
  return x;
}

Value array(ValueType elem, std::vector<Value> elems) {
  Value x;
  x.type = ValueType::ARRAY;
  x.elem_type = elem;
  x.arr = std::move(elems);
  return x;
}

Value string_array(const std::vector<std::string>& v) {
  std::vector<Value> elems;
  elems.reserve(v.size());
  for (const auto& s : v) elems.push_back(str(s));
  return array(ValueType::STRING, std::move(elems));
}

Value f32_array(const std::vector<float>& v) {
  std::vector<Value> elems;
  elems.reserve(v.size());
  for (float f : v) elems.push_back(f32(f));
  return array(ValueType::FLOAT32, std::move(elems));
}

Value i32_array(const std::vector<int32_t>& v) {
  std::vector<Value> elems;
  elems.reserve(v.size());
  for (int32_t i : v) elems.push_back(i32(i));
  return array(ValueType::INT32, std::move(elems));
}
}  // namespace val

namespace {

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }
uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

bool known_value_type(ValueType t) { return static_cast<uint32_t>(t) <= static_cast<uint32_t>(ValueType::FLOAT64); }

// Throws naming `key` if `v` cannot be written faithfully.
void check_value(const std::string& key, const Value& v) {
  auto bad = [&](const std::string& why) {
    throw Error(ErrorKind::invalid_input, "GGUF metadata '" + key + "': " + why);
  };
  auto unsigned_max = [&](uint64_t max) {
    if (v.u > max) bad(std::string(value_type_name(v.type)) + " value " + std::to_string(v.u) + " is out of range");
  };
  auto signed_range = [&](int64_t lo, int64_t hi) {
    if (v.i < lo || v.i > hi)
      bad(std::string(value_type_name(v.type)) + " value " + std::to_string(v.i) + " is out of range");
  };
  switch (v.type) {
    case ValueType::UINT8: unsigned_max(std::numeric_limits<uint8_t>::max()); break;
    case ValueType::UINT16: unsigned_max(std::numeric_limits<uint16_t>::max()); break;
    case ValueType::UINT32: unsigned_max(std::numeric_limits<uint32_t>::max()); break;
    case ValueType::BOOL: unsigned_max(1); break;
    case ValueType::INT8: signed_range(INT8_MIN, INT8_MAX); break;
    case ValueType::INT16: signed_range(INT16_MIN, INT16_MAX); break;
    case ValueType::INT32: signed_range(INT32_MIN, INT32_MAX); break;
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::FLOAT32:
    case ValueType::FLOAT64:
    case ValueType::STRING: break;
    case ValueType::ARRAY:
      if (!known_value_type(v.elem_type))
        bad("array element type id " + std::to_string(static_cast<uint32_t>(v.elem_type)) + " is unknown");
      for (size_t k = 0; k < v.arr.size(); ++k) {
        if (v.arr[k].type != v.elem_type)
          bad("array element " + std::to_string(k) + " is " + value_type_name(v.arr[k].type) + ", the array holds " +
              value_type_name(v.elem_type));
        check_value(key + "[" + std::to_string(k) + "]", v.arr[k]);
      }
      break;
    default: bad("value type id " + std::to_string(static_cast<uint32_t>(v.type)) + " is unknown");
  }
}

// Little-endian serialization into a byte vector (GGUF is little-endian; so is x86-64).
struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  void raw(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
  }
  void str(const std::string& s) {
    raw<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
  // The value's payload, without its type id (arrays carry their element type).
  void payload(const Value& v) {
    switch (v.type) {
      case ValueType::UINT8: raw(static_cast<uint8_t>(v.u)); break;
      case ValueType::INT8: raw(static_cast<int8_t>(v.i)); break;
      case ValueType::UINT16: raw(static_cast<uint16_t>(v.u)); break;
      case ValueType::INT16: raw(static_cast<int16_t>(v.i)); break;
      case ValueType::UINT32: raw(static_cast<uint32_t>(v.u)); break;
      case ValueType::INT32: raw(static_cast<int32_t>(v.i)); break;
      case ValueType::FLOAT32: raw(static_cast<float>(v.f)); break;
      case ValueType::BOOL: raw(static_cast<uint8_t>(v.u ? 1 : 0)); break;
      case ValueType::STRING: str(v.s); break;
      case ValueType::ARRAY:
        raw(static_cast<uint32_t>(v.elem_type));
        raw<uint64_t>(v.arr.size());
        for (const Value& e : v.arr) payload(e);
        break;
      case ValueType::UINT64: raw(v.u); break;
      case ValueType::INT64: raw(v.i); break;
      case ValueType::FLOAT64: raw(v.f); break;
    }
  }
};

std::string dims_string(const std::vector<uint64_t>& dims) {
  std::string s = "[";
  for (size_t k = 0; k < dims.size(); ++k) s += (k ? ", " : "") + std::to_string(dims[k]);
  return s + "]";
}

}  // namespace

GgufWriter::GgufWriter(size_t buffer_bytes) : buf_capacity_(buffer_bytes < 4096 ? 4096 : buffer_bytes) {}

GgufWriter::~GgufWriter() {
  if (fd_ >= 0) abandon();
}

void GgufWriter::require_not_open(const char* what) const {
  if (fd_ >= 0 || !path_.empty())
    throw Error(ErrorKind::internal, std::string("GgufWriter: ") + what + " after open(); declare everything first");
}

void GgufWriter::require_open(const char* what) const {
  if (fd_ < 0)
    throw Error(ErrorKind::internal, std::string("GgufWriter: ") + what + " needs an open output; call open() first");
}

void GgufWriter::set(const std::string& key, Value value) {
  require_not_open("set()");
  if (key.empty()) throw Error(ErrorKind::invalid_input, "GGUF metadata keys must not be empty");
  check_value(key, value);
  if (key == "general.alignment") {
    if (value.type != ValueType::UINT32 || !is_power_of_two(value.u) || value.u > 65536)
      throw Error(ErrorKind::invalid_input,
                  "GGUF metadata 'general.alignment' must be a UINT32 power of two up to 65536, e.g. 32");
    alignment_ = static_cast<uint32_t>(value.u);
    // Relative offsets depend on the alignment: recompute them.
    data_end_ = 0;
    for (auto& t : tensors_) {
      t.rel_offset = data_end_;
      data_end_ += align_up(t.nbytes, alignment_);
    }
  }
  header_bytes_cache_.reset();
  if (auto it = kv_index_.find(key); it != kv_index_.end()) {
    kv_[it->second].value = std::move(value);
    return;
  }
  kv_index_.emplace(key, kv_.size());
  kv_.push_back({key, std::move(value)});
}

const Value* GgufWriter::find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].value;
}

size_t GgufWriter::add_tensor(const std::string& name, std::vector<uint64_t> dims, GgmlType type) {
  require_not_open("add_tensor()");
  auto bad = [&](const std::string& why) {
    throw Error(ErrorKind::invalid_input, "GGUF tensor '" + name + "' " + dims_string(dims) + ": " + why);
  };
  if (name.empty() || name.size() > kMaxNameBytes)
    bad("names must be 1.." + std::to_string(kMaxNameBytes) + " bytes long");
  if (tensor_index_.count(name)) bad("declared twice");
  const auto tt = type_traits(static_cast<uint32_t>(type));
  if (!tt) bad("unknown type id " + std::to_string(static_cast<uint32_t>(type)));
  if (dims.empty() || dims.size() > kMaxDims) bad("must have 1.." + std::to_string(kMaxDims) + " dimensions");
  uint64_t n = 1;
  for (uint64_t d : dims) {
    if (d == 0) bad("dimensions must be positive");
    if (n > (uint64_t{1} << 62) / d) bad("too many elements");
    n *= d;
  }
  if (dims[0] % tt->block_elems != 0)
    bad("rows of " + std::to_string(dims[0]) + " elements are not a multiple of " + std::string(tt->name) +
        "'s block of " + std::to_string(tt->block_elems) + "; use another type for this tensor");
  const uint64_t nbytes = row_bytes(*tt, dims[0]) * (n / dims[0]);
  tensor_index_.emplace(name, tensors_.size());
  tensors_.push_back({name, std::move(dims), type, nbytes, data_end_});
  data_end_ += align_up(nbytes, alignment_);
  header_bytes_cache_.reset();
  return tensors_.size() - 1;
}

TensorInfo GgufWriter::tensor(size_t index) const {
  const Declared& d = tensors_.at(index);
  TensorInfo t;
  t.name = d.name;
  t.dims = d.dims;
  t.type = d.type;
  t.offset = data_offset() + d.rel_offset;
  t.nbytes = d.nbytes;
  return t;
}

std::vector<uint8_t> GgufWriter::serialize_header() const {
  Bytes out;
  out.raw<uint32_t>(0x46554747);  // "GGUF"
  out.raw<uint32_t>(kVersion);
  out.raw<uint64_t>(tensors_.size());
  out.raw<uint64_t>(kv_.size());
  for (const Entry& e : kv_) {
    out.str(e.key);
    out.raw(static_cast<uint32_t>(e.value.type));
    out.payload(e.value);
  }
  for (const Declared& t : tensors_) {
    out.str(t.name);
    out.raw(static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) out.raw(d);
    out.raw(static_cast<uint32_t>(t.type));
    out.raw(t.rel_offset);
  }
  return std::move(out.b);
}

uint64_t GgufWriter::header_bytes() const {
  if (!header_bytes_cache_) header_bytes_cache_ = serialize_header().size();
  return *header_bytes_cache_;
}

uint64_t GgufWriter::data_offset() const { return align_up(header_bytes(), alignment_); }

uint64_t GgufWriter::data_bytes() const { return data_end_; }

void GgufWriter::open(const std::string& path) {
  require_not_open("open()");
  if (path.empty()) throw Error(ErrorKind::invalid_input, "GGUF output path is empty");
  const std::vector<uint8_t> header = serialize_header();
  header_bytes_cache_ = header.size();
  path_ = path;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int err = errno;
    throw Error(ErrorKind::io, "cannot create GGUF file '" + path + "': " + std::strerror(err) +
                                   "; check that the directory exists and is writable");
  }
  struct stat st {};
  regular_file_ = ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
  buf_.reserve(buf_capacity_);
  file_pos_ = 0;
  cur_ = 0;
  cur_written_ = 0;
  put(header.data(), header.size());
  put_zeros(data_offset() - header.size());
}

std::optional<size_t> GgufWriter::current_tensor() const {
  if (cur_ >= tensors_.size()) return std::nullopt;
  return cur_;
}

void GgufWriter::write_data(std::span<const uint8_t> bytes) {
  require_open("write_data()");
  size_t done = 0;
  while (done < bytes.size()) {
    if (cur_ >= tensors_.size())
      throw Error(ErrorKind::invalid_input, "GGUF file '" + path_ + "': all " + std::to_string(tensors_.size()) +
                                                " tensors are complete, " + std::to_string(bytes.size() - done) +
                                                " bytes too many were written");
    const Declared& t = tensors_[cur_];
    const uint64_t take = std::min<uint64_t>(bytes.size() - done, t.nbytes - cur_written_);
    put(bytes.data() + done, take);
    done += take;
    cur_written_ += take;
    finish_current_tensor_if_full();
  }
}

void GgufWriter::write_tensor(const std::string& name, std::span<const uint8_t> bytes) {
  require_open("write_tensor()");
  if (cur_ >= tensors_.size())
    throw Error(ErrorKind::invalid_input, "GGUF tensor '" + name + "': every declared tensor is already written");
  const Declared& t = tensors_[cur_];
  if (t.name != name || cur_written_ != 0)
    throw Error(ErrorKind::invalid_input, "GGUF tensor '" + name +
                                              "' written out of order: the next data belongs to '" + t.name +
                                              "' (tensors are written in declaration order)");
  if (bytes.size() != t.nbytes)
    throw Error(ErrorKind::invalid_input, "GGUF tensor '" + name + "' " + dims_string(t.dims) + " " +
                                              std::string(type_name(t.type)) + " holds " + std::to_string(t.nbytes) +
                                              " bytes, got " + std::to_string(bytes.size()));
  write_data(bytes);
}

void GgufWriter::finish_current_tensor_if_full() {
  const Declared& t = tensors_[cur_];
  if (cur_written_ < t.nbytes) return;
  put_zeros(align_up(t.nbytes, alignment_) - t.nbytes);
  ++cur_;
  cur_written_ = 0;
}

void GgufWriter::close() {
  require_open("close()");
  if (cur_ < tensors_.size()) {
    const Declared& t = tensors_[cur_];
    throw Error(ErrorKind::invalid_input, "GGUF file '" + path_ + "' is incomplete: tensor '" + t.name + "' has " +
                                              std::to_string(cur_written_) + " of " + std::to_string(t.nbytes) +
                                              " bytes, " + std::to_string(tensors_.size() - cur_ - 1) +
                                              " tensors after it have none");
  }
  flush_buffer();
  if (file_pos_ != file_size())
    throw Error(ErrorKind::internal, "GgufWriter: wrote " + std::to_string(file_pos_) + " bytes, the layout says " +
                                         std::to_string(file_size()));
  // ENOSPC can surface only at writeback on some filesystems: sync to report it here.
  if (regular_file_ && ::fdatasync(fd_) != 0) fail_io("syncing", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    if (regular_file_) ::unlink(path_.c_str());
    throw Error(ErrorKind::io, "closing GGUF file '" + path_ + "' failed: " + std::strerror(err));
  }
}

void GgufWriter::close_without_data() {
  require_open("close_without_data()");
  if (cur_ != 0 || cur_written_ != 0)
    throw Error(ErrorKind::internal, "GgufWriter: close_without_data() after tensor data was written");
  flush_buffer();
  if (!regular_file_)
    throw Error(ErrorKind::invalid_input, "'" + path_ + "' is not a regular file: it cannot be sparse");
  if (::ftruncate(fd_, static_cast<off_t>(file_size())) != 0) fail_io("extending", errno);
  file_pos_ = file_size();
  cur_ = tensors_.size();
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(path_.c_str());
    throw Error(ErrorKind::io, "closing GGUF file '" + path_ + "' failed: " + std::strerror(err));
  }
}

void GgufWriter::put(const uint8_t* p, size_t n) {
  if (n == 0) return;
  if (buf_.size() + n > buf_capacity_) flush_buffer();
  if (n >= buf_capacity_) {
    write_fully(p, n);  // large chunks skip the copy
  } else {
    buf_.insert(buf_.end(), p, p + n);
  }
  file_pos_ += n;
}

void GgufWriter::put_zeros(uint64_t n) {
  static constexpr uint8_t kZeros[256] = {};
  while (n > 0) {
    const size_t take = static_cast<size_t>(std::min<uint64_t>(n, sizeof kZeros));
    put(kZeros, take);
    n -= take;
  }
}

void GgufWriter::flush_buffer() {
  if (buf_.empty()) return;
  write_fully(buf_.data(), buf_.size());
  buf_.clear();
}

void GgufWriter::write_fully(const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail_io("writing", errno);
    }
    if (w == 0) fail_io("writing (the device accepted 0 bytes)", EIO);
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void GgufWriter::fail_io(const std::string& doing, int err) {
  // The offset of the failure: what reached the file so far (buffered bytes were not written).
  const off_t at = ::lseek(fd_, 0, SEEK_CUR);
  abandon();
  std::string msg = doing + " GGUF file '" + path_ + "' failed";
  if (at >= 0) msg += " at byte " + std::to_string(at);
  msg += ": " + std::string(std::strerror(err));
  if (err == ENOSPC || err == EDQUOT) msg += "; free disk space or write to another filesystem";
  throw Error(ErrorKind::io, msg);
}

void GgufWriter::abandon() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (regular_file_) ::unlink(path_.c_str());
  regular_file_ = false;
  buf_.clear();
}

}  // namespace ns::gguf
