# A model file truncated under a running job (#30 F): before, the next read of
# the mapping raised SIGBUS and the daemon died with no log line. Now the
# daemon names the file, discards that pass, puts the job back queued with no
# attempt charged, holds the model while the file is incomplete, and serves
# it again once the file is whole: the text equals an uninterrupted run's.
source "$(dirname "$0")/lib.sh"

slow_model_config slow
cp "$WORK/slow.gguf" "$WORK/whole.gguf"
prompt="Cut under it"
job=$(ns submit --config "$CONFIG" --model slow --max-tokens 1000 --ignore-eos --temperature 0 "$prompt")
start_daemon
wait_for 30 "job $job to run" state_is "$job" running
truncate -s 1M "$WORK/slow.gguf"
wait_for 30 "the daemon to name the file" grep -q "SIGBUS reading the model file $WORK/slow.gguf" "$WORK/daemon.log"
wait_for 30 "the model to be held" grep -q "CANNOT SERVE MODEL slow: its file $WORK/slow.gguf was truncated" \
  "$WORK/daemon.log"
wait_for 30 "the incomplete file to be refused at load" grep -q "incomplete GGUF" "$WORK/daemon.log"
kill -0 "$DAEMON_PID" || fail "the daemon died"
expect_eq "$(sql "SELECT state || ':' || attempts FROM jobs WHERE id = $job")" "queued:0" "held, no attempt charged"
expect_eq "$(sql "SELECT count(*) FROM results")" 0 "no result from the damaged pass"

# The whole file back (a rename, as a careful copy ends): served again.
cp "$WORK/whole.gguf" "$WORK/slow.gguf.part"
mv "$WORK/slow.gguf.part" "$WORK/slow.gguf"
wait_for 60 "job $job to finish" state_is "$job" done
kill -TERM "$DAEMON_PID"
wait_daemon 0
alone=$(ns run --model "$WORK/whole.gguf" --threads 2 --max-tokens 1000 --ignore-eos --temperature 0 --no-progress \
          "$prompt" 2> /dev/null | valid_utf8)
expect_eq "$(sql "SELECT text FROM results WHERE job_id = $job")" "$alone" "the text equals an uninterrupted run's"
echo ok
