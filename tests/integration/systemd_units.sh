# The systemd units pass `systemd-analyze verify` without a single warning
# (a deliberately broken copy shows the check can fail), carry the settings
# the operations guide promises, every service has the daemon's hardening
# (and an exposure score no worse than the daemon's), nightly-submit queues
# each document once, the night unit's command drains the queue and the
# morning unit's command exports it.
source "$(dirname "$0")/lib.sh"
: "${NS_SOURCE_DIR:?set by CMake: the source tree}"
units="$NS_SOURCE_DIR/systemd"

if ! command -v systemd-analyze > /dev/null; then
  echo "SKIP: systemd-analyze is not installed (apt install systemd); the units were not verified"
  exit 77
fi

# The units name installed paths; point them at this build.
mkdir "$WORK/units"
all_units=()
for f in "$units"/*.service "$units"/*.timer; do
  u=$(basename "$f")
  all_units+=("$u")
  sed -e "s#/usr/local/bin/nightshiftd#$NIGHTSHIFTD#" -e "s#/usr/local/bin/nightshift #$NIGHTSHIFT #" \
      -e "s#/usr/local/lib/nightshift/nightly-submit#$units/nightly-submit.sh#" "$f" > "$WORK/units/$u"
done
expect_eq "${#all_units[@]}" 7 "units shipped"
verify() { (cd "$WORK/units" && systemd-analyze verify "$@" 2>&1); }
if ! out=$(verify "${all_units[@]}"); then
  fail "systemd-analyze verify failed: $out"
fi
expect_eq "$out" "" "systemd-analyze verify output"

# Every service is hardened like the daemon: each of its hardening settings
# (NoNewPrivileges= up to CapabilityBoundingSet=), ReadWritePaths= aside.
settings() { grep -E '^[A-Za-z]+=' "$1" || true; }
hardening=$(sed -n '/^NoNewPrivileges=/,/^CapabilityBoundingSet=/p' "$units/nightshiftd.service" | grep -E '^[A-Za-z]+=' |
  grep -v '^ReadWritePaths=')
(($(echo "$hardening" | wc -l) >= 15)) || fail "could not read the daemon's hardening: $hardening"
exposure() { systemd-analyze security --offline=yes "$WORK/units/$1" 2>&1 | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\).*/\1/p'; }
daemon_exposure=$(exposure nightshiftd.service)
for u in "${all_units[@]}"; do
  [[ "$u" == *.service ]] || continue
  unit_settings=$(settings "$units/$u")
  while read -r line; do
    [[ $'\n'"$unit_settings"$'\n' == *$'\n'"$line"$'\n'* ]] || fail "$u lacks the daemon's hardening: $line"
  done <<< "$hardening"
  expect_contains "$unit_settings" "ReadWritePaths=/var/lib/nightshift" "$u writes the database directory"
  if [[ -n "$daemon_exposure" ]]; then
    e=$(exposure "$u")
    echo "$u: systemd-analyze security exposure $e (nightshiftd.service $daemon_exposure)"
    awk -v a="$e" -v b="$daemon_exposure" 'BEGIN { exit !(a != "" && a <= b + 0.3) }' ||
      fail "$u is exposed more than the daemon ($e vs $daemon_exposure)"
  fi
done
# The night unit is the daemon's, but for how it starts and ends.
night=$(settings "$units/nightshiftd-night.service")
while read -r line; do
  case "$line" in ExecStart=* | Restart=* | RestartSec=* | NotifyAccess=* | StartLimit* | WantedBy=* | Description=*) continue ;; esac
  [[ $'\n'"$night"$'\n' == *$'\n'"$line"$'\n'* ]] || fail "nightshiftd-night.service differs from nightshiftd.service: $line"
done < <(settings "$units/nightshiftd.service")
expect_contains "$night" "Conflicts=nightshiftd.service" "the night unit"

sed -e 's/^ProtectSystem=strict/ProtectSytem=strict/' "$WORK/units/nightshiftd.service" > "$WORK/units/broken.service"
expect_contains "$(verify broken.service || true)" "Unknown key 'ProtectSytem'" "the check can fail"

# The `systemctl --user` recipe in docs/operations.md: its units, as written there, verify too.
mkdir -m 700 "$WORK/user-units" "$WORK/xdg"
awk -v dir="$WORK/user-units" '/<<.UNIT.$/ { match($0, /user\/[^ ]+/); f = dir "/" substr($0, RSTART + 5, RLENGTH - 5); on = 1; next }
     /^UNIT$/ { on = 0; next } on { print > f }' "$NS_SOURCE_DIR/docs/operations.md"
user_units=("$WORK"/user-units/*)
((${#user_units[@]} >= 2)) || fail "no systemctl --user units found in docs/operations.md"
sed -i "s#%h/.local/bin/nightshiftd#$NIGHTSHIFTD#" "$WORK"/user-units/*.service
if ! out=$(cd "$WORK/user-units" && XDG_RUNTIME_DIR="$WORK/xdg" systemd-analyze --user verify "${user_units[@]}" 2>&1); then
  fail "the --user recipe's units do not verify: $out"
fi
expect_eq "$out" "" "systemd-analyze --user verify output"

service=$(cat "$units/nightshiftd.service")
for setting in Type=notify NotifyAccess=main WatchdogSec= "ExecReload=/bin/kill -HUP \$MAINPID" Restart=on-failure \
               ProtectSystem=strict "ReadWritePaths=/var/lib/nightshift" NoNewPrivileges=yes PrivateTmp=yes MemoryMax= \
               Nice=10 IOSchedulingClass=best-effort TimeoutStopSec=; do
  expect_contains "$service" "$setting" "nightshiftd.service"
done
timer=$(cat "$units/nightshift-nightly.timer")
expect_contains "$timer" "Persistent=true" "timer"
expect_contains "$timer" "OnCalendar=*-*-* 20:00:00" "timer"
expect_contains "$(cat "$units/nightshiftd-night.timer")" "OnCalendar=*-*-* 22:00:00" "night timer"
expect_contains "$(cat "$units/nightshift-export.timer")" "OnCalendar=*-*-* 07:00:00" "morning timer"
for t in "${all_units[@]}"; do
  [[ "$t" == *.timer ]] || continue
  when=$(sed -n 's/^OnCalendar=//p' "$units/$t")
  next=$(systemd-analyze calendar "$when" 2>&1) || fail "$t: OnCalendar does not parse: $next"
  expect_contains "$next" "Next elapse:" "$t OnCalendar"
done

# A unit's command line as systemd runs it: this build's paths, the test's config, ${VAR} from the environment.
unit_command() {  # unit_command UNIT
  sed -n 's/^ExecStart=//p' "$WORK/units/$1" | sed -e "s#/etc/nightshift/config.yaml#$CONFIG#"
}

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
# The night: the night unit's command (timeout, then nightshiftd --drain) runs them and exits 0.
night_cmd=$(unit_command nightshiftd-night.service)
expect_contains "$night_cmd" "--drain" "the night unit drains"
: > "$WORK/daemon.log"  # emptied before the fork (lib.sh start_daemon)
bash -c "exec $night_cmd" >> "$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!
wait_daemon 0
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE state = 'done'")" 3 "the night unit ran them"
# The morning: the export unit's command, with the environment its unit and nightly.env give.
export_cmd=$(unit_command nightshift-export.service)
NIGHTSHIFT_EXPORT_DIR="$WORK/continued" NIGHTSHIFT_BATCH=nightly bash -c "exec $export_cmd" > "$WORK/export.out" 2>&1 ||
  fail "the export unit's command failed: $(cat "$WORK/export.out")"
[[ -s "$WORK/continued/one.continued.txt" && -s "$WORK/continued/two.continued.md" ]] ||
  fail "the morning export wrote no continuations: $(cat "$WORK/export.out")"
echo "ok"
