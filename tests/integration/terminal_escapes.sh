# Issue #30 M: terminal controls from the queue (a row written by another
# client, a hostile JSONL line) reach no terminal raw: `list` (the model
# column), `status` and `watch` (batch and model names, C1 U+009B in a
# prompt) and `submit`'s rejections (a NUL in a custom_id) show them as
# "\x1b"-style text. (Before: ESC, BEL and C2 9B were printed as they are.)
source "$(dirname "$0")/lib.sh"

# No raw C0 control but newline and tab, no DEL, no C1 (UTF-8 C2 80..9F) in TEXT.
expect_no_controls() {  # expect_no_controls TEXT WHAT
  if printf '%s' "$1" | LC_ALL=C grep -qP '[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]'; then
    fail "$2 prints a raw terminal control: $(printf '%s' "$1" | od -c | head -20)"
  fi
}

id=$(ns submit --db "$DB" --model tiny --max-tokens 2 "a prompt")
sql "UPDATE jobs SET model = 'ti' || char(27) || '[2Jny', batch = 'b' || char(27) || ']0;owned' || char(7),
     prompt = 'p' || char(155) || '31m red' WHERE id = $id"

expect_exit 0 ns list --db "$DB"
expect_no_controls "$OUT" "list"
expect_contains "$OUT" 'ti\x1b[2Jny' "list shows the model's ESC as text"

expect_exit 0 ns status --db "$DB"
expect_no_controls "$OUT" "status"
expect_contains "$OUT" 'b\x1b]0;owned\x07' "status shows the batch's controls as text"

# watch: until nothing is queued (the job cancelled first).
expect_exit 0 ns cancel --db "$DB" "$id"
expect_exit 0 ns watch --db "$DB" --plain --until-done --interval 0.05
expect_no_controls "$OUT" "watch"

# submit: a JSONL line whose custom_id holds a NUL and an ESC is refused, its message escaped.
line='{"custom_id": "a\u0000b\u001b[31m", "method": "POST", "url": "/v1/completions", "body": {"model": "tiny", '
printf '%s\n' "$line\"prompt\": \"x\"}}" "$line\"prompt\": \"y\"}}" > "$WORK/evil.jsonl"
status=0
OUT=$(ns submit --db "$DB" --jsonl "$WORK/evil.jsonl" 2>&1) || status=$?
[[ "$status" != 0 ]] || fail "a JSONL file with a duplicated custom_id was queued: $OUT"
expect_no_controls "$OUT" "submit's rejection"
expect_contains "$OUT" 'a\x00b\x1b[31m' "submit's rejection shows the custom_id's NUL and ESC as text"
echo "ok"
