# What the tree checks in tests/lint share (sourced). A check defines
# check_tree ROOT (exit 1 listing what breaks its rule) and self_test (exit 1
# when a tree that breaks the rule passes), then calls lint_main "$@":
# [--self-test] [ROOT], ROOT defaulting to the checkout the script is in.

lint_main() {
  if [[ ${1:-} == --self-test ]]; then
    shift
    (self_test)  # in a subshell: its cleanup trap stays there
  fi
  check_tree "${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
}
