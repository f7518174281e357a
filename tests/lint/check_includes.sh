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
#   lower one (engine_group below, lowest first), never a higher group or a
#   sibling. A new engine folder must be given its place here.
set -euo pipefail

# The engine's doors for daemon/: the facade and its value types, and the
# leaf modules the CLI uses at submit time (chat rendering, JSON schema to
# grammar, the logprobs encoding).
FACADE=(
  engine/engine.h engine/model_report.h engine/api/engine_options.h engine/api/generation.h engine/api/batch_stats.h
  engine/sampler/logprobs.h
  engine/chat/chat_template.h engine/chat/chat_messages_json.h engine/chat/jinja.h engine/chat/tool_calls.h
  engine/grammar/grammar.h engine/grammar/json_schema.h
)

# Group and rank of an engine path: its folder is its layer (lowest first);
# the files at engine/'s root are the facade, on top.
engine_group() {
  case "$1" in
    engine/util/*) echo "util 0" ;;
    engine/gguf/*) echo "gguf 1" ;;
    engine/kernels/*) echo "kernels 2" ;;
    engine/tokenizer/*) echo "tokenizer 2" ;;
    engine/stream/*) echo "stream 2" ;;
    engine/sampler/*) echo "sampler 2" ;;
    engine/chat/*) echo "chat 2" ;;
    engine/grammar/*) echo "grammar 3" ;;
    engine/api/*) echo "api 3" ;;      # the facade's value types: options, requests, stats
    engine/spec/*) echo "spec 3" ;;    # what a file says: hparams, tensor tables, routing
    engine/state/*) echo "state 4" ;;  # per-pass and per-sequence state, the ops on it
    engine/layers/*) echo "layers 5" ;;
    engine/arch/*) echo "arch 6" ;;
    engine/model/*) echo "model 7" ;;  # the loaded model, weight streaming, the fit plan
    engine/batch/*) echo "batch 8" ;;  # the step loop and its units
    engine/*/*) echo "unknown -1" ;;
    engine/*) echo "facade 9" ;;
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
    'engine/spec/a.h engine/state/ops.h'
    'engine/batch/a.cpp engine/engine.h'
    'engine/api/a.h engine/spec/hparams.h'
    'engine/newfolder/a.h engine/util/thread_pool.h'
  )
  for c in "${cases[@]}"; do
    read -r file inc <<<"$c"
    rm -rf "$tmp"/common/* "$tmp"/jobs/a.h "$tmp"/daemon/lib/* "$tmp"/engine/*
    mkdir -p "$(dirname "$tmp/$file")"
    echo "#include \"$inc\"" >"$tmp/$file"
    if check_tree "$tmp" >/dev/null; then echo "self-test: $file including $inc passed the check"; return 1; fi
  done
}

source "$(dirname "$0")/lint_lib.sh"
lint_main "$@"
