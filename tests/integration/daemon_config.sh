# A mistake in the daemon's own configuration never fails users' jobs: a job
# for a model the config does not name (a typo in the nightly timer), or a
# memory_budget too small to load the model, stays queued with its attempt
# not counted; the daemon says so in its log and in `nightshift status`,
# backs off instead of re-claiming the job hot, keeps serving the other
# models, and runs the job once the config is fixed and reloaded.
source "$(dirname "$0")/lib.sh"

make_model tiny.gguf
write_config tiny=tiny.gguf
echo "worker_id: night-1" >> "$CONFIG"

# Refused at submit when --config is given (the evening catches the typo) ...
expect_exit 4 ns submit --config "$CONFIG" --model tinny --max-tokens 3 "a typo in the model name"
expect_contains "$OUT" "model 'tinny' is not under models: in $CONFIG (tiny); did you mean 'tiny'?" "submit checks the name"
# ... and left queued by the daemon when it gets through anyway (another config, --any-model).
typo=$(ns submit --config "$CONFIG" --model tinny --any-model --max-tokens 3 --ignore-eos --priority 5 "a typo in the model name")
good=$(ns submit --config "$CONFIG" --model tiny --max-tokens 3 --ignore-eos "a job the daemon can run")
start_daemon
wait_for 20 "job $good (behind the unservable one)" state_is "$good" done
# The backoff (at least 1 s, doubling): 4 refusals take ~3 s; a hot loop would make thousands.
refusals() { grep -c "THIS DAEMON CANNOT SERVE MODEL tinny" "$WORK/daemon.log" || true; }
wait_for 20 "the daemon to back off from model tinny 4 times" bash -c "(( \$(grep -c 'THIS DAEMON CANNOT SERVE MODEL tinny' '$WORK/daemon.log') >= 4 ))"
claims=$(sql "SELECT count(*) FROM attempts WHERE job_id = $typo")
((claims <= 6)) || fail "job $typo was claimed $claims times after 4 refusals: not backing off"
expect_eq "$(sql "SELECT state || ',' || attempts FROM jobs WHERE id = $typo")" "queued,0" \
  "a job for a model the config lacks stays queued, attempts not counted"
expect_eq "$(sql "SELECT DISTINCT outcome || ',' || error_kind FROM attempts WHERE job_id = $typo")" \
  "released,daemon_config" "its attempts say why"
expect_contains "$(cat "$WORK/daemon.log")" "model 'tinny' is not in the daemon's config (known models: tiny)" \
  "the log names the missing model"
status_says() { [[ "$(ns status --config "$CONFIG")" == *"$1"* ]]; }
wait_for 10 "status to show the reason" status_says "CANNOT SERVE: model tinny: model 'tinny' is not in the daemon's config"
expect_contains "$(ns status --config "$CONFIG" --json)" "\"problem\": \"model tinny: model 'tinny' is not in the daemon's config" \
  "status --json names the problem"
# The job itself says it is held, and why, wherever it is listed (issue 31).
expect_contains "$(ns status --config "$CONFIG")" \
  "held: 1 job(s) left queued by a daemon that cannot serve their model: model 'tinny' is not in the daemon's config" \
  "status: the held job's reason"
expect_contains "$(ns status --config "$CONFIG" --json)" '"held": 1' "status --json counts the held job"
expect_contains "$(ns list --config "$CONFIG" --state queued)" "held: model 'tinny' is not in the daemon's config" \
  "list: the held job"
expect_contains "$(ns show --config "$CONFIG" --json "$typo")" "\"held\": \"model 'tinny' is not in the daemon's config" \
  "show --json: the held reason"
expect_contains "$(sql "SELECT held FROM job_summary WHERE id = $typo")" "model 'tinny' is not in the daemon's config" \
  "job_summary.held"

# The fix: the name added to the config, reloaded.
write_config tiny=tiny.gguf tinny=tiny.gguf
echo "worker_id: night-1" >> "$CONFIG"
kill -HUP "$DAEMON_PID"
wait_for 20 "job $typo after the reload" state_is "$typo" done
expect_eq "$(sql "SELECT attempts FROM jobs WHERE id = $typo")" 1 "one counted attempt: the one that ran"
wait_for 10 "status to drop the problem" bash -c "! '$NIGHTSHIFT' status --config '$CONFIG' | grep -q 'CANNOT SERVE'"
kill -TERM "$DAEMON_PID"
wait_daemon 0

# A memory_budget too small to load the model: the same, for a model that is configured.
echo "memory_budget: 1MiB" >> "$CONFIG"
small=$(ns submit --config "$CONFIG" --model tiny --max-tokens 3 --ignore-eos "under a budget too small")
start_daemon
wait_for 20 "the budget to be refused" grep -q "THIS DAEMON CANNOT SERVE MODEL tiny: this daemon's configuration cannot load model 'tiny': memory_budget 1.00 MiB is too small" "$WORK/daemon.log"
expect_eq "$(sql "SELECT state || ',' || attempts FROM jobs WHERE id = $small")" "queued,0" \
  "a job the budget cannot run stays queued"
wait_for 10 "status to show the budget problem" status_says "CANNOT SERVE: model tiny: this daemon's configuration cannot load model 'tiny'"
sed -i '/^memory_budget:/d' "$CONFIG"
kill -HUP "$DAEMON_PID"
wait_for 20 "job $small after the budget is fixed" state_is "$small" done
kill -TERM "$DAEMON_PID"
wait_daemon 0
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE state IN ('failed', 'dead')")" 0 "no user's job failed"
echo "ok"
