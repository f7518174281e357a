# The systemd units pass `systemd-analyze verify` without a single warning
# (a deliberately broken copy shows the check can fail), carry the settings
# the operations guide promises, and nightly-submit queues each document once.
source "$(dirname "$0")/lib.sh"
: "${NS_SOURCE_DIR:?set by CMake: the source tree}"
units="$NS_SOURCE_DIR/systemd"

if ! command -v systemd-analyze > /dev/null; then
  echo "SKIP: systemd-analyze is not installed (apt install systemd); the units were not verified"
  exit 77
fi

# The units name installed paths; point them at this build.
mkdir "$WORK/units"
for u in nightshiftd.service nightshift-nightly.service nightshift-nightly.timer; do
  sed -e "s#/usr/local/bin/nightshiftd#$NIGHTSHIFTD#" \
      -e "s#/usr/local/lib/nightshift/nightly-submit#$units/nightly-submit.sh#" "$units/$u" > "$WORK/units/$u"
done
verify() { (cd "$WORK/units" && systemd-analyze verify "$@" 2>&1); }
if ! out=$(verify nightshiftd.service nightshift-nightly.service nightshift-nightly.timer); then
  fail "systemd-analyze verify failed: $out"
fi
expect_eq "$out" "" "systemd-analyze verify output"

sed -e 's/^ProtectSystem=strict/ProtectSytem=strict/' "$WORK/units/nightshiftd.service" > "$WORK/units/broken.service"
expect_contains "$(verify broken.service || true)" "Unknown key 'ProtectSytem'" "the check can fail"

service=$(cat "$units/nightshiftd.service")
for setting in Type=notify NotifyAccess=main WatchdogSec= "ExecReload=/bin/kill -HUP \$MAINPID" Restart=on-failure \
               ProtectSystem=strict "ReadWritePaths=/var/lib/nightshift" NoNewPrivileges=yes PrivateTmp=yes MemoryMax= \
               Nice=10 IOSchedulingClass=best-effort TimeoutStopSec=; do
  expect_contains "$service" "$setting" "nightshiftd.service"
done
timer=$(cat "$units/nightshift-nightly.timer")
expect_contains "$timer" "Persistent=true" "timer"
expect_contains "$timer" "OnCalendar=*-*-* 20:00:00" "timer"
next=$(systemd-analyze calendar "*-*-* 20:00:00" 2>&1) || fail "OnCalendar does not parse: $next"
expect_contains "$next" "Next elapse:" "OnCalendar"

# What the nightly service runs: one job per document, keyed by content.
make_model tiny.gguf
write_config tiny=tiny.gguf
mkdir "$WORK/docs"
echo "Chapter one. The rain had not stopped" > "$WORK/docs/one.txt"
echo "# Notes\nThe meeting ran late" > "$WORK/docs/two.md"
echo "not a document" > "$WORK/docs/skip.pdf"
submit_docs() {
  NIGHTSHIFT_BIN="$NIGHTSHIFT" NIGHTSHIFT_DOCS="$WORK/docs" NIGHTSHIFT_MODEL=tiny NIGHTSHIFT_MAX_TOKENS=5 \
    "$units/nightly-submit.sh" --config "$CONFIG"
}
expect_contains "$(submit_docs)" "2 document(s) in $WORK/docs, 2 new job(s), 0 failure(s)" "first evening"
expect_contains "$(submit_docs)" "0 new job(s)" "a rerun queues nothing"
echo "The rain stopped at dawn." >> "$WORK/docs/one.txt"
expect_contains "$(submit_docs)" "1 new job(s)" "an edited document is queued again"
expect_eq "$(sql "SELECT count(*) FROM jobs")" 3 "jobs queued"
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE idempotency_key LIKE 'nightly:one.txt:%'")" 2 "keys name the document"
start_daemon --drain
wait_daemon 0
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE state = 'done'")" 3 "the daemon ran them"
echo "ok"
