// The reader against real files: bytes equal pread's at any offset and length,
// many reads in flight, errors surfaced as ns::Error(io), both engines alike.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/stream/buffer_pool.h"
#include "engine/stream/reader.h"
#include "tests/unit/stream/stream_test_util.h"
#include "tests/unit/error_message.h"

using namespace ns::stream;
using stream_test::aligned_buffer;
using stream_test::AlignedBuffer;

namespace {

const IoMode kModes[] = {IoMode::uring, IoMode::pread};

std::unique_ptr<Reader> open_reader(const std::string& path, IoMode mode, uint32_t depth = 8,
                                    uint64_t chunk = 64 << 10) {
  ReaderOptions o{.mode = mode, .queue_depth = depth, .max_chunk_bytes = chunk};
  return make_reader({path}, o);
}

struct Request {
  uint64_t offset, length;
};

// Reads every request through one op each, all in flight together, and checks the bytes.
void check_requests(Reader& r, const std::string& path, const std::vector<Request>& reqs) {
  std::vector<AlignedBuffer> bufs;
  std::vector<ReadOp> ops(reqs.size());
  std::vector<ReadOp*> ptrs;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const uint64_t cap = direct_read_span(reqs[i].offset, reqs[i].length);
    bufs.push_back(aligned_buffer(cap));
    ops[i].prepare(0, reqs[i].offset, reqs[i].length, bufs.back().get(), cap);
    ptrs.push_back(&ops[i]);
  }
  r.submit(ptrs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    CAPTURE(reqs[i].offset);
    CAPTURE(reqs[i].length);
    r.wait(ops[i]);
    const std::vector<uint8_t> want = stream_test::pread_bytes(path, reqs[i].offset, reqs[i].length);
    REQUIRE(want.size() == reqs[i].length);
    CHECK(std::memcmp(ops[i].data(), want.data(), want.size()) == 0);
  }
}

}  // namespace

TEST_CASE("io_uring is available here (the tests below then exercise it, not the fallback)") {
  const UringProbe p = probe_uring();
  if (!p.available) MESSAGE("io_uring unavailable: " << p.reason << "; the uring cases run the pread fallback");
  CHECK((p.available || !p.reason.empty()));
}

TEST_CASE("reads at odd offsets and lengths equal pread of the same bytes, in both modes") {
  stream_test::ScratchDir dir;
  const std::string path = dir.file("pattern.bin");
  const uint64_t size = (3u << 20) + 777;  // not a block multiple: the last block is partial
  stream_test::write_pattern_file(path, size, 1);

  std::vector<Request> reqs = {
      {0, 1},
      {1, 1},
      {4095, 2},
      {4096, 4096},
      {31, 100000},
      {65536 - 7, 14},
      {0, 64 << 10},
      {12345, 1 << 20},
      {size - 1, 1},
      {size - 5000, 5000},
      {size - 777, 777},
      {0, size},
      {(1 << 20) + 3, (2 << 20) - 4},
  };
  std::mt19937_64 rng(42);
  for (int i = 0; i < 40; ++i) {
    const uint64_t off = rng() % size;
    reqs.push_back({off, 1 + rng() % std::min<uint64_t>(size - off, 300000)});
  }
  for (IoMode mode : kModes) {
    const std::string mode_name = io_mode_name(mode);
    CAPTURE(mode_name);
    auto r = open_reader(path, mode);
    CHECK(r->file_size(0) == size);
    if (!r->direct(0)) MESSAGE("O_DIRECT refused in " << NS_BINARY_DIR << ": reads go through the page cache");
    check_requests(*r, path, reqs);
    const ReaderStats s = r->stats();
    CHECK(s.reads == reqs.size());
    CHECK(s.failed == 0);
    CHECK(s.chunks > reqs.size());  // 64 KiB chunks split the large reads
    CHECK(s.busy_ns > 0);
  }
}

TEST_CASE("hundreds of reads at a small queue depth all complete, in any order of waiting") {
  stream_test::ScratchDir dir;
  const std::string path = dir.file("pattern.bin");
  const uint64_t size = 8u << 20;
  stream_test::write_pattern_file(path, size, 2);
  std::mt19937_64 rng(7);
  for (IoMode mode : kModes) {
    const std::string mode_name = io_mode_name(mode);
    CAPTURE(mode_name);
    auto r = open_reader(path, mode, 4, 16 << 10);
    const size_t n = 300;
    std::vector<Request> reqs;
    std::vector<AlignedBuffer> bufs;
    std::vector<ReadOp> ops(n);
    std::vector<ReadOp*> pending;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t off = rng() % (size - 70000), len = 1 + rng() % 70000;
      reqs.push_back({off, len});
      bufs.push_back(aligned_buffer(direct_read_span(off, len)));
      ops[i].prepare(0, off, len, bufs.back().get(), direct_read_span(off, len));
      pending.push_back(&ops[i]);
    }
    r->submit(pending);
    // Consume completions as they come (wait_any), checking each op's bytes.
    size_t checked = 0;
    while (!pending.empty()) {
      const size_t k = r->wait_any(pending);
      ReadOp* op = pending[k];
      REQUIRE(op->ok());
      const std::vector<uint8_t> want = stream_test::pread_bytes(path, op->offset(), op->length());
      CHECK(std::memcmp(op->data(), want.data(), want.size()) == 0);
      pending.erase(pending.begin() + static_cast<long>(k));
      ++checked;
    }
    CHECK(checked == n);
    CHECK(r->stats().reads == n);
  }
}

TEST_CASE("the pread fallback returns the same bytes as io_uring") {
  stream_test::ScratchDir dir;
  const std::string path = dir.file("pattern.bin");
  const uint64_t size = (2u << 20) + 4097;
  stream_test::write_pattern_file(path, size, 3);
  auto u = open_reader(path, IoMode::uring);
  auto p = open_reader(path, IoMode::pread);
  std::mt19937_64 rng(9);
  for (int i = 0; i < 30; ++i) {
    const uint64_t off = rng() % size, len = 1 + rng() % (size - off);
    const uint64_t cap = direct_read_span(off, len);
    AlignedBuffer a = aligned_buffer(cap), b = aligned_buffer(cap);
    ReadOp oa, ob;
    oa.prepare(0, off, len, a.get(), cap);
    ob.prepare(0, off, len, b.get(), cap);
    u->submit(oa);
    p->submit(ob);
    u->wait(oa);
    p->wait(ob);
    CHECK(std::memcmp(oa.data(), ob.data(), len) == 0);
  }
}

TEST_CASE("a read past the end of the file fails with an io error naming the file and offset") {
  stream_test::ScratchDir dir;
  const std::string path = dir.file("short.bin");
  stream_test::write_pattern_file(path, 10000, 4);
  for (IoMode mode : kModes) {
    const std::string mode_name = io_mode_name(mode);
    CAPTURE(mode_name);
    auto r = open_reader(path, mode);
    AlignedBuffer buf = aligned_buffer(direct_read_span(9000, 2000));
    ReadOp op;
    op.prepare(0, 9000, 2000, buf.get(), direct_read_span(9000, 2000));
    r->submit(op);
    const std::string msg = ns::test::expect_error(
        ns::ErrorKind::io, [&] { r->wait(op); }, "a read past the end succeeded");
    CHECK(ns::test::contains(msg, path));
    CHECK(ns::test::contains(msg, "offset 9000"));
    CHECK(ns::test::contains(msg, "ends at byte 10000"));
    CHECK(r->stats().failed == 1);
    // The reader carries on after a failure.
    ReadOp ok;
    ok.prepare(0, 100, 200, buf.get(), direct_read_span(100, 200));
    r->submit(ok);
    r->wait(ok);
    CHECK(std::memcmp(ok.data(), stream_test::pread_bytes(path, 100, 200).data(), 200) == 0);
  }
}

TEST_CASE("a file truncated after open: short reads end in an io error at the new end") {
  stream_test::ScratchDir dir;
  for (IoMode mode : kModes) {
    const std::string mode_name = io_mode_name(mode);
    CAPTURE(mode_name);
    const std::string path = dir.file(std::string("trunc-") + io_mode_name(mode) + ".bin");
    stream_test::write_pattern_file(path, 4u << 20, 5);
    auto r = open_reader(path, mode);
    const uint64_t new_size = (1u << 20) + 100;  // mid-block: the direct read comes back short and unaligned
    REQUIRE(::truncate(path.c_str(), static_cast<off_t>(new_size)) == 0);

    const uint64_t off = 1u << 20, len = 8192;
    AlignedBuffer buf = aligned_buffer(direct_read_span(off, len));
    ReadOp op;
    op.prepare(0, off, len, buf.get(), direct_read_span(off, len));
    r->submit(op);  // the size known at open still allows it: the failure comes from the disk
    r->wait_finished(op);
    REQUIRE(op.state() == ReadOp::State::failed);
    CHECK(op.error_code() == 0);
    CHECK(op.error_offset() == new_size);
    const std::string msg = r->error_of(op).what();
    CHECK(msg.find(path) != std::string::npos);
    CHECK(msg.find("ends at byte " + std::to_string(new_size)) != std::string::npos);
    CHECK(r->stats().short_reads >= 1);

    // Wholly past the new end: the first read returns 0.
    ReadOp gone;
    gone.prepare(0, 2u << 20, 4096, buf.get(), direct_read_span(2u << 20, 4096));
    r->submit(gone);
    CHECK_THROWS_AS(r->wait(gone), ns::Error);
  }
}

TEST_CASE("an errno from the kernel becomes an io error with its text") {
  // Reading a directory fails with EISDIR from read(2) and io_uring alike: a real kernel error path.
  stream_test::ScratchDir dir;
  const std::string sub = dir.file("a-directory");
  REQUIRE(::mkdir(sub.c_str(), 0755) == 0);
  for (IoMode mode : kModes) {
    const std::string mode_name = io_mode_name(mode);
    CAPTURE(mode_name);
    auto r = open_reader(sub, mode);
    AlignedBuffer buf = aligned_buffer(4096);
    ReadOp op;
    op.prepare(0, 0, 100, buf.get(), 4096);
    r->submit(op);
    const std::string msg = ns::test::expect_error(
        ns::ErrorKind::io, [&] { r->wait(op); }, "reading a directory succeeded");
    CHECK(ns::test::contains(msg, std::strerror(EISDIR)));
    CHECK(ns::test::contains(msg, sub));
    CHECK(op.error_code() == EISDIR);
  }
}

TEST_CASE("a missing file is an io error naming it") {
  const std::string msg = ns::test::expect_error(
      ns::ErrorKind::io, [] { open_reader("/nonexistent/model.gguf", IoMode::uring); }, "opened a missing file");
  CHECK(ns::test::contains(msg, "/nonexistent/model.gguf"));
}

TEST_CASE("misuse is refused: unaligned or small buffers, an op queued twice") {
  stream_test::ScratchDir dir;
  const std::string path = dir.file("p.bin");
  stream_test::write_pattern_file(path, 1 << 20, 6);
  auto r = open_reader(path, IoMode::uring, 1);
  AlignedBuffer buf = aligned_buffer(3 * 4096);
  ReadOp op;
  op.prepare(0, 10, 100, buf.get() + 8, 8192);
  CHECK_THROWS_AS(r->submit(op), ns::Error);
  op.prepare(0, 4000, 200, buf.get(), 4096);  // spans two blocks: needs 8192
  CHECK_THROWS_AS(r->submit(op), ns::Error);
  op.prepare(1, 0, 10, buf.get(), 4096);  // no file 1
  CHECK_THROWS_AS(r->submit(op), ns::Error);

  // A zero-length read finishes at once.
  ReadOp empty;
  empty.prepare(0, 5, 0, buf.get(), 4096);
  r->submit(empty);
  CHECK(empty.ok());

  // Queue depth 1 and a large read: the second submit of the same op finds it queued.
  ReadOp big;
  std::vector<ReadOp> fillers(20);
  std::vector<AlignedBuffer> fbufs;
  for (ReadOp& f : fillers) {
    fbufs.push_back(aligned_buffer(1 << 20));
    f.prepare(0, 0, 1 << 20, fbufs.back().get(), 1 << 20);
    r->submit(f);
  }
  big.prepare(0, 0, 4096, buf.get(), 4096);
  r->submit(big);
  if (!big.finished()) CHECK_THROWS_AS(r->submit(big), ns::Error);
  r->wait(big);
  for (ReadOp& f : fillers) r->wait(f);
}

TEST_CASE("reads into registered buffers give the same bytes") {
  stream_test::ScratchDir dir;
  const std::string path = dir.file("p.bin");
  const uint64_t size = 3u << 20;
  stream_test::write_pattern_file(path, size, 8);
  BufferPool pool(4, 300000);
  for (IoMode mode : kModes) {
    const std::string mode_name = io_mode_name(mode);
    CAPTURE(mode_name);
    auto r = open_reader(path, mode);
    const bool registered = r->register_buffers(pool.iovecs());
    if (mode == IoMode::uring && !registered) MESSAGE("io_uring refused the buffers (RLIMIT_MEMLOCK?)");
    CHECK(registered == r->buffers_registered());
    ReadOp ops[4];
    for (uint32_t s = 0; s < 4; ++s) {
      const uint64_t off = 1000 + s * 700001ull, len = 250000;
      ops[s].prepare(0, off, len, pool.slot(s), pool.slot_bytes(), pool.buffer_index(s));
      r->submit(ops[s]);
    }
    for (uint32_t s = 0; s < 4; ++s) {
      r->wait(ops[s]);
      CHECK(std::memcmp(ops[s].data(), stream_test::pread_bytes(path, ops[s].offset(), ops[s].length()).data(),
                        ops[s].length()) == 0);
    }
  }
}

TEST_CASE("destroying a reader finishes every op: started ones complete, queued ones are cancelled") {
  stream_test::ScratchDir dir;
  const std::string path = dir.file("p.bin");
  stream_test::write_pattern_file(path, 4u << 20, 9);
  for (IoMode mode : kModes) {
    const std::string mode_name = io_mode_name(mode);
    CAPTURE(mode_name);
    std::vector<ReadOp> ops(64);
    std::vector<AlignedBuffer> bufs;
    {
      auto r = open_reader(path, mode, 1, 4096);
      for (ReadOp& op : ops) {
        bufs.push_back(aligned_buffer(1 << 20));
        op.prepare(0, 0, 1 << 20, bufs.back().get(), 1 << 20);
        r->submit(op);
      }
      r->wait(ops[0]);  // the I/O side is under way when the reader goes
    }
    CHECK(ops[0].ok());
    size_t cancelled = 0;
    for (ReadOp& op : ops) {
      CHECK(op.finished());
      if (op.state() == ReadOp::State::failed) {
        CHECK(op.error_code() == ECANCELED);
        ++cancelled;
      }
    }
    CHECK(cancelled < 64);
    MESSAGE(mode_name << ": " << cancelled << " of 64 reads cancelled at shutdown");
  }
}

TEST_CASE("io_mode names parse") {
  CHECK(parse_io_mode("uring") == IoMode::uring);
  CHECK(parse_io_mode("pread") == IoMode::pread);
  CHECK_THROWS_AS(parse_io_mode("mmap"), ns::Error);
}
