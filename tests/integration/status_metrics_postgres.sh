# status_metrics_page.sh on a PostgreSQL queue (a throwaway server: tests/support/pg_test_server.sh), whose
# queue reads (model totals, token history) are SQL of their own. Skipped (exit 77) where the server is not
# installed.
STATUS_BACKEND=postgres
source "$(dirname "$0")/status_metrics_page.sh"
