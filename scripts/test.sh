#!/usr/bin/env bash
# The test suite: installs what is missing, builds, runs every test under ctest.
# Tests that need ../shared (reference models, goldens, vocabularies) skip where it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 600
