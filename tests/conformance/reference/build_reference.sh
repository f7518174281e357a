#!/usr/bin/env bash
# Builds the reference implementation (llama.cpp as bundled in the npm package
# node-llama-cpp 3.22.1, source of 2026-09-28) OUTSIDE this repository, with
# only the targets the goldens and peer figures need, plus this folder's dump
# program (ns_ref_dump.cpp, nightshift's own code linked against libllama).
#
#   tests/conformance/reference/build_reference.sh [WORKDIR]   (default /var/tmp/ns-reference)
#
# Prints the directory holding the binaries on its last line. Needs npm, git,
# cmake, a C++ compiler; never links the reference into nightshift.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="${1:-/var/tmp/ns-reference}"
version="3.22.1"
mkdir -p "$work"
cd "$work"
if [ ! -d llama.cpp/.git ]; then
  if [ ! -f "node-llama-cpp-$version.tgz" ]; then
    npm pack "node-llama-cpp@$version" >/dev/null 2>&1
  fi
  rm -rf package && tar xzf "node-llama-cpp-$version.tgz"
  git clone -q package/llama/gitRelease.bundle llama.cpp
fi
echo "reference: $(git -C llama.cpp log -1 --format='%H %cd')" >&2
cmake -S llama.cpp -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON >/dev/null
targets=(llama)
[ -n "${NS_REF_TOOLS:-}" ] && targets+=(${NS_REF_TOOLS})   # e.g. "llama-quantize llama-imatrix llama-batched-bench"
cmake --build build -j"$(nproc)" --target "${targets[@]}"
# The dump program: nightshift's code, compiled against the reference's headers and static libraries.
libs=$(find build -name 'libllama.a' -o -name 'libggml*.a' | sort -r | tr '\n' ' ')
c++ -O2 -std=c++17 -I llama.cpp/include -I llama.cpp/ggml/include "$here/ns_ref_dump.cpp" \
  -Wl,--start-group $libs -Wl,--end-group -fopenmp -lpthread -ldl -o build/ns-ref-dump
echo "$work/build"
