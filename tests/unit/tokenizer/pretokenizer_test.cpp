#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/tokenizer/fast_splitters.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/util/error.h"

using namespace ns::tok;

namespace {

std::vector<std::string> words(const PreTokenizer& p, const std::string& text) {
  std::vector<WordSpan> spans;
  p.split(text, spans);
  std::vector<std::string> out;
  size_t expect_begin = 0;
  for (const auto& [b, e] : spans) {
    CHECK(b == expect_begin);  // pieces tile the text
    CHECK(e > b);
    out.push_back(text.substr(b, e - b));
    expect_begin = e;
  }
  CHECK(expect_begin == text.size());
  return out;
}

using W = std::vector<std::string>;

}  // namespace

TEST_CASE("gpt-2 pre-tokenizer splits words, numbers, punctuation and whitespace runs") {
  const PreTokenizer p(PreType::gpt2);
  CHECK(words(p, "Hello world") == W{"Hello", " world"});
  CHECK(words(p, "I've 42 cats!!") == W{"I", "'ve", " 42", " cats", "!!"});
  // \s+(?!\S): a whitespace run before a word leaves its last space to the word...
  CHECK(words(p, "a   b") == W{"a", "  ", " b"});
  // ...a lone non-space whitespace character stays alone, and at the end the run is kept whole.
  CHECK(words(p, "a\tb  ") == W{"a", "\t", "b", "  "});
  CHECK(words(p, "\n\n") == W{"\n\n"});
  CHECK(words(p, "").empty());
}

TEST_CASE("llama-3 pre-tokenizer: digits in threes, newlines kept with preceding spaces") {
  const PreTokenizer p(PreType::llama3);
  CHECK(words(p, "1234567") == W{"123", "456", "7"});
  CHECK(words(p, "x  \n\ny") == W{"x", "  \n\n", "y"});
  CHECK(words(p, "DON'T") == W{"DON", "'T"});
  CHECK(words(p, "(hello") == W{"(hello"});
}

TEST_CASE("deepseek-coder pre-tokenizer: digits one by one, CJK runs, gaps become pieces") {
  const PreTokenizer p(PreType::deepseek_coder);
  CHECK(words(p, "ab 12") == W{"ab", " ", "1", "2"});
  CHECK(words(p, "x\ny") == W{"x", "\n", "y"});
  CHECK(words(p, "\xE6\x88\x91\xE6\x83\xB3") == W{"\xE6\x88\x91\xE6\x83\xB3"});  // 我想: one run
}

TEST_CASE("deepseek-llm pre-tokenizer: Kelvin sign and friends stay inside the letter class") {
  const PreTokenizer p(PreType::deepseek_llm);
  // U+212A KELVIN SIGN starts a range of the cased-letter class; had it been
  // folded to ASCII 'K', the range K-U+212D would take in '~' after "x".
  CHECK(words(p, "x~1") == W{"x", "~", "1"});
  // The CJK list's range U+0800-U+4E00 is wide: it splits letters like U+212A
  // from Latin ones too (as in llama.cpp).
  CHECK(words(p, "\xE2\x84\xAA\xC3\xA9") == W{"\xE2\x84\xAA", "\xC3\xA9"});
  // Each later regex splits the earlier pieces again: ASCII letters are
  // matched apart from the other letters by the punctuation-and-ASCII class.
  CHECK(words(p, "F\xC3\xBChrer") == W{"F", "\xC3\xBC", "hrer"});
  CHECK(words(p, "hi  ") == W{"hi", "  "});  // \s+$ takes trailing whitespace
}

TEST_CASE("the hand-written GPT-2 and Llama-3 splitters agree with PCRE2 on the same patterns") {
  // The fast paths are the optimised versions; PCRE2 running the patterns
  // themselves is the reference (with llama.cpp's whitespace rule applied).
  const std::vector<std::string> alphabet = {
      " ", "  ", "\t", "\n", "\r", "a", "Z", "'", "s", "t", "re", "LL", "1", "\xD9\xA3", "\xC3\xA9", "\xE4\xB8\xAD",
      "!", ".", "\xC2\x85", "\xC2\xA0", "\xE3\x80\x80", "\xF0\x9F\xA6\x99", "\xCC\x81", "\xE2\x80\x8B", "_", "\xFF",
      "\xE4\xB8", "'S", "\x80"};
  for (const char* pattern : {kGpt2Pattern, kLlama3Pattern}) {
    CAPTURE(pattern);
    const PreTokenizer fast({pattern}, true), reference({pattern}, false);
    std::mt19937 rng(1234);
    int mismatches = 0;
    for (int iter = 0; iter < 20000; ++iter) {
      std::string s;
      const int n = 1 + static_cast<int>(rng() % 10);
      for (int i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
      std::vector<WordSpan> a, b;
      fast.split(s, a);
      reference.split(s, b);
      if (a != b && ++mismatches <= 5) CHECK_MESSAGE(a == b, "text: " << s);
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("pre-tokenizer names resolve like llama.cpp's, unknown ones are rejected with the list") {
  CHECK(resolve_pre_tokenizer("llama-bpe").type == PreType::llama3);
  CHECK(resolve_pre_tokenizer("llama-bpe").ignore_merges);
  CHECK(resolve_pre_tokenizer("llama-bpe").add_bos == true);
  CHECK(resolve_pre_tokenizer("deepseek-coder").clean_spaces == false);
  CHECK(resolve_pre_tokenizer("gpt-2").clean_spaces == true);
  CHECK(resolve_pre_tokenizer("phi-2").type == PreType::gpt2);
  CHECK(resolve_pre_tokenizer("").type == PreType::default_);
  try {
    resolve_pre_tokenizer("no-such-pre");
    FAIL("expected an error");
  } catch (const ns::Error& e) {
    CHECK(e.kind() == ns::ErrorKind::bad_model);
    const std::string msg = e.what();
    CHECK(msg.find("no-such-pre") != std::string::npos);
    CHECK(msg.find("deepseek-llm") != std::string::npos);
  }
}

TEST_CASE("every supported pre-tokenizer's regexes compile and split any bytes") {
  for (PreType t : {PreType::default_, PreType::llama3, PreType::dbrx, PreType::deepseek_llm, PreType::deepseek_coder,
                    PreType::deepseek3_llm, PreType::falcon, PreType::starcoder, PreType::gpt2, PreType::qwen2}) {
    const PreTokenizer p(t);
    std::string all;
    for (int b = 255; b >= 0; --b) all.push_back(static_cast<char>(b));
    words(p, all + " The year 2024: \xE6\x9D\xB1\xE4\xBA\xAC\n\n\t x~y " + all);
  }
}
