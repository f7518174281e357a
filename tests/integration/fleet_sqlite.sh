# Three nightshiftd processes on one SQLite queue, 300 jobs, one daemon
# killed with SIGKILL mid-job: none lost, none run twice, the killed
# daemon's job finished by another (tests/support/fleet_lib.sh).
source "$(dirname "$0")/lib.sh"
FLEET_BACKEND=sqlite
source "$NS_SOURCE_DIR/tests/support/fleet_lib.sh"
fleet_run
