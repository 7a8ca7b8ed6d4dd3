#!/usr/bin/env bash
# device-build.sh: builds everything the GPU machine runs into .bin/ (ignored
# by git, carried to the device with the `carry` option):
#   .bin/<pkg>.test   the -tags cuda test binary of each package with GPU tests
#   .bin/gdn          the command-line tool, -tags cuda
#   .bin/prefill      the main example, -tags cuda
#   .bin/qwen35_layer the full-forward example (one Qwen3.5 layer's prefill), -tags cuda
#   .bin/device-run.sh  the script that runs them all there (scripts/device-run.sh)
# The binaries link libcuda dynamically and load NVRTC with dlopen, so the
# same files run on the device machine (its driver, its CUDA 13 NVRTC).
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/cuda-sdk.sh)"
mkdir -p .bin
rm -f .bin/*.test .bin/gdn
for pkg in . ./driver ./jit ./cmd/gdn; do
	name=$(go list "$pkg" | sed "s|^github.com/gdnjit/gdn/\{0,1\}||; s|/|-|g")
	[[ -n $name ]] || name=gdn
	go test -tags cuda -c -o ".bin/$name.test" "$pkg"
done
go build -tags cuda -o .bin/gdn ./cmd/gdn
go build -tags cuda -o .bin/prefill ./examples/prefill
go build -tags cuda -o .bin/qwen35_layer ./examples/qwen35_layer
cp scripts/device-run.sh .bin/
ls -la .bin >&2
