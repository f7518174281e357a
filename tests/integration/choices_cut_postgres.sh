# SIGTERM drain of an n = 3 job after choice 0 finished, on PostgreSQL
# (lib_choices_cut.sh; docs/fleet.md, finding 3). Skipped (exit 77) where the
# PostgreSQL server is not installed.
source "$(dirname "$0")/lib.sh"
start_pg_server || {
  echo "skipped: $PG_SKIP"
  exit 77
}
Q=pgq
CP_LENGTHS="SELECT cardinality(tokens) || '|' || jsonb_array_length(choices->0) || '|' ||
            jsonb_array_length(choices->1) FROM checkpoints WHERE job_id = %s"
DB_ARGS=(--db "$PG_URL")
source "$(dirname "$0")/lib_choices_cut.sh"
