#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "tiny_vocab.h"

TEST_CASE("one tokenizer serves several threads at once with identical results") {
  // The deepseek-coder list mixes PCRE2 regexes and character-class lookups,
  // the parts with per-thread and process-wide state.
  const auto t = ns::Tokenizer::from_spec(tiny::bpe({"ab"}, {"a b"}, "deepseek-coder"));
  std::vector<std::string> texts;
  for (int i = 0; i < 64; ++i)
    texts.push_back("ab " + std::to_string(i * 7919) +
                    " \xE4\xB8\xAD\xE6\x96\x87 \xCE\xB1\xCE\xB2\xCE\xB3 \xF0\x90\x90\x80" +
                    std::string(static_cast<size_t>(i % 5), '!') + "\n");
  std::vector<std::vector<int32_t>> expected;
  for (const auto& s : texts) expected.push_back(t->encode(s, false, false));

  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int round = 0; round < 20; ++round)
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t j = (i + static_cast<size_t>(k) * 13) % texts.size();
          if (t->encode(texts[j], false, false) != expected[j]) ++mismatches;
          if (t->decode(expected[j]) != texts[j]) ++mismatches;
        }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(mismatches.load() == 0);
}
