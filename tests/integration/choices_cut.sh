# SIGTERM drain of an n = 3 job after choice 0 finished, on SQLite
# (lib_choices_cut.sh; docs/fleet.md, finding 3).
source "$(dirname "$0")/lib.sh"
Q=sql
CP_LENGTHS="SELECT json_array_length(tokens) || '|' || json_array_length(choices, '\$[0]') || '|' ||
            json_array_length(choices, '\$[1]') FROM checkpoints WHERE job_id = %s"
DB_ARGS=()
source "$(dirname "$0")/lib_choices_cut.sh"
