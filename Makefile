# gdn: Gated DeltaNet chunked prefill on Hopper GPUs, from Go.
#
#   make run    the main example (GPU forward checked against the reference;
#               without a GPU, the CPU reference on a small case)
#   make test   bootstrap (CUDA 12.4 headers, NVRTC), gofmt, go vet (with and
#               without -tags cuda), the CPU tests (and the development
#               build's switch tests, -tags gdndev), a build of the GPU code
#               (-tags cuda), make fuzz, then make python-test; a line at
#               least every 15 s
#   make fuzz   every fuzz target for FUZZTIME each (default 3s; make fuzz
#               FUZZTIME=1m for a long run)
#   make device build the -tags cuda test binaries and the tool into .bin/
#               for the GPU machine (scripts/device-build.sh)
#   make python build libgdn (the C ABI, cmd/libgdn) into python/gdn/, so
#               that `pip install -e python` (or PYTHONPATH=python) works
#   make python-test  the Python package's CPU tests (no torch, no GPU), on
#               libgdn built with and without CUDA; on a GPU machine with
#               torch they run python/tests/test_gpu.py too
SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -eu -o pipefail -c
SDK := eval "$$(scripts/cuda-sdk.sh)"
# Runs a step, and says every 15 s of silence that it still runs.
BEAT := scripts/heartbeat.sh

.PHONY: test run device fmt fuzz python python-test

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
	echo "== the Python package (libgdn built, its CPU tests)"
	$(MAKE) --no-print-directory python-test

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

# libgdn for the Python package. go build writes a header of its own beside
# the library; cmd/libgdn/gdn.h is the contract, so that one goes.
python:
	@$(SDK)
	$(BEAT) "go build libgdn" go build -tags cuda -buildmode=c-shared -o python/gdn/libgdn.so ./cmd/libgdn
	rm -f python/gdn/libgdn.h
	echo "built python/gdn/libgdn.so: pip install -e python (or PYTHONPATH=python)"

# The package's tests. The CPU ones load a libgdn built without CUDA (for
# the ABI: sizes, codes, messages) and check that the CUDA build is never
# loaded where cuInit fails (GDN_TEST_LIBCUDA_DIR: the SDK's driver library).
python-test: python
	@$(SDK)
	mkdir -p .cache
	$(BEAT) "go build libgdn (no CUDA)" go build -buildmode=c-shared -o .cache/libgdn-nocuda.so ./cmd/libgdn
	GDN_LIBRARY="$$PWD/python/gdn/libgdn.so" GDN_TEST_NOCUDA_LIBRARY="$$PWD/.cache/libgdn-nocuda.so" \
		GDN_TEST_LIBCUDA_DIR="$${CGO_LDFLAGS#-L}" \
		python3 -m unittest discover -s python/tests

fmt:
	gofmt -w .
