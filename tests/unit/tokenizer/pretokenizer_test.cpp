#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/tokenizer/fast_splitters.h"
#include "engine/tokenizer/pretokenizer.h"
#include "common/error.h"
#include "tests/unit/error_message.h"

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

// Expected words worked out by hand from llama.cpp's
// unicode_regex_split_custom_kimi_k2 (see fast_splitters.h for how it differs
// from the regex its comment quotes); tests/conformance/tokenizer_kimi_k2_test.cpp
// checks hundreds more against the reference's own output.
TEST_CASE("kimi-k2 pre-tokenizer: Han runs apart from other letters") {
  const PreTokenizer p(PreType::kimi_k2);
  CHECK(words(p, "你好world") == W{"你好", "world"});
  CHECK(words(p, "中文English混合") == W{"中文", "English", "混合"});
  CHECK(words(p, "hello 世界 ok") == W{"hello", " ", "世界", " ok"});  // a space never leads Han
  CHECK(words(p, "，你好") == W{"，", "你好"});
  CHECK(words(p, "你's") == W{"你", "'s"});  // no contraction after Han: the apostrophe leads a word
  // Kana and hangul are letters, not Han; so is U+3005 (Lm).
  CHECK(words(p, "カタカナ漢字ひらがな") == W{"カタカナ", "漢字", "ひらがな"});
  CHECK(words(p, "東京タワー") == W{"東京", "タワー"});
  CHECK(words(p, "人々") == W{"人", "々"});
  CHECK(words(p, "안녕하세요 세계") == W{"안녕하세요", " 세계"});
  // Compatibility ideographs and Extension B are Han too.
  CHECK(words(p,
              "a\xEF\xA4\x80\xF0\xA0\x80\x80"
              "b") == W{"a", "\xEF\xA4\x80\xF0\xA0\x80\x80", "b"});
}

TEST_CASE("kimi-k2 pre-tokenizer: contractions end the word in any ASCII case, no case rules") {
  const PreTokenizer p(PreType::kimi_k2);
  CHECK(words(p, "I'M") == W{"I'M"});
  CHECK(words(p, "he's") == W{"he's"});
  CHECK(words(p, "THEY'LL go") == W{"THEY'LL", " go"});
  CHECK(words(p, "We'Re") == W{"We'Re"});
  CHECK(words(p, "don't'll") == W{"don't", "'ll"});  // one contraction per word
  CHECK(words(p, "rock'n'roll") == W{"rock", "'n", "'roll"});
  CHECK(words(p, "x 'll") == W{"x", " '", "ll"});
  CHECK(words(p, "HelloWorld iPhone") == W{"HelloWorld", " iPhone"});
}

TEST_CASE("kimi-k2 pre-tokenizer: digits, punctuation, marks, emoji, whitespace") {
  const PreTokenizer p(PreType::kimi_k2);
  CHECK(words(p, "1234567") == W{"123", "456", "7"});
  CHECK(words(p, "a1234") == W{"a", "123", "4"});
  CHECK(words(p, "\xEF\xBC\x91\xEF\xBC\x92\xEF\xBC\x93\xEF\xBC\x94") ==
        W{"\xEF\xBC\x91\xEF\xBC\x92\xEF\xBC\x93", "\xEF\xBC\x94"});  // full-width digits
  CHECK(words(p, "Hi!!! ...") == W{"Hi", "!!!", " ..."});
  CHECK(words(p, "end.\n\nNext") == W{"end", ".\n\n", "Next"});
  CHECK(words(p, "(hello") == W{"(hello"});
  // A combining mark is not a letter: it ends the word and leads the next one.
  CHECK(words(p, "cafe\xCC\x81") == W{"cafe", "\xCC\x81"});
  CHECK(words(p, "nai\xCC\x88ve") == W{"nai", "\xCC\x88ve"});
  CHECK(words(p, "hi \xF0\x9F\x91\x8B there") == W{"hi", " \xF0\x9F\x91\x8B", " there"});
  CHECK(words(p, "\xF0\x9F\x91\x8Bhello") == W{"\xF0\x9F\x91\x8Bhello"});
  CHECK(words(p, "a\n\nb") == W{"a", "\n\n", "b"});
  CHECK(words(p, "a  \n  b") == W{"a", "  \n", " ", " b"});
  CHECK(words(p, "a   b") == W{"a", "  ", " b"});
  CHECK(words(p, "a   ") == W{"a", "   "});
  CHECK(words(p, "a  你") == W{"a", " ", " ", "你"});
}

// Expected pieces from Python's regex module running the same pattern (the
// form llama.cpp runs for gpt-4o, where a letter that is not a-z counts as
// upper case and one that is not A-Z as lower case, so "aÄb" stays one word).
TEST_CASE("gpt-4o pre-tokenizer (gpt-oss): case runs, contractions in any case, digits in threes, slashes") {
  const PreTokenizer p(PreType::gpt4o);
  CHECK(words(p, "Hello WORLD's fooBar HTTPServer 12345 isn't") ==
        W{"Hello", " WORLD's", " foo", "Bar", " HTTPServer", " ", "123", "45", " isn't"});
  CHECK(words(p, "THE QUEUE'S empty: 3:00 AM!!\n\n") ==
        W{"THE", " QUEUE'S", " empty", ":", " ", "3", ":", "00", " AM", "!!\n\n"});
  CHECK(words(p, "a/b//c\n  x") == W{"a", "/b", "//", "c", "\n", " ", " x"});
  CHECK(words(p,
              "\xC3\x9C"
              "BERgro\xC3\x9F a\xC3\x84"
              "b \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E") == W{"\xC3\x9C"
                                                             "BERgro\xC3\x9F",
                                                             " a\xC3\x84"
                                                             "b",
                                                             " \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E"});
  CHECK(resolve_pre_tokenizer("gpt-4o").type == PreType::gpt4o);
  CHECK(resolve_pre_tokenizer("gpt-4o").clean_spaces == false);
}

TEST_CASE("the hand-written GPT-2, Llama-3 and Kimi K2 splitters agree with PCRE2 on the same patterns") {
  // The fast paths are the optimised versions; PCRE2 running the patterns
  // themselves is the reference (with llama.cpp's whitespace rule applied).
  const std::vector<std::string> alphabet = {" ",
                                             "  ",
                                             "\t",
                                             "\n",
                                             "\r",
                                             "a",
                                             "Z",
                                             "'",
                                             "s",
                                             "t",
                                             "re",
                                             "LL",
                                             "1",
                                             "\xD9\xA3",
                                             "\xC3\xA9",
                                             "\xE4\xB8\xAD",
                                             "!",
                                             ".",
                                             "\xC2\x85",
                                             "\xC2\xA0",
                                             "\xE3\x80\x80",
                                             "\xF0\x9F\xA6\x99",
                                             "\xCC\x81",
                                             "\xE2\x80\x8B",
                                             "_",
                                             "\xFF",
                                             "\xE4\xB8",
                                             "'S",
                                             "\x80",
                                             "\xE3\x82\xAB",
                                             "\xE3\x80\x85",
                                             "\xEF\xA4\x80",
                                             "\xF0\xA0\x80\x80",
                                             "\xE9\xBF\xBF",
                                             "M",
                                             "'",
                                             "\xEA\xB0\x80"};
  for (const std::string& pattern : {std::string(kGpt2Pattern), std::string(kLlama3Pattern), kimi_k2_pattern()}) {
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
  CHECK(resolve_pre_tokenizer("kimi-k2").type == PreType::kimi_k2);
  CHECK(resolve_pre_tokenizer("kimi-k2").clean_spaces == false);
  CHECK(resolve_pre_tokenizer("kimi-k2").ignore_merges == false);
  // GLM-4 / GLM-4.5 (llama.cpp's CHATGLM4): Llama 3's regex, merges always applied, no BOS default.
  for (const char* glm : {"glm4", "chatglm-bpe"}) {
    const PreTokenizerInfo info = resolve_pre_tokenizer(glm);
    CHECK(info.type == PreType::chatglm4);
    CHECK(info.ignore_merges == false);
    CHECK(info.clean_spaces == true);
    CHECK(!info.add_bos.has_value());
    CHECK(info.default_bos == false);
  }
  CHECK(pre_tokenizer_patterns(PreType::chatglm4) == pre_tokenizer_patterns(PreType::llama3));
  CHECK(resolve_pre_tokenizer("llama3").default_bos);
  const std::string msg = ns::test::expect_error(
      ns::ErrorKind::bad_model, [] { resolve_pre_tokenizer("no-such-pre"); }, "expected an error");
  CHECK(ns::test::contains(msg, "no-such-pre"));
  CHECK(ns::test::contains(msg, "deepseek-llm"));
}

TEST_CASE("every supported pre-tokenizer's regexes compile and split any bytes") {
  for (PreType t :
       {PreType::default_, PreType::llama3, PreType::dbrx, PreType::deepseek_llm, PreType::deepseek_coder,
        PreType::deepseek3_llm, PreType::falcon, PreType::starcoder, PreType::gpt2, PreType::qwen2, PreType::kimi_k2}) {
    const PreTokenizer p(t);
    std::string all;
    for (int b = 255; b >= 0; --b) all.push_back(static_cast<char>(b));
    words(p, all + " The year 2024: \xE6\x9D\xB1\xE4\xBA\xAC\n\n\t x~y " + all);
  }
}
