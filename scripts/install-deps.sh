#!/usr/bin/env bash
# Installs what nightshift needs to build and test on Debian 12 (as root, or with sudo).
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git
  libsqlite3-dev liburing-dev libyaml-cpp-dev libspdlog-dev doctest-dev
  libpcre2-dev nlohmann-json3-dev libcli11-dev libsystemd-dev
  clang libclang-rt-14-dev   # the GGUF parser fuzz test (libFuzzer)
  clang-format-14            # the tree's style (tools/format.sh, the unit.format test)
  sqlite3                    # integration tests read the database with the sqlite3 shell
  python3                    # ... and check JSON output (exports, --json) with it
  python3-jsonschema         # constrained outputs are validated against their schemas with a real validator
  python3-prometheus-client  # `status --prometheus` is parsed with a real Prometheus text-format parser
  postgresql libpq-dev       # the PostgreSQL queue backend (libpq) and the server its tests start
  libcpp-httplib-dev         # nightshiftd's OpenAI Files and Batches API (daemon/http/)
  chromium                   # the status page is rendered by a real browser in its test (a screenshot artifact)
)
# The OpenAI client the HTTP API's test drives runs on node; Debian's nodejs and npm unless a node is there.
command -v node > /dev/null || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The pinned OpenAI client of tests/integration/openai_client.sh (its package-lock.json), once.
client="$(cd "$(dirname "$0")/.." && pwd)/tests/integration/openai_client"
if [ ! -d "$client/node_modules" ]; then
  echo "install-deps: npm ci in $client"
  (cd "$client" && npm ci --no-audit --no-fund)
fi
