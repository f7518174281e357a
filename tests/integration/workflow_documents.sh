# The folder workflow with the real binaries (docs/nightly-continuation.md):
# `submit --dir` twice queues each document once; an edited document gets one
# new job; `nightshiftd --drain` runs them; `export --dir` writes each
# continuation under OUT with the document's relative path (name.continued.ext),
# equal to the result in the database; a second export rewrites nothing; an
# export into the documents' folder is not taken for documents next time.
source "$(dirname "$0")/lib.sh"

make_model tiny.gguf
write_config tiny=tiny.gguf
docs="$WORK/notes" out="$WORK/continued"
mkdir -p "$docs/chapters" "$docs/.drafts"
printf 'Chapter one. The rain had not stopped' > "$docs/chapters/one.md"
printf '# Notes\nThe meeting ran late' > "$docs/two.md"
printf 'Plain text, too.' > "$docs/three.txt"
printf 'not a document' > "$docs/skip.pdf"
printf 'hidden draft' > "$docs/.drafts/secret.md"
printf '' > "$docs/empty.md"

submit_docs() { ns submit --config "$CONFIG" --model tiny --max-tokens 5 --ignore-eos --dir "$docs" "$@"; }

# The empty document is a warning, not a failure (#31: the nightly unit failed every night); the others are queued.
expect_exit 0 submit_docs
expect_contains "$OUT" "warning: $docs/empty.md not queued: it is empty (queued once it has text)" \
  "an empty document is reported"
expect_contains "$OUT" "batch notes: 4 documents in $docs, 3 new jobs, 0 already in the batch, 1 not queued" "first run"
expect_contains "$OUT" "queued chapters/one.md as job" "new jobs are listed"
rm "$docs/empty.md"
expect_exit 0 submit_docs
expect_contains "$OUT" "3 documents in $docs, 0 new jobs, 3 already in the batch (3 queued), 0 not queued" "a rerun queues nothing"
expect_eq "$(sql "SELECT count(*) FROM jobs")" 3 "one job per document"
expect_eq "$(sql "SELECT group_concat(custom_id, ' ') FROM (SELECT custom_id FROM jobs ORDER BY id)")" \
  "chapters/one.md@$(printf 'Chapter one. The rain had not stopped' | sha256sum | cut -c1-16) three.txt@$(printf 'Plain text, too.' | sha256sum | cut -c1-16) two.md@$(printf '# Notes\nThe meeting ran late' | sha256sum | cut -c1-16)" \
  "custom ids: relative path @ content hash"
expect_eq "$(sql "SELECT prompt FROM jobs WHERE custom_id LIKE 'two.md@%'")" "$(printf '# Notes\nThe meeting ran late')" \
  "the prompt is the document"
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE batch = 'notes' AND source_path LIKE '$docs/%' AND source_line IS NULL")" 3 \
  "batch named after the folder; source paths"
# --glob narrows; a glob that matches nothing is not an error.
expect_exit 0 submit_docs --glob '*.txt'
expect_contains "$OUT" "1 documents in $docs, 0 new jobs, 1 already in the batch (1 queued)" "--glob"

# An edited document: one new job, the old one stays.
printf ' It stopped at dawn.' >> "$docs/two.md"
expect_exit 0 submit_docs
expect_contains "$OUT" "1 new jobs, 2 already in the batch (2 queued)" "an edited document is queued again"
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE custom_id LIKE 'two.md@%'")" 2 "both versions"

ns export --config "$CONFIG" --dir "$out" > "$WORK/early.txt"
expect_contains "$(cat "$WORK/early.txt")" "0 written, 0 unchanged, 0 failed, 3 not finished yet, 1 older versions skipped" \
  "export before the daemon ran"

start_daemon --drain
wait_daemon 0
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE state = 'done'")" 4 "the daemon ran them all"

ns export --config "$CONFIG" --dir "$out" > "$WORK/export.txt"
expect_contains "$(cat "$WORK/export.txt")" "documents: 3 written, 0 unchanged, 0 failed, 0 not finished yet, 1 older versions skipped" \
  "export summary"
for pair in "chapters/one.md:chapters/one.continued.md" "two.md:two.continued.md" "three.txt:three.continued.txt"; do
  src=${pair%%:*} dst=${pair#*:}
  [[ -f "$out/$dst" ]] || fail "export did not write $out/$dst"
  expect_contains "$(cat "$WORK/export.txt")" "wrote $out/$dst" "export lists $dst"
  # The newest job of the document (the edited two.md's second one) holds what was written.
  expected_hex=$(sql "SELECT hex(r.text) FROM jobs j JOIN results r ON r.job_id = j.id
                      WHERE j.custom_id LIKE '$src@%' ORDER BY j.id DESC LIMIT 1")
  [[ -n "$expected_hex" ]] || fail "no result for $src"
  expect_eq "$(od -An -tx1 -v "$out/$dst" | tr -d ' \n' | tr a-f A-F)" "$expected_hex" "$dst holds the continuation"
done
[[ ! -e "$out/skip.continued.pdf" && ! -e "$out/.drafts" ]] || fail "export wrote files for non-documents"

# Again: nothing rewritten (same text), file times unchanged.
before=$(stat -c %Y.%s "$out/two.continued.md")
sleep 1.1
ns export --config "$CONFIG" --dir "$out" --batch notes > "$WORK/again.txt"
expect_contains "$(cat "$WORK/again.txt")" "batch notes: 0 written, 3 unchanged" "a second export"
expect_eq "$(stat -c %Y.%s "$out/two.continued.md")" "$before" "unchanged files are not rewritten"

# --with-document: the document followed by its continuation.
ns export --config "$CONFIG" --dir "$WORK/whole" --with-document > /dev/null
expect_eq "$(od -An -tx1 -v "$WORK/whole/three.continued.txt" | tr -d ' \n' | tr a-f A-F)" \
  "$(sql "SELECT hex(j.prompt || r.text) FROM jobs j JOIN results r ON r.job_id = j.id WHERE j.custom_id LIKE 'three.txt@%'")" \
  "--with-document"

# Exporting into the documents' folder itself: the next evening's run does not take them for documents.
ns export --config "$CONFIG" --dir "$docs" > /dev/null
[[ -f "$docs/chapters/one.continued.md" ]] || fail "export into the documents' folder"
expect_exit 0 submit_docs
expect_contains "$OUT" "3 documents in $docs, 0 new jobs, 3 already in the batch (3 done)" "exported files are not documents"

expect_exit 3 ns export --config "$CONFIG" --dir "$out" --batch nope

# A document whose job did not finish well: the others are written, and the exit status says one is missing.
mkdir -p "$WORK/late"
echo "A chapter that is cancelled." > "$WORK/late/gone.md"
echo "A chapter that is fine." > "$WORK/late/kept.md"
ns submit --config "$CONFIG" --model tiny --max-tokens 3 --ignore-eos --dir "$WORK/late" --batch late > /dev/null
ns cancel --config "$CONFIG" "$(sql "SELECT id FROM jobs WHERE batch = 'late' AND custom_id LIKE 'gone.md@%'")" > /dev/null
"$NIGHTSHIFTD" --config "$CONFIG" --drain > "$WORK/late.log" 2>&1 || fail "the drain failed"
expect_exit 1 ns export --config "$CONFIG" --dir "$WORK/late-out" --batch late
expect_contains "$OUT" "batch late: 1 written, 0 unchanged, 1 failed" "the export's count"
expect_contains "$OUT" "1 document(s) failed and have no continuation" "the failure is the exit status too"
[[ -f "$WORK/late-out/kept.continued.md" ]] || fail "the finished document was not written"
expect_exit 3 ns submit --config "$CONFIG" --model tiny --dir "$WORK/no-such-folder"
expect_contains "$OUT" "no-such-folder: No such file or directory" "a missing folder (not found, exit 3)"
echo "ok"
