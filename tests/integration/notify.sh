# Type=notify as systemd sees it: READY=1 once the queue is open, STATUS= with
# the queue and the running job, WATCHDOG=1 keep-alives at half WatchdogSec,
# RELOADING=1 then READY=1 on SIGHUP, STOPPING=1 on SIGTERM.
source "$(dirname "$0")/lib.sh"
: "${NOTIFY_LISTENER:?set by CMake: path of ns_notify_listener}"

make_model slow.gguf --n-embd 256 --n-layer 4 --n-ff 768 --n-ctx 4096
write_config slow=slow.gguf
queued=$(ns submit --config "$CONFIG" --model slow --max-tokens 2000 --ignore-eos "A long story")

"$NOTIFY_LISTENER" "$WORK/notify.sock" "$WORK/notify.txt" 30 &
EXTRA_PIDS+=($!)
listener=$!
wait_for 5 "the listener" test -S "$WORK/notify.sock"

NOTIFY_SOCKET="$WORK/notify.sock" WATCHDOG_USEC=300000 start_daemon
wait_for 10 "READY=1" grep -q "^READY=1 | STATUS=" "$WORK/notify.txt"
wait_for 10 "a STATUS= about the running job" grep -q "STATUS=job $queued (slow): [0-9]*/2000 tokens" "$WORK/notify.txt"
sleep 0.5
kill -HUP "$DAEMON_PID"
wait_for 5 "RELOADING=1" grep -q "^RELOADING=1" "$WORK/notify.txt"
wait_for 5 "READY=1 after the reload" bash -c "grep -A100 '^RELOADING=1' '$WORK/notify.txt' | grep -q '^READY=1'"
kill -TERM "$DAEMON_PID"
wait_daemon 0
wait_for 5 "STOPPING=1" grep -q "^STOPPING=1" "$WORK/notify.txt"
kill -TERM "$listener"
wait "$listener" || true

watchdogs=$(grep -c "^WATCHDOG=1$" "$WORK/notify.txt")
((watchdogs >= 3)) || fail "only $watchdogs WATCHDOG=1 messages"
expect_eq "$(grep -c '^READY=1' "$WORK/notify.txt")" 2 "READY=1 at start and after the reload"
expect_eq "$(head -n 1 "$WORK/notify.txt" | cut -c1-7)" "READY=1" "READY=1 comes first"
expect_contains "$(head -n 1 "$WORK/notify.txt")" "1 queued" "READY's status counts the queue"
echo "notify: $(wc -l < "$WORK/notify.txt") messages, $watchdogs watchdog pings"
echo "ok"
