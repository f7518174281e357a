# integration.openai_client on a PostgreSQL queue (a throwaway server:
# tests/support/pg_test_server.sh): the API's files and batches tables and the
# batch's jobs in the server's database. Skipped (77) where the server or node
# is not installed.
OPENAI_CLIENT_BACKEND=postgres
source "$(dirname "$0")/openai_client.sh"
