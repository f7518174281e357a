# Two nightshiftd processes on one database, with jobs still being submitted
# while they work: every job runs exactly once (one claim, one attempt row,
# one result), none is lost.
source "$(dirname "$0")/lib.sh"

make_model tiny.gguf
write_config tiny=tiny.gguf
echo "lease_ms: 2000" >> "$CONFIG"
sed 's/^database: q.db$/database: q.db\nworker_id: night-a/' "$CONFIG" > "$WORK/a.yaml"
sed 's/^database: q.db$/database: q.db\nworker_id: night-b/' "$CONFIG" > "$WORK/b.yaml"

for i in $(seq 1 20); do echo "Prompt number $i about the sea"; done > "$WORK/first.txt"
for i in $(seq 21 40); do echo "Prompt number $i about the hills"; done > "$WORK/second.txt"
ns submit --config "$CONFIG" --model tiny --max-tokens 6 --ignore-eos --prompt-lines "$WORK/first.txt" > /dev/null

"$NIGHTSHIFTD" --config "$WORK/a.yaml" > "$WORK/daemon-a.log" 2>&1 &
a=$!
"$NIGHTSHIFTD" --config "$WORK/b.yaml" > "$WORK/daemon-b.log" 2>&1 &
b=$!
EXTRA_PIDS+=("$a" "$b")
ns submit --config "$CONFIG" --model tiny --max-tokens 6 --ignore-eos --prompt-lines "$WORK/second.txt" > /dev/null
all_done() { [[ "$(sql "SELECT count(*) FROM jobs WHERE state = 'done'")" == 40 ]]; }
wait_for 30 "all 40 jobs to be done" all_done
kill -TERM "$a" "$b"
wait_pid "$a" 0
wait_pid "$b" 0

expect_eq "$(sql "SELECT count(*) FROM jobs WHERE attempts = 1 AND attempt = 1")" 40 "one claim per job"
expect_eq "$(sql "SELECT count(*) FROM attempts")" 40 "one attempt row per job"
expect_eq "$(sql "SELECT count(*) FROM attempts WHERE outcome = 'done'")" 40 "every attempt done"
expect_eq "$(sql "SELECT count(*) FROM results")" 40 "one result per job"
expect_eq "$(sql "SELECT count(*) FROM jobs j JOIN attempts a ON a.job_id = j.id WHERE a.worker <> j.worker")" 0 \
  "the attempt and the job name the same worker"
ran_a=$(grep -c "running: model tiny" "$WORK/daemon-a.log" || true)
ran_b=$(grep -c "running: model tiny" "$WORK/daemon-b.log" || true)
expect_eq "$((ran_a + ran_b))" 40 "claims logged by the two daemons"
# No job id appears in both logs.
dupes=$(cat "$WORK/daemon-a.log" "$WORK/daemon-b.log" | grep -o "job [0-9]* running" | sort | uniq -d | wc -l)
expect_eq "$dupes" 0 "jobs run by both daemons"
echo "daemon-a ran $ran_a jobs, daemon-b ran $ran_b"
echo "ok"
