# Issue #30 A on PostgreSQL: a --choices 3 job whose sampled text holds U+0000
# (a grammar forces a NUL byte into every choice) ends `done` with U+FFFD in
# its text and in its choices JSON (jsonb refuses \u0000: SQLSTATE 22P05), and
# the daemon goes on serving the next job. (Before: the daemon exited 1 at
# every attempt until the job was dead.) Skipped (exit 77) where the
# PostgreSQL server is not installed.
source "$(dirname "$0")/lib.sh"

start_pg_server || {
  echo "skipped: $PG_SKIP"
  exit 77
}
make_model tiny.gguf
write_config tiny=tiny.gguf
{ grep -v '^database:' "$CONFIG"; echo "database: \"$PG_URL\""; } > "$WORK/c.yaml"
mv "$WORK/c.yaml" "$CONFIG"
printf 'root ::= "a\\x00b" [a-z]*\n' > "$WORK/nul.gbnf"

nul=$(ns submit --config "$CONFIG" --model tiny --choices 3 --grammar "$WORK/nul.gbnf" --max-tokens 6 \
        --temperature 1 --seed 5 "Write it")
after=$(ns submit --config "$CONFIG" --model tiny --max-tokens 3 --ignore-eos "The next job")
start_daemon --drain
wait_daemon 0
expect_eq "$(pgq "SELECT state FROM jobs WHERE id = $nul")" done "the job whose choices hold a NUL"
expect_eq "$(pgq "SELECT state FROM jobs WHERE id = $after")" done "the job after it"
expect_eq "$(pgq "SELECT attempts FROM jobs WHERE id = $nul")" 1 "attempts"
text=$(pgq "SELECT text FROM results WHERE job_id = $nul")
[[ "$text" == $'a\uFFFDb'* ]] || fail "the text does not hold U+FFFD where the NUL was: $text"
pgq "SELECT choices::text FROM results WHERE job_id = $nul" > "$WORK/choices.json"
python3 - "$WORK/choices.json" << 'PY' || fail "the choices JSON: $(cat "$WORK/choices.json")"
import json, sys
raw = open(sys.argv[1], encoding="utf-8").read()
assert "\\u0000" not in raw, "a \\u0000 escape is stored"
texts = [c["text"] for c in json.loads(raw)]
assert len(texts) >= 2 and all(t.startswith("a\ufffdb") for t in texts), texts
PY
[[ "$(cat "$WORK/daemon.log")" != *"[critical]"* ]] || fail "the daemon logged a critical error"
echo "ok"
