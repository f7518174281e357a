// Token-level grammar matching for constrained decoding.
//
// Matcher: a stack-based (pushdown) recognizer over bytes, as llama.cpp's
// grammar engine works: its state is the set of stacks of grammar positions
// the bytes so far can be in, each stack's top a byte-set element (an empty
// stack: the grammar is complete there). accept_bytes() advances every stack
// on each byte; duplicates are merged, so the state is canonical and can key
// a cache.
//
// token_mask(): which tokens may come next. Token byte strings sit in a prefix
// trie (TokenTrie), walked depth-first from the current state, each trie edge
// advancing the stacks by one byte; a subtree no stack survives is skipped
// whole, and a prefix shared by many tokens is walked once. Stacks in the walk
// are persistent and hash-consed (a node is its grammar position and its
// parent node; equal stacks get equal ids), sets of them are interned, and
// each set's transition on a byte is computed once: inside a string the set
// after a plain character is the set before it, so most trie edges cost one
// table lookup. And where every byte below a trie node leads a set back to
// itself (a string's plain characters), the node's whole subtree is allowed
// without walking it (tokens are sorted, so a subtree's are one range).
// token_mask_reference() is the scalar reference: each token's bytes fed to a
// copy of the state, one token at a time (tests compare the two over whole
// vocabularies).
//
// Tokens: a normal token is allowed when its bytes are; an end-of-generation
// token exactly when the grammar is complete; an excluded token (control
// tokens other than end-of-generation ones, empty pieces) never.
//
// MaskCache: masks by state. A batch usually shares one schema, and within a
// string or a number the state repeats from token to token, so most steps hit.
// Cleared whole when full, so what it returns never depends on what it held.
//
// Deterministic; Matcher and MaskCache are not thread-safe (MaskCache keeps
// the walk's working memory); TokenTrie is immutable once built.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/grammar/grammar.h"

namespace ns {
class Tokenizer;
}

namespace ns::grammar {

enum class TokenKind : uint8_t { normal, end_of_generation, excluded };

class TokenTrie {
 public:
  // pieces[id]: the bytes token id adds to the output. An empty piece makes a
  // normal token excluded.
  TokenTrie(std::vector<std::string> pieces, std::vector<TokenKind> kinds);
  // Pieces from token_to_piece(); end-of-generation ids as the tokenizer says;
  // other control tokens excluded.
  static std::shared_ptr<const TokenTrie> from_tokenizer(const Tokenizer& tok);

  struct Node {
    uint32_t first_child = kNone, next_sibling = kNone;
    uint32_t tok_begin = 0, tok_end = 0;  // tokens whose piece ends here: sorted_[tok_begin, tok_end)
    uint32_t sub_begin = 0, sub_end = 0;  // tokens of the subtree (this node's included): contiguous
    uint8_t byte = 0;
  };
  static constexpr uint32_t kNone = 0xFFFFFFFF;

  int32_t n_vocab() const { return static_cast<int32_t>(pieces_.size()); }
  const std::vector<Node>& nodes() const { return nodes_; }  // nodes()[0] is the root
  const std::vector<int32_t>& sorted_tokens() const { return sorted_; }
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
  TokenKind kind(int32_t id) const { return kinds_[static_cast<size_t>(id)]; }
  const std::vector<int32_t>& end_of_generation() const { return eog_; }
  // Every byte on the edges below a node (its own byte excluded).
  const ByteSet& bytes_below(uint32_t node) const { return below_[node]; }

 private:
  std::vector<ByteSet> below_;
  std::vector<std::string> pieces_;
  std::vector<TokenKind> kinds_;
  std::vector<int32_t> sorted_;  // normal tokens by piece
  std::vector<int32_t> eog_;
  std::vector<Node> nodes_;
};

// n_vocab bits, token id i at word i / 64, bit i % 64.
using TokenMask = std::vector<uint64_t>;

// token_mask()'s working memory for one grammar: hash-consed stack nodes (equal
// stacks, equal ids), interned stack sets ("lists", 0 = the empty set) and
// their byte transitions. It depends on grammar positions only, so it stays
// valid from one state to the next: kept across masks (MaskCache does), the
// transitions an earlier mask found are table lookups for the later ones.
// Cleared when it grows past a few tens of MiB.
struct MaskScratch {
  struct PNode {
    uint32_t pos;
    int32_t parent;
  };
  std::vector<PNode> arena;
  std::unordered_map<uint64_t, int32_t> node_ids;
  std::vector<std::vector<int32_t>> lists;
  std::map<std::vector<int32_t>, int32_t> list_ids;
  std::vector<std::array<int32_t, 256>> next;  // -1 = not computed yet
  std::vector<ByteSet> loops;                  // per list: bytes that lead back to it (once known)
  std::vector<uint8_t> loops_known;
};

inline bool mask_has(const TokenMask& m, int32_t id) { return (m[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1; }

class Matcher {
 public:
  // At the start of the grammar; keeps a reference to it.
  explicit Matcher(const Grammar& grammar);
  Matcher(const Grammar&&) = delete;  // the grammar must outlive the matcher

  // Advances over the bytes; false (and the state unchanged) when the grammar rejects them.
  bool accept_bytes(std::string_view bytes);
  // The bytes so far form a whole sentence of the grammar.
  bool complete() const;
  // Some continuation is possible (false: complete and nothing may follow).
  bool can_continue() const;

  void token_mask(const TokenTrie& trie, TokenMask& mask) const;
  // The same with working memory kept by the caller (one per grammar, not shared between threads).
  void token_mask(const TokenTrie& trie, TokenMask& mask, MaskScratch& scratch) const;
  void token_mask_reference(const TokenTrie& trie, TokenMask& mask) const;

  using Stack = std::vector<uint32_t>;  // grammar positions, bottom first
  const std::vector<Stack>& stacks() const { return stacks_; }
  uint64_t state_hash() const;

 private:
  void expand(Stack stack, std::vector<Stack>& out) const;
  int32_t push(MaskScratch& sc, uint32_t pos, int32_t parent) const;
  void expand_persistent(MaskScratch& sc, int32_t s, std::vector<int32_t>& out) const;
  int32_t intern(MaskScratch& sc, std::vector<int32_t>& stacks) const;
  int32_t advance(MaskScratch& sc, int32_t list, uint8_t b) const;
  const ByteSet& loops(MaskScratch& sc, int32_t list) const;
  void walk(MaskScratch& sc, const TokenTrie& trie, uint32_t node, int32_t list, TokenMask& mask) const;

  const Grammar* g_;
  std::vector<Stack> stacks_;  // sorted, distinct
};

class MaskCache {
 public:
  explicit MaskCache(size_t capacity = 256) : capacity_(capacity) {}
  // The mask for the matcher's state, computed on a miss.
  const TokenMask& mask(const Matcher& m, const TokenTrie& trie);
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  struct Entry {
    std::vector<Matcher::Stack> stacks;
    TokenMask mask;
  };
  size_t capacity_;
  size_t size_ = 0;
  MaskScratch scratch_;
  std::unordered_map<uint64_t, std::vector<Entry>> entries_;
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace ns::grammar
