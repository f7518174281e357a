# A daemon loads a job's model before it claims the job (#30 G, K): killed
# during the load, it leaves the job queued with no attempt spent (before: three
# kills before "loaded" left a job dead with 0 tokens computed), and a load
# longer than lease_ms cannot expire a lease it does not hold yet.
source "$(dirname "$0")/lib.sh"

# Large enough that its load (read, repack, plan) takes a while next to the kill.
make_model big.gguf --n-embd 768 --n-layer 24 --n-ff 3072
write_config big=big.gguf
echo "lease_ms: 300" >> "$CONFIG"
job=$(ns submit --config "$CONFIG" --model big --max-tokens 4 "Loaded first")

# Kill -9 right after "loading model"; a trial whose kill landed after the load ended does not count.
landed=0
for ((t = 1; t <= 10 && landed < 3; t++)); do
  start_daemon
  wait_for 30 "the daemon to start loading" grep -q "loading model big" "$WORK/daemon.log"
  kill -KILL "$DAEMON_PID"
  wait "$DAEMON_PID" 2> /dev/null || true
  DAEMON_PID=""
  grep -q "model big loaded" "$WORK/daemon.log" && continue
  landed=$((landed + 1))
  expect_eq "$(sql "SELECT state || ':' || attempts FROM jobs WHERE id = $job")" "queued:0" \
    "trial $t: a kill during the load spends no attempt"
done
((landed >= 1)) || fail "no kill landed during the load in 10 trials (the model loads too fast for this test)"
expect_eq "$(sql "SELECT count(*) FROM attempts WHERE job_id = $job")" 0 "no attempt recorded"

# The load (longer than this config's 300 ms lease on a loaded machine) holds no lease: the job runs once.
start_daemon --drain
wait_daemon 0
expect_eq "$(sql "SELECT state || ':' || attempts FROM jobs WHERE id = $job")" "done:1" "the job ran once"
echo "ok ($landed kill(s) during the load)"
