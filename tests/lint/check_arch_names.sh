#!/usr/bin/env bash
# An architecture's quirks live in its file (docs/architecture.md, "where a
# change goes"): the shared code asks the architecture's settings
# (ArchTraits, engine/spec/hparams.h) and never its name. Checked over the
# tree (ctest unit.arch_names; well under a second). Usage:
# check_arch_names.sh [--self-test] [ROOT] (the checkout; default: this
# script's). Exit 1 listing every line of shared code that compares
# general.architecture (`arch ==`, `arch !=`) or spells the name of an
# architecture registry.cpp registers as a string; `--self-test` first checks
# that a tree with such lines fails. There is no exception list: a new quirk
# is a field of ArchTraits, or code in the architecture's own file.
#
# Shared code: engine/ outside engine/arch/ and outside the modules whose
# strings name other things (engine/chat: chat template names such as
# "deepseek2"; engine/tokenizer: tokenizer.ggml.model "llama"), and daemon/.
# Comments are not read.
set -euo pipefail

# The names registry.cpp registers ({"<general.architecture>", make, ...}).
registered_names() {
  grep -oE '^ *\{"[^"]+", ' "$1/engine/arch/registry.cpp" | sed -E 's/^ *\{"([^"]+)", $/\1/'
}

check_tree() {
  local root=$1 names pattern out
  names=$(registered_names "$root" | paste -sd'|' | sed 's/\./\\./g')
  if [[ -z $names ]]; then
    echo "$root/engine/arch/registry.cpp: no registered architecture found (expected lines {\"name\", make, ...})"
    return 1
  fi
  pattern="(\\barch *[!=]= *\"|\"($names)\")"
  local files
  files=$(cd "$root" && find engine daemon \( -name '*.h' -o -name '*.cpp' \) | grep -vE '^engine/(arch|chat|tokenizer)/' | sort)
  out=$(cd "$root" && PATTERN=$pattern xargs perl -ne 's#//.*$##; print "$ARGV:$.: $_" if /$ENV{PATTERN}/; close ARGV if eof' <<<"$files")
  if [[ -n $out ]]; then
    echo "$out" | sed 's/$/  <- shared code naming an architecture: make it an ArchTraits field (engine\/model\/hparams.h) or move it to engine\/arch/'
    return 1
  fi
}

self_test() {
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  mkdir -p "$tmp"/engine/{arch,layers,chat} "$tmp"/daemon/lib
  echo 'int main() { return 0; }' >"$tmp/daemon/lib/ok.cpp"
  printf '    {"llama", plain<make_llama>, llama_tensors, &llama_traits},\n    {"gpt-oss", x, y, &z},\n' \
    >"$tmp/engine/arch/registry.cpp"
  echo 'if (hp.arch == "gpt-oss") return;' >"$tmp/engine/arch/gpt_oss.cpp"
  echo 'return "gpt-oss";  // a chat template name' >"$tmp/engine/chat/detect.cpp"
  echo 'x = 1;  // as "llama" does' >"$tmp/engine/layers/ok.cpp"
  if ! check_tree "$tmp" >/dev/null; then echo "self-test: a clean tree failed"; return 1; fi
  local bad
  for bad in 'if (h.arch != "qwen") x = 1;' 'const bool quirk = name == "gpt-oss";' 'f(hp, "llama");'; do
    echo "$bad" >"$tmp/engine/layers/bad.cpp"
    if check_tree "$tmp" >/dev/null; then echo "self-test: '$bad' in engine/layers passed the check"; return 1; fi
    rm "$tmp/engine/layers/bad.cpp"
    echo "$bad" >"$tmp/daemon/bad.cpp"
    if check_tree "$tmp" >/dev/null; then echo "self-test: '$bad' in daemon/ passed the check"; return 1; fi
    rm "$tmp/daemon/bad.cpp"
  done
}

source "$(dirname "$0")/lint_lib.sh"
lint_main "$@"
