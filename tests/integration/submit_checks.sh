# What `nightshift submit`, `list` and `show` refuse or guard against, found by
# trying hostile input: an idempotency key reused with other content.
source "$(dirname "$0")/lib.sh"

make_model tiny.gguf
write_config tiny=tiny.gguf

# --key names one request: the same request again returns the same job, the
# key with other text (or other sampling) is refused, naming the key and the job.
first=$(ns submit --config "$CONFIG" --model tiny --max-tokens 8 --key notes-0131 "the first text")
expect_exit 0 ns submit --config "$CONFIG" --model tiny --max-tokens 8 --key notes-0131 "the first text"
expect_contains "$OUT" "$first" "the same request under the same key returns the first job"
expect_exit 4 ns submit --config "$CONFIG" --model tiny --max-tokens 8 --key notes-0131 "other text"
expect_contains "$OUT" "key 'notes-0131' already names job $first (queued) with another prompt" \
  "a changed text under an old key is refused, naming the key and the job"
expect_exit 4 ns submit --config "$CONFIG" --model tiny --max-tokens 9 --key notes-0131 "the first text"
expect_contains "$OUT" "with another sampling (max_tokens)" "changed sampling under an old key"
printf 'one\ntwo\n' > "$WORK/lines.txt"
expect_exit 0 ns submit --config "$CONFIG" --model tiny --key lines-v1 --prompt-lines "$WORK/lines.txt"
printf 'one\nTWO\n' > "$WORK/lines.txt"
expect_exit 4 ns submit --config "$CONFIG" --model tiny --key lines-v1 --prompt-lines "$WORK/lines.txt"
expect_contains "$OUT" "key 'lines-v1:2' already names job" "--prompt-lines: the changed line is named"
expect_eq "$(sql "SELECT count(*) FROM jobs")" 3 "nothing queued for a refused key"

# A prompt holding terminal escapes: `list` never sends them raw, `show`
# escapes them on a terminal and writes the text as it is into a pipe.
esc=$(ns submit --config "$CONFIG" --model tiny $'clear \x1b[2J the screen and ring \x07 the bell')
listing=$(ns list --config "$CONFIG")
[[ "$listing" == *$'\x1b'* || "$listing" == *$'\x07'* ]] && fail "list printed raw control characters: $listing"
expect_contains "$listing" '> clear \x1b[2J the screen and ring \x07' "list shows the escapes as text"
piped=$(ns show "$esc" --config "$CONFIG")
expect_contains "$piped" $'clear \x1b[2J the screen' "show into a pipe keeps the prompt as it is"
if command -v script > /dev/null; then
  on_tty=$(script -qec "'$NIGHTSHIFT' show $esc --config '$CONFIG'" /dev/null)
  [[ "$on_tty" == *$'\x1b'* ]] && fail "show on a terminal printed a raw ESC: $on_tty"
  expect_contains "$on_tty" 'clear \x1b[2J the screen and ring \x07 the bell' "show on a terminal escapes"
else
  echo "script(1) not installed: show on a terminal not checked"
fi

# submit --dir does not follow symbolic links out of the folder (under the
# nightly service one could queue a config holding a database password):
# each is skipped with a warning naming it, unless --follow-symlinks.
mkdir -p "$WORK/docs" "$WORK/outside"
echo "a real note" > "$WORK/docs/note.md"
echo "database: postgresql://night:hunter2@db/q" > "$WORK/secret.txt"
ln -s "$WORK/secret.txt" "$WORK/docs/leak.txt"
echo "a document elsewhere" > "$WORK/outside/far.md"
ln -s "$WORK/outside" "$WORK/docs/linked"
expect_exit 0 ns submit --config "$CONFIG" --model tiny --dir "$WORK/docs" --batch docs
expect_contains "$OUT" "warning: $WORK/docs/leak.txt is a symbolic link to $WORK/secret.txt; skipped" \
  "a linked file is named and skipped"
expect_contains "$OUT" "warning: $WORK/docs/linked is a symbolic link to $WORK/outside; skipped" \
  "a linked folder is named and skipped"
expect_contains "$OUT" "1 documents in $WORK/docs, 1 new jobs" "only the real document is queued"
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE prompt LIKE '%hunter2%'")" 0 "the linked secret is not queued"
expect_exit 0 ns submit --config "$CONFIG" --model tiny --dir "$WORK/docs" --batch docs --follow-symlinks
expect_contains "$OUT" "3 documents in $WORK/docs, 2 new jobs" "--follow-symlinks queues what links point to"
expect_exit 2 ns submit --config "$CONFIG" --model tiny --follow-symlinks "no folder"

# A new database file is private (0600) whatever the umask; an existing one
# keeps the mode it was given (0640: group-readable by choice).
for mask in 022 000 077; do
  (umask "$mask" && "$NIGHTSHIFT" submit --db "$WORK/fresh-$mask.db" --model tiny "x" > /dev/null)
  expect_eq "$(stat -c %a "$WORK/fresh-$mask.db")" 600 "a database created under umask $mask"
done
: > "$WORK/shared.db"
chmod 0640 "$WORK/shared.db"
(umask 022 && "$NIGHTSHIFT" submit --db "$WORK/shared.db" --model tiny "x" > /dev/null)
expect_eq "$(stat -c %a "$WORK/shared.db")" 640 "an existing database keeps its mode"

# What submit can know it refuses, naming the limit (#31: these failed later in the daemon, or were cut):
# n above max_batch, a model file that is not there, a prompt plus max_tokens beyond the context.
make_model short.gguf --n-ctx 64
printf '%s\n' "database: q.db" "max_batch: 2" "models:" "  tiny: tiny.gguf" "  short: short.gguf" \
  "  gone: missing.gguf" > "$WORK/limits.yaml"
before=$(sql "SELECT count(*) FROM jobs")
expect_exit 4 ns submit --config "$WORK/limits.yaml" --model tiny --choices 3 "x"
expect_contains "$OUT" "n = 3 choices, but the daemon decodes at most max_batch = 2 sequences together" "n > max_batch"
expect_exit 4 ns submit --config "$WORK/limits.yaml" --model gone "x"
expect_contains "$OUT" "its file $WORK/missing.gguf (models.gone in $WORK/limits.yaml): No such file or directory" \
  "a model file that is not there"
expect_exit 4 ns submit --config "$WORK/limits.yaml" --model short --max-tokens 100 "Once upon a time"
expect_contains "$OUT" "and max_tokens (100) need" "max_tokens beyond the context"
expect_contains "$OUT" "but the context of model 'short' holds 64 (the model's own length): lower max_tokens to at most" \
  "the limit is named"
printf '%s\n' '{"custom_id": "long", "method": "POST", "url": "/v1/completions", "body": {"model": "short", "prompt": "Once", "max_tokens": 80}}' > "$WORK/long.jsonl"
expect_exit 4 ns submit --config "$WORK/limits.yaml" --jsonl "$WORK/long.jsonl"
expect_contains "$OUT" "line 1 (custom_id \"long\"): the prompt (" "a JSONL line too"
printf 'Once\n\nupon a time there was\n' > "$WORK/long-lines.txt"
expect_exit 4 ns submit --config "$WORK/limits.yaml" --model short --max-tokens 80 --prompt-lines "$WORK/long-lines.txt"
expect_contains "$OUT" "line 1: the prompt (" "--prompt-lines: each line against the context (#31: not checked)"
expect_contains "$OUT" "(and 1 more line); nothing was queued" "--prompt-lines: how many lines say so"
mkdir -p "$WORK/shortdocs" && echo "A document." > "$WORK/shortdocs/a.md"
expect_exit 4 ns submit --config "$WORK/limits.yaml" --model short --max-tokens 64 --dir "$WORK/shortdocs"
expect_contains "$OUT" "max_tokens 64 leaves no room for the document" "a document's max_tokens"
expect_exit 4 ns retry --config "$WORK/limits.yaml" "$first" --model gone
expect_eq "$(sql "SELECT count(*) FROM jobs")" "$before" "nothing refused was queued"
expect_exit 0 ns submit --config "$WORK/limits.yaml" --model short --max-tokens 20 "Once upon a time"
expect_exit 0 ns submit --config "$WORK/limits.yaml" --model gone --any-model "x"

# Exit codes as README states them: 2 usage, 3 a file that is not there, 4 invalid input.
expect_exit 2 ns frobnicate
expect_contains "$OUT" "unknown command 'frobnicate' (commands: run, " "an unknown command is named"
expect_exit 4 ns submit --config "$CONFIG" --model tiny ""
expect_contains "$OUT" "the prompt is empty" "an empty prompt is invalid input"
expect_exit 3 ns submit --config "$CONFIG" --model tiny --prompt-file "$WORK/no-such-file.txt"
expect_exit 3 ns submit --config "$CONFIG" --model tiny --jsonl "$WORK/no-such-file.jsonl"
# The seed is unsigned on every way in (the CLI once stored -1 as 2^64-1; JSONL refuses it).
expect_exit 2 ns submit --config "$CONFIG" --model tiny --seed -1 "x"
expect_contains "$OUT" "--seed: must be 0 or more" "a negative seed is refused"
expect_exit 0 ns --version
expect_contains "$OUT" "nightshift " "nightshift --version"
expect_exit 0 "$NIGHTSHIFTD" --version
expect_contains "$OUT" "nightshiftd " "nightshiftd --version (no --config needed)"
echo "ok"
