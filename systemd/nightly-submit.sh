#!/usr/bin/env bash
# nightly-submit: queues one continuation job per document in a folder, for
# nightshift-nightly.service. Each job's idempotency key is a hash of the
# document's content, so running it again (the same night, or the next night
# for documents that did not change) queues nothing twice, while an edited
# document gets a new job.
#
#   NIGHTSHIFT_DOCS=/srv/docs NIGHTSHIFT_MODEL=mixtral nightly-submit --config /etc/nightshift/config.yaml
#
# Environment: NIGHTSHIFT_DOCS (folder, required), NIGHTSHIFT_MODEL (required),
# NIGHTSHIFT_GLOB (default "*.txt *.md"), NIGHTSHIFT_MAX_TOKENS (default 400),
# NIGHTSHIFT_BIN (default: nightshift on the PATH). Arguments go to
# `nightshift submit` (--config FILE or --db FILE).
# Exit status: 0 when every document was queued (or already was), 1 otherwise.
set -uo pipefail

docs=${NIGHTSHIFT_DOCS:?set NIGHTSHIFT_DOCS to the folder of documents}
model=${NIGHTSHIFT_MODEL:?set NIGHTSHIFT_MODEL to a model name from the config}
globs=${NIGHTSHIFT_GLOB:-"*.txt *.md"}
max_tokens=${NIGHTSHIFT_MAX_TOKENS:-400}
bin=${NIGHTSHIFT_BIN:-nightshift}

read -ra patterns <<< "$globs"  # split on spaces without expanding them here
shopt -s nullglob
found=0 queued=0 failed=0
for pattern in "${patterns[@]}"; do
  for doc in "$docs"/$pattern; do
    [[ -f "$doc" ]] || continue
    found=$((found + 1))
    key="nightly:$(basename "$doc"):$(sha256sum < "$doc" | cut -c1-16)"
    if out=$("$bin" submit "$@" --model "$model" --max-tokens "$max_tokens" --prompt-file "$doc" --key "$key" --json); then
      [[ "$out" == *'"created":true'* ]] && queued=$((queued + 1))
    else
      echo "nightly-submit: $doc was not queued" >&2
      failed=$((failed + 1))
    fi
  done
done
echo "nightly-submit: $found document(s) in $docs, $queued new job(s), $failed failure(s)"
((failed == 0))
