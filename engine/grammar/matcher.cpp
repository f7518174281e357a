// Byte-level grammar matching and token masks (contract in engine/grammar/matcher.h).
#include "engine/grammar/matcher.h"

#include <algorithm>
#include <numeric>

#include "engine/tokenizer/tokenizer.h"

namespace ns::grammar {

using Kind = Grammar::Kind;

TokenTrie::TokenTrie(std::vector<std::string> pieces, std::vector<TokenKind> kinds)
    : pieces_(std::move(pieces)), kinds_(std::move(kinds)) {
  kinds_.resize(pieces_.size(), TokenKind::excluded);
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    if (kinds_[i] == TokenKind::end_of_generation) eog_.push_back(id);
    else if (kinds_[i] == TokenKind::normal && pieces_[i].empty()) kinds_[i] = TokenKind::excluded;
    if (kinds_[i] == TokenKind::normal) sorted_.push_back(id);
  }
  std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) {
    const std::string &pa = pieces_[static_cast<size_t>(a)], &pb = pieces_[static_cast<size_t>(b)];
    return pa != pb ? pa < pb : a < b;
  });
  // Pieces in byte order: each one shares its longest common prefix with the
  // previous, so the path to that prefix is on `path` and the rest is new nodes.
  nodes_.emplace_back();
  std::vector<uint32_t> path = {0};
  std::vector<uint32_t> last_child = {kNone};
  const std::string* prev = nullptr;
  for (size_t k = 0; k < sorted_.size(); ++k) {
    const std::string& p = pieces_[static_cast<size_t>(sorted_[k])];
    size_t common = 0;
    if (prev) {
      const size_t n = std::min(prev->size(), p.size());
      while (common < n && (*prev)[common] == p[common]) ++common;
    }
    path.resize(common + 1);
    last_child.resize(nodes_.size());
    for (size_t d = common; d < p.size(); ++d) {
      const uint32_t parent = path.back();
      const auto id = static_cast<uint32_t>(nodes_.size());
      Node n;
      n.byte = static_cast<uint8_t>(p[d]);
      nodes_.push_back(n);
      last_child.push_back(kNone);
      if (last_child[parent] == kNone) nodes_[parent].first_child = id;
      else nodes_[last_child[parent]].next_sibling = id;
      last_child[parent] = id;
      path.push_back(id);
    }
    Node& end = nodes_[path.back()];
    if (end.tok_end == 0) end.tok_begin = static_cast<uint32_t>(k);
    end.tok_end = static_cast<uint32_t>(k + 1);
    prev = &p;
  }
}

std::shared_ptr<const TokenTrie> TokenTrie::from_tokenizer(const Tokenizer& tok) {
  const int32_t n = tok.n_vocab();
  std::vector<std::string> pieces(static_cast<size_t>(n));
  std::vector<TokenKind> kinds(static_cast<size_t>(n), TokenKind::normal);
  for (int32_t id = 0; id < n; ++id) {
    if (tok.is_end_of_generation(id)) kinds[static_cast<size_t>(id)] = TokenKind::end_of_generation;
    else if (tok.is_control(id)) kinds[static_cast<size_t>(id)] = TokenKind::excluded;
    else pieces[static_cast<size_t>(id)] = tok.token_to_piece(id);
  }
  return std::make_shared<const TokenTrie>(std::move(pieces), std::move(kinds));
}

Matcher::Matcher(const Grammar& grammar) : g_(&grammar) {
  for (const uint32_t alt : g_->rules[g_->root]) {
    if (g_->elems[alt].kind == Kind::end) stacks_.emplace_back();
    else expand({alt}, stacks_);
  }
  std::sort(stacks_.begin(), stacks_.end());
  stacks_.erase(std::unique(stacks_.begin(), stacks_.end()), stacks_.end());
}

// Replaces rule references on top by their alternatives until every top is a byte set.
void Matcher::expand(Stack stack, std::vector<Stack>& out) const {
  if (stack.empty() || g_->elems[stack.back()].kind == Kind::bytes) {
    out.push_back(std::move(stack));
    return;
  }
  const uint32_t pos = stack.back();
  const uint32_t rule = g_->elems[pos].arg;
  stack.pop_back();
  if (g_->elems[pos + 1].kind != Kind::end) stack.push_back(pos + 1);
  for (const uint32_t alt : g_->rules[rule]) {
    Stack s = stack;
    if (g_->elems[alt].kind != Kind::end) s.push_back(alt);
    expand(std::move(s), out);
  }
}

bool Matcher::accept_bytes(std::string_view bytes) {
  std::vector<Stack> cur = stacks_, next;
  for (const char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    next.clear();
    for (const Stack& st : cur) {
      if (st.empty()) continue;
      const uint32_t pos = st.back();
      if (!g_->sets[g_->elems[pos].arg].has(b)) continue;
      Stack s(st.begin(), st.end() - 1);
      if (g_->elems[pos + 1].kind != Kind::end) s.push_back(pos + 1);
      expand(std::move(s), next);
    }
    if (next.empty()) return false;
    std::sort(next.begin(), next.end());
    next.erase(std::unique(next.begin(), next.end()), next.end());
    cur.swap(next);
  }
  stacks_ = std::move(cur);
  return true;
}

bool Matcher::complete() const {
  return std::any_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return s.empty(); });
}

bool Matcher::can_continue() const {
  return std::any_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return !s.empty(); });
}

uint64_t Matcher::state_hash() const {
  uint64_t h = 1469598103934665603ull;
  for (const Stack& s : stacks_) {
    for (const uint32_t p : s) h = (h ^ p) * 1099511628211ull;
    h = (h ^ 0xFFFFFFFFull) * 1099511628211ull;  // stack separator
  }
  return h;
}

int32_t Matcher::push(uint32_t pos, int32_t parent) const {
  const uint64_t key = (uint64_t{pos} << 32) | static_cast<uint32_t>(parent);
  const auto [it, inserted] = node_ids_.emplace(key, static_cast<int32_t>(arena_.size()));
  if (inserted) arena_.push_back({pos, parent});
  return it->second;
}

// expand() over persistent stacks: appends the expanded stacks to out.
void Matcher::expand_persistent(int32_t s, std::vector<int32_t>& out) const {
  if (s < 0 || g_->elems[arena_[static_cast<size_t>(s)].pos].kind == Kind::bytes) {
    out.push_back(s);
    return;
  }
  const uint32_t pos = arena_[static_cast<size_t>(s)].pos;
  int32_t rest = arena_[static_cast<size_t>(s)].parent;
  if (g_->elems[pos + 1].kind != Kind::end) rest = push(pos + 1, rest);
  for (const uint32_t alt : g_->rules[g_->elems[pos].arg]) {
    if (g_->elems[alt].kind == Kind::end) expand_persistent(rest, out);
    else expand_persistent(push(alt, rest), out);
  }
}

// The id of a set of stacks (sorted, duplicates dropped); 0 is the empty set.
int32_t Matcher::intern(std::vector<int32_t>& stacks) const {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  const auto [it, inserted] = list_ids_.emplace(stacks, static_cast<int32_t>(lists_.size()));
  if (inserted) {
    lists_.push_back(stacks);
    next_.emplace_back();
    next_.back().fill(-1);
  }
  return it->second;
}

// The set of stacks after byte b, memoized.
int32_t Matcher::advance(int32_t list, uint8_t b) const {
  int32_t& memo = next_[static_cast<size_t>(list)][b];
  if (memo >= 0) return memo;
  std::vector<int32_t> out;
  for (const int32_t s : lists_[static_cast<size_t>(list)]) {
    if (s < 0) continue;
    const uint32_t pos = arena_[static_cast<size_t>(s)].pos;
    if (!g_->sets[g_->elems[pos].arg].has(b)) continue;
    int32_t rest = arena_[static_cast<size_t>(s)].parent;
    if (g_->elems[pos + 1].kind != Kind::end) rest = push(pos + 1, rest);
    expand_persistent(rest, out);
  }
  const int32_t id = intern(out);
  next_[static_cast<size_t>(list)][b] = id;  // next_ may have grown: index again
  return id;
}

// The children of `node`, reached with the set of stacks `list`.
void Matcher::walk(const TokenTrie& trie, uint32_t node, int32_t list, TokenMask& mask) const {
  const auto& nodes = trie.nodes();
  const auto& sorted = trie.sorted_tokens();
  for (uint32_t c = nodes[node].first_child; c != TokenTrie::kNone; c = nodes[c].next_sibling) {
    const TokenTrie::Node& child = nodes[c];
    const int32_t next = advance(list, child.byte);
    if (next == 0) continue;
    for (uint32_t k = child.tok_begin; k < child.tok_end; ++k) {
      const int32_t id = sorted[k];
      mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    }
    if (child.first_child != TokenTrie::kNone) walk(trie, c, next, mask);
  }
}

void Matcher::token_mask(const TokenTrie& trie, TokenMask& mask) const {
  mask.assign((static_cast<size_t>(trie.n_vocab()) + 63) / 64, 0);
  arena_.clear();
  node_ids_.clear();
  lists_.clear();
  list_ids_.clear();
  next_.clear();
  std::vector<int32_t> empty;
  intern(empty);  // id 0
  std::vector<int32_t> start;
  for (const Stack& st : stacks_) {
    int32_t s = -1;
    for (const uint32_t p : st) s = push(p, s);
    start.push_back(s);
  }
  walk(trie, 0, intern(start), mask);
  if (complete())
    for (const int32_t id : trie.end_of_generation()) mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
}

void Matcher::token_mask_reference(const TokenTrie& trie, TokenMask& mask) const {
  mask.assign((static_cast<size_t>(trie.n_vocab()) + 63) / 64, 0);
  for (int32_t id = 0; id < trie.n_vocab(); ++id) {
    bool ok = false;
    switch (trie.kind(id)) {
      case TokenKind::end_of_generation: ok = complete(); break;
      case TokenKind::excluded: ok = false; break;
      case TokenKind::normal: {
        Matcher copy(*g_);  // the state alone, not token_mask()'s scratch
        copy.stacks_ = stacks_;
        ok = copy.accept_bytes(trie.piece(id));
        break;
      }
    }
    if (ok) mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  }
}

const TokenMask& MaskCache::mask(const Matcher& m, const TokenTrie& trie) {
  const uint64_t h = m.state_hash();
  auto it = entries_.find(h);
  if (it != entries_.end())
    for (const Entry& e : it->second)
      if (e.stacks == m.stacks()) {
        ++hits_;
        return e.mask;
      }
  ++misses_;
  if (size_ >= capacity_) {
    entries_.clear();
    size_ = 0;
  }
  std::vector<Entry>& bucket = entries_[h];
  Entry e;
  e.stacks = m.stacks();
  m.token_mask(trie, e.mask);
  bucket.push_back(std::move(e));
  ++size_;
  return bucket.back().mask;
}

}  // namespace ns::grammar
