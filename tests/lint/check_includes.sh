#!/usr/bin/env bash
# The include rules of docs/architecture.md, checked over the tree (ctest
# unit.include_layers; well under a second). Usage: check_includes.sh [ROOT]
# (the checkout; default: this script's). Exit 1 listing every include that
# breaks a rule, with the rule; `--self-test` first checks that a tree with
# forbidden includes fails.
#
# The rules:
# - common/ includes nothing else of the project; jobs/ only common/;
#   engine/ nothing of jobs/, daemon/ or tools/.
# - daemon/ reaches the engine only through its facade (FACADE below).
# - Inside engine/, arrows point down: a file includes its own group or a
#   lower one (RANK below, lowest first), never a higher group or a sibling.
#   A new engine folder or top-level file must be given its place here.
set -euo pipefail

# The engine's doors for daemon/: the facade and its value types, and the
# leaf modules the CLI uses at submit time (chat rendering, JSON schema to
# grammar, the logprobs encoding).
FACADE=(
  engine/engine.h engine/engine_options.h engine/generation.h engine/batch_stats.h engine/model_report.h
  engine/sampler/logprobs.h
  engine/chat/chat_template.h engine/chat/chat_messages_json.h engine/chat/jinja.h engine/chat/tool_calls.h
  engine/grammar/grammar.h engine/grammar/json_schema.h
)

# Group and rank of an engine path (longest prefix first). engine/model/
# holds two layers: the vocabulary the architectures and layers share
# (hparams, tensor_loader, the tensor tables, routing) below them, and the
# Model above them.
engine_group() {
  case "$1" in
    engine/util/*) echo "util 0" ;;
    engine/engine_options.*) echo "options 0" ;;  # the option table: every layer may read it
    engine/gguf/*) echo "gguf 1" ;;
    engine/kernels/*) echo "kernels 2" ;;
    engine/tokenizer/*) echo "tokenizer 2" ;;
    engine/stream/*) echo "stream 2" ;;
    engine/sampler/*) echo "sampler 2" ;;
    engine/chat/*) echo "chat 2" ;;
    engine/grammar/*) echo "grammar 3" ;;
    engine/model/hparams.* | engine/model/tensor_loader.* | engine/model/tensor_table.*) echo "model-vocabulary 3" ;;
    engine/model/routing.* | engine/model/routing_spread.*) echo "model-vocabulary 3" ;;
    engine/forward_state.* | engine/sequence_state.* | engine/ops.* | engine/process_stats.*) echo "state 4" ;;
    engine/layers/*) echo "layers 5" ;;
    engine/arch/*) echo "arch 6" ;;
    engine/model/model.* | engine/model/weight_streaming.* | engine/model/fit_plan.*) echo "model 7" ;;
    engine/engine.* | engine/generation.h | engine/generation_batch.* | engine/batch_stats.h | engine/model_report.*)
      echo "facade 8" ;;
    engine/batch_sequence.* | engine/prefix_cache.* | engine/request_accounting.*)  # the step loop's units
      echo "facade 8" ;;
    *) echo "unknown -1" ;;
  esac
}

# Arrows that run up today, each with the work that removes it.
KNOWN=(
  # none: read_hparams (engine/arch) asks whether this build runs the
  # architecture before Hparams::from_gguf reads its keys.
)

declare -A GROUP  # engine_group's answers, by path

check_tree() {
  local root=$1 bad=0 file inc
  while IFS=: read -r file inc; do
    local why=""
    case "$file" in
      common/*) [[ $inc == common/* ]] || why="common/ includes nothing else of the project" ;;
      jobs/*) [[ $inc == common/* || $inc == jobs/* ]] || why="jobs/ includes only common/ (the engine's types it shares live there)" ;;
      daemon/*)
        if [[ $inc == engine/* ]]; then
          why="daemon/ reaches the engine only through its facade (engine/engine.h and the headers FACADE lists)"
          for f in "${FACADE[@]}"; do [[ $inc == "$f" ]] && why=""; done
        elif [[ $inc == tools/* ]]; then
          why="daemon/ does not include tools/"
        fi ;;
      engine/*)
        case "$inc" in
          jobs/* | daemon/* | tools/*) why="engine/ includes nothing of jobs/, daemon/ or tools/" ;;
          engine/*)
            local from to
            [[ -n ${GROUP[$file]:-} ]] || GROUP[$file]=$(engine_group "$file")
            [[ -n ${GROUP[$inc]:-} ]] || GROUP[$inc]=$(engine_group "$inc")
            read -r -a from <<<"${GROUP[$file]}"
            read -r -a to <<<"${GROUP[$inc]}"
            if [[ ${from[1]} -lt 0 ]]; then
              why="$file has no place in the engine's layers: add it to engine_group in tests/lint/check_includes.sh"
            elif [[ ${to[1]} -lt 0 ]]; then
              why="$inc has no place in the engine's layers: add it to engine_group in tests/lint/check_includes.sh"
            elif [[ ${from[0]} != "${to[0]}" && ${to[1]} -ge ${from[1]} ]]; then
              why="${from[0]} (rank ${from[1]}) may not include ${to[0]} (rank ${to[1]}): arrows point down (docs/architecture.md)"
            fi ;;
        esac ;;
    esac
    if [[ -n $why ]]; then
      for k in "${KNOWN[@]}"; do [[ "$file $inc" == "$k" ]] && why=""; done
    fi
    if [[ -n $why ]]; then
      echo "$file: #include \"$inc\": $why"
      bad=1
    fi
  done < <(cd "$root" && grep -rHoE --include='*.h' --include='*.cpp' '^#include "[^"]+"' common engine jobs daemon 2>/dev/null |
             sed -E 's/:#include "([^"]+)"$/:\1/')
  return $bad
}

self_test() {
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  mkdir -p "$tmp"/{common,jobs,daemon/lib,engine/kernels,engine/arch}
  echo '#include "common/error.h"' >"$tmp/jobs/ok.h"
  if ! check_tree "$tmp" >/dev/null; then echo "self-test: a clean tree failed"; return 1; fi
  local cases=(
    'common/a.h engine/engine.h'
    'jobs/a.h engine/sampler/sampler.h'
    'daemon/lib/a.cpp engine/model/model.h'
    'engine/kernels/a.cpp engine/arch/llama.h'
    'engine/arch/a.cpp jobs/queue.h'
  )
  for c in "${cases[@]}"; do
    read -r file inc <<<"$c"
    rm -f "$tmp"/common/* "$tmp"/jobs/a.h "$tmp"/daemon/lib/* "$tmp"/engine/kernels/* "$tmp"/engine/arch/*
    echo "#include \"$inc\"" >"$tmp/$file"
    if check_tree "$tmp" >/dev/null; then echo "self-test: $file including $inc passed the check"; return 1; fi
  done
}

source "$(dirname "$0")/lint_lib.sh"
lint_main "$@"
