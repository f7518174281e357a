#!/usr/bin/env bash
# nightly-submit: queues one continuation job per document in a folder, for
# nightshift-nightly.service, with `nightshift submit --dir`. Each job is keyed
# by the document's path and content, so running it again (the same night, or
# the next night for documents that did not change) queues nothing twice,
# while an edited document gets a new job. Documents in sub-folders count;
# hidden files and the *.continued.* files `nightshift export --dir` writes
# do not.
#
#   NIGHTSHIFT_DOCS=/srv/docs NIGHTSHIFT_MODEL=mixtral nightly-submit --config /etc/nightshift/config.yaml
#
# Environment: NIGHTSHIFT_DOCS (folder, required), NIGHTSHIFT_MODEL (required),
# NIGHTSHIFT_GLOB (default "*.txt *.md"), NIGHTSHIFT_MAX_TOKENS (default 400),
# NIGHTSHIFT_BATCH (default "nightly": the batch every night adds to, which
# `nightshift export --dir OUT --batch nightly` writes out), NIGHTSHIFT_BIN
# (default: nightshift on the PATH). Arguments go to `nightshift submit`
# (--config FILE or --db FILE, or more flags such as --temperature 0.7).
# Exit status: 0 when every document was queued (or already was), 1 otherwise.
set -uo pipefail

docs=${NIGHTSHIFT_DOCS:?set NIGHTSHIFT_DOCS to the folder of documents}
model=${NIGHTSHIFT_MODEL:?set NIGHTSHIFT_MODEL to a model name from the config}
globs=${NIGHTSHIFT_GLOB:-"*.txt *.md"}
max_tokens=${NIGHTSHIFT_MAX_TOKENS:-400}
batch=${NIGHTSHIFT_BATCH:-nightly}
bin=${NIGHTSHIFT_BIN:-nightshift}

read -ra patterns <<< "$globs"  # split on spaces without expanding them here
glob_args=()
for pattern in "${patterns[@]}"; do glob_args+=(--glob "$pattern"); done

# --json: one report object; its counts are read with bash alone (no jq on a server).
out=$("$bin" submit "$@" --dir "$docs" "${glob_args[@]}" --batch "$batch" --model "$model" \
      --max-tokens "$max_tokens" --json)
status=$?
count() { [[ "$out" =~ \"$1\":([0-9]+) ]] && echo "${BASH_REMATCH[1]}" || echo 0; }
found=$(count documents) queued=$(count new_jobs) failed=$(count not_queued)
if ((status != 0 && status != 4)); then
  echo "nightly-submit: nightshift submit failed (exit status $status); nothing was queued" >&2
  exit 1
fi
echo "nightly-submit: $found document(s) in $docs, $queued new job(s), $failed failure(s)"
((status == 0 && failed == 0))
