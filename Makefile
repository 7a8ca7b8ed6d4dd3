# gdn: Gated DeltaNet chunked prefill on Hopper GPUs, from Go.
#
#   make test   bootstrap (CUDA 12.4 headers, NVRTC), gofmt, go vet, the CPU
#               tests, and a build of the GPU code (-tags cuda)
#   make run    the main example (GPU forward checked against the reference;
#               without a GPU, the CPU reference on a small case)
#   make device build the -tags cuda test binaries and the tool into .bin/
#               for the GPU machine (scripts/device-build.sh)
SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -eu -o pipefail -c
SDK := eval "$$(scripts/cuda-sdk.sh)"

.PHONY: test run device fmt

test:
	$(SDK)
	unformatted="$$(gofmt -l .)"
	if [[ -n "$$unformatted" ]]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	go vet -tags cuda ./...
	go test -count=1 ./...
	go build -tags cuda ./...

run:
	$(SDK)
	if [[ -e /dev/nvidia0 || -e /dev/nvidiactl ]]; then tags="-tags cuda"; else tags=""; fi
	go run $$tags ./examples/prefill

device:
	scripts/device-build.sh

fmt:
	gofmt -w .
