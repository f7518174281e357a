# migrate-queue --append from a copy of a source already copied (the file
# moved, or restored from a backup): the target's mark of that source is keyed
# by its path, so the copy used to be a new source and every job came twice.
# Now jobs the target already holds (same creation time and input) are
# skipped; a genuinely different source still appends, and jobs with the same
# prompts submitted apart are distinct jobs.
source "$(dirname "$0")/lib.sh"

SRC="$WORK/old.db"
for i in $(seq 1 12); do echo "prompt $i"; done > "$WORK/prompts.txt"
ns submit --db "$SRC" --model tiny --max-tokens 5 --prompt-lines "$WORK/prompts.txt" > /dev/null
ns submit --db "$DB" --model tiny "the target's own job" > /dev/null

ns migrate-queue --from "$SRC" --to "$DB" --append --page 5 > /dev/null
expect_eq "$(sql "SELECT count(*) FROM jobs")" 13 "the first --append"

cp "$SRC" "$WORK/copy-of-old.db"
expect_exit 0 ns migrate-queue --from "$WORK/copy-of-old.db" --to "$DB" --append --page 5
expect_contains "$OUT" "skipped 12 job(s) the target already held" "the rerun from the copy says why"
expect_eq "$(sql "SELECT count(*) FROM jobs")" 13 "the copy's jobs were not added again"
expect_eq "$(sql "SELECT count(DISTINCT prompt) FROM jobs")" 13 "every prompt once"

# The same prompts submitted again (another source, later): distinct jobs, appended.
ns submit --db "$WORK/other.db" --model tiny --max-tokens 5 --prompt-lines "$WORK/prompts.txt" > /dev/null
expect_exit 0 ns migrate-queue --from "$WORK/other.db" --to "$DB" --append --page 5
expect_eq "$(sql "SELECT count(*) FROM jobs")" 25 "a different source still appends"

# New jobs in the copied source come over; the old ones still do not.
ns submit --db "$WORK/copy-of-old.db" --model tiny "a job submitted to the copy" > /dev/null
expect_exit 0 ns migrate-queue --from "$WORK/copy-of-old.db" --to "$DB" --append --page 5
expect_eq "$(sql "SELECT count(*) FROM jobs")" 26 "only the copy's new job"
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE prompt = 'a job submitted to the copy'")" 1 "once"
echo "ok"
