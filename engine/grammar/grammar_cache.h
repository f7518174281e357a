// The grammars of a batch's constrained requests (generation_batch.h): each
// distinct GBNF text parsed once for the cache's life (parse errors: what
// parse_gbnf throws) with one MaskCache shared by the requests of that
// grammar, and the vocabulary's TokenTrie, built at the first grammar. Once no
// request holds a grammar it is kept among the last kKept, then forgotten.
//
// constrain(): before a constrained draw, the logits of the tokens the
// matcher's state forbids become -inf (ids the trie does not have, rows past
// the tokenizer's vocabulary, too); false when it allows none. The time it
// takes is summed in seconds(). Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/grammar/grammar.h"
#include "engine/grammar/matcher.h"

namespace ns::grammar {

class GrammarCache {
 public:
  struct Entry {
    Grammar g;
    MaskCache cache;
  };
  std::shared_ptr<Entry> get(const std::string& text, const Tokenizer& tok);
  bool constrain(Entry& e, const Matcher& m, float* logits, int64_t n_vocab);
  double seconds() const { return seconds_; }

 private:
  static constexpr size_t kKept = 16;  // grammars (with their mask caches) kept once no request uses them
  void forget_unused();
  std::unordered_map<uint64_t, std::vector<std::shared_ptr<Entry>>> by_hash_;
  size_t count_ = 0;
  std::shared_ptr<const TokenTrie> trie_;
  double seconds_ = 0;
};

}  // namespace ns::grammar
