# gdn: Gated DeltaNet chunked prefill on Hopper GPUs, from Go.
#
#   make run    the main example (GPU forward checked against the reference;
#               without a GPU, the CPU reference on a small case)
#   make test   bootstrap (CUDA 12.4 headers, NVRTC), gofmt, go vet (with and
#               without -tags cuda), the CPU tests (and the development
#               build's switch tests, -tags gdndev), a build of the GPU code
#               (-tags cuda), then make fuzz; a line at least every 15 s
#   make fuzz   every fuzz target for FUZZTIME each (default 3s; make fuzz
#               FUZZTIME=1m for a long run)
#   make device build the -tags cuda test binaries and the tool into .bin/
#               for the GPU machine (scripts/device-build.sh)
SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -eu -o pipefail -c
SDK := eval "$$(scripts/cuda-sdk.sh)"
# Runs a step, and says every 15 s of silence that it still runs.
BEAT := scripts/heartbeat.sh

.PHONY: test run device fmt fuzz

test:
	@$(SDK)
	echo "== gofmt"
	unformatted="$$(gofmt -l .)"
	if [[ -n "$$unformatted" ]]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	echo "== go vet"
	$(BEAT) "go vet" go vet ./...
	$(BEAT) "go vet -tags cuda" go vet -tags cuda ./...
	echo "== go test (CPU): a line per package as it finishes"
	# Tests that need compiled kernels share one cache folder, kept between
	# runs (internal/testcache): each kernel compiles once per source.
	GDN_TEST_KERNEL_CACHE="$${GDN_TEST_KERNEL_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/gdn/test-kernels}" \
		go run ./scripts/testprogress -count=1 -parallel 8 ./...
	echo "== go test -tags gdndev (the development build's switches)"
	go test -count=1 -tags gdndev -run 'InDevBuild' ./jit
	echo "== go build -tags cuda"
	$(BEAT) "go build -tags cuda" go build -tags cuda ./...
	echo "== fuzz ($(FUZZTIME) a target)"
	$(MAKE) --no-print-directory fuzz

# Each fuzz target for FUZZTIME (go runs one target per invocation); the
# seed corpus and every crasher found live in testdata/fuzz/<FuzzName>/.
# scripts/fuzz.sh says which failure of Go 1.26's fuzzing it does not count.
FUZZTIME ?= 3s
FUZZ_TARGETS := ./internal/problem:FuzzValidateCore ./cmd/gdn:FuzzReadNpz ./cmd/gdn:FuzzParseShape ./cmd/gdn:FuzzParseLens ./cmd/gdn:FuzzParseSoakProblem

# No bootstrap: the fuzzed packages build without the CUDA headers.
fuzz:
	@FUZZTIME=$(FUZZTIME) scripts/fuzz.sh $(FUZZ_TARGETS)

run:
	@$(SDK)
	if [[ -e /dev/nvidia0 || -e /dev/nvidiactl ]]; then tags="-tags cuda"; else tags=""; fi
	go run $$tags ./examples/prefill

device:
	scripts/device-build.sh

fmt:
	gofmt -w .
