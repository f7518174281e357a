#!/usr/bin/env bash
# The tree's C++ style: clang-format-14 with the .clang-format at the root
# (the configuration the code already followed most closely: how it was
# chosen, docs/style.md). Usage:
#   tools/format.sh            reformat every tracked *.h / *.cpp in place
#   tools/format.sh --check    change nothing; exit 1 listing the files that would change
#   tools/format.sh [--check] FILE...   the same for these files only
# CLANG_FORMAT names another binary (the style is pinned to version 14's options).
set -euo pipefail
cd "$(dirname "$0")/.."
cf=${CLANG_FORMAT:-clang-format-14}
if ! command -v "$cf" >/dev/null; then
  echo "format.sh: $cf not found: apt-get install clang-format-14, or set CLANG_FORMAT" >&2
  exit 2
fi
check=0
if [[ ${1:-} == --check ]]; then
  check=1
  shift
fi
if [[ $# -gt 0 ]]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files '*.h' '*.cpp')
fi
if [[ $check -eq 0 ]]; then
  printf '%s\0' "${files[@]}" | xargs -0 "$cf" --style=file -i
  exit 0
fi
# --dry-run names each place to change as FILE:LINE:COL: warning: ... [-Wclang-format-violations].
mapfile -t bad < <(printf '%s\0' "${files[@]}" | xargs -0 "$cf" --style=file --dry-run 2>&1 |
                   sed -nE 's/^(.+):[0-9]+:[0-9]+: (warning|error): code should be clang-formatted.*/\1/p' | sort -u)
if [[ ${#bad[@]} -gt 0 ]]; then
  printf '%s\n' "${bad[@]}"
  echo "format.sh: ${#bad[@]} file(s) differ from .clang-format: run tools/format.sh" >&2
  exit 1
fi
