# Issue #30 B and N1: `export --dir` never writes through a planted symbolic
# link and writes its files 0600 whatever the umask. Links planted for the
# temporary names an export used to take (<name>.tmp-<pid>, for the next
# 2000 pids), at the final name, and in place of a subfolder leave their
# victims untouched; the exports are regular files, mode 0600 under umask 000.
# (Before the fix: O_CREAT|O_TRUNC on <name>.tmp-<pid> overwrote the victim
# with a continuation, and the exports were 0666 under umask 000.)
source "$(dirname "$0")/lib.sh"

make_model tiny.gguf
write_config tiny=tiny.gguf
docs="$WORK/notes" out="$WORK/continued"
mkdir -p "$docs/chapters" "$out" "$WORK/elsewhere"
printf 'The rain had not stopped' > "$docs/one.md"
printf 'Chapter two began' > "$docs/chapters/two.md"
expect_exit 0 ns submit --config "$CONFIG" --model tiny --max-tokens 4 --ignore-eos --dir "$docs"
start_daemon --drain
wait_daemon 0

printf 'VICTIM\n' > "$WORK/victim.db"
chmod 600 "$WORK/victim.db"
last=$(cat /proc/sys/kernel/ns_last_pid)
python3 -c 'import os, sys
for pid in range(int(sys.argv[1]) + 1, int(sys.argv[1]) + 2001): os.symlink(sys.argv[2], sys.argv[3] + f".tmp-{pid}")' \
  "$last" "$WORK/victim.db" "$out/one.continued.md"
ln -s "$WORK/victim.db" "$out/one.continued.md"  # the final name: replaced, not written through
ln -s "$WORK/elsewhere" "$out/chapters"           # a subfolder swapped for a link: refused

status=0
OUT=$(umask 000 && "$NIGHTSHIFT" export --config "$CONFIG" --dir "$out" 2>&1) || status=$?
expect_eq "$(cat "$WORK/victim.db")" "VICTIM" "the victim behind the planted links"
expect_eq "$(ls -A "$WORK/elsewhere")" "" "the folder behind the planted subfolder link"
[[ -f "$out/one.continued.md" && ! -L "$out/one.continued.md" ]] || fail "one.continued.md is not a regular file"
expect_eq "$(stat -c %a "$out/one.continued.md")" 600 "the export's mode under umask 000"
expect_eq "$(cat "$out/one.continued.md")" "$(sql "SELECT text FROM results r JOIN jobs j ON j.id = r.job_id
  WHERE j.custom_id LIKE 'one.md@%'")" "the export is the result"
[[ "$status" != 0 ]] || fail "the export into a linked subfolder was not reported: $OUT"
expect_contains "$OUT" "chapters" "the refusal names the linked subfolder"
expect_eq "$(find "$out" -name '.*tmp-*' | wc -l)" 0 "no temporary file left behind"

# Without planted links: every export 0600 under umask 000 (N1).
rm -rf "$out"
expect_exit 0 bash -c 'umask 000 && "$1" export --config "$2" --dir "$3"' _ "$NIGHTSHIFT" "$CONFIG" "$out"
expect_eq "$(find "$out" -type f ! -perm 600 | wc -l)" 0 "exports not 0600 under umask 000: $(ls -lR "$out")"
expect_eq "$(find "$out" -type f | wc -l)" 2 "both documents exported"
echo "ok"
