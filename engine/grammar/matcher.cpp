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
    if (kinds_[i] == TokenKind::end_of_generation)
      eog_.push_back(id);
    else if (kinds_[i] == TokenKind::normal && pieces_[i].empty())
      kinds_[i] = TokenKind::excluded;
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
      if (last_child[parent] == kNone)
        nodes_[parent].first_child = id;
      else
        nodes_[last_child[parent]].next_sibling = id;
      last_child[parent] = id;
      path.push_back(id);
    }
    Node& end = nodes_[path.back()];
    if (end.tok_end == 0) end.tok_begin = static_cast<uint32_t>(k);
    end.tok_end = static_cast<uint32_t>(k + 1);
    prev = &p;
  }
  // Subtree token ranges and bytes, children before parents (nodes are numbered in preorder).
  below_.resize(nodes_.size());
  for (size_t i = nodes_.size(); i-- > 0;) {
    Node& n = nodes_[i];
    bool any = n.tok_end > n.tok_begin;
    n.sub_begin = n.tok_begin;
    n.sub_end = n.tok_end;
    for (uint32_t c = n.first_child; c != kNone; c = nodes_[c].next_sibling) {
      below_[i].add(nodes_[c].byte);
      for (size_t w = 0; w < 4; ++w) below_[i].bits[w] |= below_[c].bits[w];
      if (nodes_[c].sub_end > nodes_[c].sub_begin) {
        n.sub_begin = any ? std::min(n.sub_begin, nodes_[c].sub_begin) : nodes_[c].sub_begin;
        n.sub_end = any ? std::max(n.sub_end, nodes_[c].sub_end) : nodes_[c].sub_end;
        any = true;
      }
    }
  }
}

std::shared_ptr<const TokenTrie> TokenTrie::from_tokenizer(const Tokenizer& tok) {
  const int32_t n = tok.n_vocab();
  std::vector<std::string> pieces(static_cast<size_t>(n));
  std::vector<TokenKind> kinds(static_cast<size_t>(n), TokenKind::normal);
  for (int32_t id = 0; id < n; ++id) {
    if (tok.is_end_of_generation(id))
      kinds[static_cast<size_t>(id)] = TokenKind::end_of_generation;
    else if (tok.is_control(id))
      kinds[static_cast<size_t>(id)] = TokenKind::excluded;
    else
      pieces[static_cast<size_t>(id)] = tok.token_to_piece(id);
  }
  return std::make_shared<const TokenTrie>(std::move(pieces), std::move(kinds));
}

Matcher::Matcher(const Grammar& grammar) : g_(&grammar) {
  for (const uint32_t alt : g_->rules[g_->root]) {
    if (g_->elems[alt].kind == Kind::end)
      stacks_.emplace_back();
    else
      expand({alt}, stacks_);
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

int32_t Matcher::push(MaskScratch& sc, uint32_t pos, int32_t parent) const {
  const uint64_t key = (uint64_t{pos} << 32) | static_cast<uint32_t>(parent);
  const auto [it, inserted] = sc.node_ids.emplace(key, static_cast<int32_t>(sc.arena.size()));
  if (inserted) sc.arena.push_back({pos, parent});
  return it->second;
}

// expand() over persistent stacks: appends the expanded stacks to out.
void Matcher::expand_persistent(MaskScratch& sc, int32_t s, std::vector<int32_t>& out) const {
  if (s < 0 || g_->elems[sc.arena[static_cast<size_t>(s)].pos].kind == Kind::bytes) {
    out.push_back(s);
    return;
  }
  const uint32_t pos = sc.arena[static_cast<size_t>(s)].pos;
  int32_t rest = sc.arena[static_cast<size_t>(s)].parent;
  if (g_->elems[pos + 1].kind != Kind::end) rest = push(sc, pos + 1, rest);
  for (const uint32_t alt : g_->rules[g_->elems[pos].arg]) {
    if (g_->elems[alt].kind == Kind::end)
      expand_persistent(sc, rest, out);
    else
      expand_persistent(sc, push(sc, alt, rest), out);
  }
}

// The id of a set of stacks (sorted, duplicates dropped); 0 is the empty set.
int32_t Matcher::intern(MaskScratch& sc, std::vector<int32_t>& stacks) const {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  const auto [it, inserted] = sc.list_ids.emplace(stacks, static_cast<int32_t>(sc.lists.size()));
  if (inserted) {
    sc.lists.push_back(stacks);
    sc.next.emplace_back();
    sc.next.back().fill(-1);
    sc.loops.emplace_back();
    sc.loops_known.push_back(0);
  }
  return it->second;
}

// The set of stacks after byte b, memoized.
int32_t Matcher::advance(MaskScratch& sc, int32_t list, uint8_t b) const {
  int32_t& memo = sc.next[static_cast<size_t>(list)][b];
  if (memo >= 0) return memo;
  std::vector<int32_t> out;
  for (const int32_t s : sc.lists[static_cast<size_t>(list)]) {
    if (s < 0) continue;
    const uint32_t pos = sc.arena[static_cast<size_t>(s)].pos;
    if (!g_->sets[g_->elems[pos].arg].has(b)) continue;
    int32_t rest = sc.arena[static_cast<size_t>(s)].parent;
    if (g_->elems[pos + 1].kind != Kind::end) rest = push(sc, pos + 1, rest);
    expand_persistent(sc, rest, out);
  }
  const int32_t id = intern(sc, out);
  sc.next[static_cast<size_t>(list)][b] = id;  // sc.next may have grown: index again
  return id;
}

// The bytes that lead `list` back to itself.
const ByteSet& Matcher::loops(MaskScratch& sc, int32_t list) const {
  if (!sc.loops_known[static_cast<size_t>(list)]) {
    ByteSet s;
    for (unsigned b = 0; b < 256; ++b)
      if (advance(sc, list, static_cast<uint8_t>(b)) == list) s.add(static_cast<uint8_t>(b));
    sc.loops[static_cast<size_t>(list)] = s;
    sc.loops_known[static_cast<size_t>(list)] = 1;
  }
  return sc.loops[static_cast<size_t>(list)];
}

// The children of `node`, reached with the set of stacks `list`.
void Matcher::walk(MaskScratch& sc, const TokenTrie& trie, uint32_t node, int32_t list, TokenMask& mask) const {
  const auto& nodes = trie.nodes();
  const auto& sorted = trie.sorted_tokens();
  for (uint32_t c = nodes[node].first_child; c != TokenTrie::kNone; c = nodes[c].next_sibling) {
    const TokenTrie::Node& child = nodes[c];
    const int32_t next = advance(sc, list, child.byte);
    if (next == 0) continue;
    if (child.first_child != TokenTrie::kNone) {
      const ByteSet& below = trie.bytes_below(c);
      const ByteSet& stay = loops(sc, next);
      if ((below.bits[0] & ~stay.bits[0]) == 0 && (below.bits[1] & ~stay.bits[1]) == 0 &&
          (below.bits[2] & ~stay.bits[2]) == 0 && (below.bits[3] & ~stay.bits[3]) == 0) {
        for (uint32_t k = child.sub_begin; k < child.sub_end; ++k) {  // every token below keeps the state alive
          const int32_t id = sorted[k];
          mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
        }
        continue;
      }
    }
    for (uint32_t k = child.tok_begin; k < child.tok_end; ++k) {
      const int32_t id = sorted[k];
      mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    }
    if (child.first_child != TokenTrie::kNone) walk(sc, trie, c, next, mask);
  }
}

void Matcher::token_mask(const TokenTrie& trie, TokenMask& mask) const {
  MaskScratch scratch;
  token_mask(trie, mask, scratch);
}

void Matcher::token_mask(const TokenTrie& trie, TokenMask& mask, MaskScratch& sc) const {
  mask.assign((static_cast<size_t>(trie.n_vocab()) + 63) / 64, 0);
  if (sc.lists.empty() || sc.arena.size() > (1u << 18) || sc.lists.size() > (1u << 13)) {
    sc = MaskScratch();
    std::vector<int32_t> empty;
    intern(sc, empty);  // id 0
  }
  std::vector<int32_t> start;
  for (const Stack& st : stacks_) {
    int32_t s = -1;
    for (const uint32_t p : st) s = push(sc, p, s);
    start.push_back(s);
  }
  walk(sc, trie, 0, intern(sc, start), mask);
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
  m.token_mask(trie, e.mask, scratch_);
  bucket.push_back(std::move(e));
  ++size_;
  return bucket.back().mask;
}

}  // namespace ns::grammar
