# Three nightshiftd processes on one PostgreSQL queue (a throwaway server the
# test starts: tests/support/pg_test_server.sh), 300 jobs, one daemon killed
# with SIGKILL mid-job: none lost, none run twice, the killed daemon's job
# finished by another (tests/support/fleet_lib.sh). Skipped (exit 77) where
# the PostgreSQL server is not installed.
source "$(dirname "$0")/lib.sh"
FLEET_BACKEND=postgres
source "$NS_SOURCE_DIR/tests/support/fleet_lib.sh"
fleet_run
