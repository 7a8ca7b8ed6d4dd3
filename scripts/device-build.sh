#!/usr/bin/env bash
# device-build.sh: builds everything the GPU machine runs into .bin/ (ignored
# by git, carried to the device with the `carry` option):
#   .bin/<pkg>.test   the -tags cuda test binary of each package with GPU tests
#   .bin/gdn          the command-line tool, -tags cuda
#   .bin/prefill      the main example, -tags cuda
#   .bin/qwen35_layer the full-forward example (one Qwen3.5 layer's prefill), -tags cuda
#   .bin/serving      the serving example (a continuous-batching loop over a state pool), -tags cuda
#   python/gdn/libgdn.so  the C ABI for the Python package (git ignores it: carry it)
#   .bin/device-run.sh  the script that runs them all there (scripts/device-run.sh)
# The binaries link libcuda dynamically and load NVRTC with dlopen, so the
# same files run on the device machine (its driver, its CUDA 13 NVRTC).
#
# Options:
#   --lean      only .bin/gdn, .bin/gdn.test and the script: what a kernel
#               change needs (tests, warmup, bench), about 22 MB of the
#               device tool's 64 MiB carry limit
#   --old REV   also build .bin/gdn-old from git revision REV (a commit,
#               branch or tag; built in a temporary worktree, the working
#               tree untouched): the baseline of device-run.sh's compare
#               step, which times both in one call
#   --dev       also build .bin/gdn-dev: the tool as a development build
#               (-tags cuda,gdndev, no symbols), which honours
#               GDN_JIT_DEFINES and GDN_LAB (kernsrc/lab's experiments):
#               device-run.sh's knob and lab steps run it
#   --gchunt    also build .bin/gdn-norandheap.gchunt: the root package's
#               GPU tests with GOEXPERIMENT=norandomizedheapbase64 (the Go
#               heap at its fixed pre-1.26 base), for device-run.sh's
#               gchunt step, which takes turns between it and gdn.test
#   --also REV  (with --old, repeatable) also build .bin/gdn+REV (a '/' in
#               REV becomes '_'): compare times each of them against the
#               same baseline in the same call, to tell apart the changes
#               that the working tree combines. The baseline and these are
#               built without symbols (-s -w), so that three fit the
#               carry limit beside the working tree's tools
#
# Whatever it builds, it also packs .bin/ and python/gdn/libgdn.so into
# .bin.tgz (ignored by git; about half their size): carried as one path
# and unpacked there with `tar xzf .bin.tgz`, every binary fits one call's
# 8 carry paths and 64 MiB, with room beside it for FLA's source.
set -euo pipefail
cd "$(dirname "$0")/.."
lean=0
dev=0
gchunt=0
old=""
also=()
while [[ $# -gt 0 ]]; do
	case "$1" in
	--lean) lean=1 ;;
	--dev) dev=1 ;;
	--gchunt) gchunt=1 ;;
	--old)
		[[ $# -ge 2 ]] || { echo "device-build.sh: --old needs a git revision" >&2; exit 2; }
		old="$2"
		shift
		;;
	--also)
		[[ $# -ge 2 ]] || { echo "device-build.sh: --also needs a git revision" >&2; exit 2; }
		also+=("$2")
		shift
		;;
	*) echo "device-build.sh: unknown option $1 (see the comment at the top)" >&2; exit 2 ;;
	esac
	shift
done
rev=""
if [[ -n $old ]]; then
	rev=$(git rev-parse --verify --quiet "$old^{commit}") || { echo "device-build.sh: --old $old: not a revision here" >&2; exit 2; }
fi
if [[ ${#also[@]} -gt 0 && -z $old ]]; then
	echo "device-build.sh: --also needs --old (the baseline they are timed against)" >&2
	exit 2
fi
for a in "${also[@]}"; do
	git rev-parse --verify --quiet "$a^{commit}" >/dev/null || { echo "device-build.sh: --also $a: not a revision here" >&2; exit 2; }
done
eval "$(scripts/cuda-sdk.sh)"
mkdir -p .bin
rm -f .bin/*.test .bin/*.gchunt .bin/gdn .bin/gdn-dev .bin/gdn-old .bin/gdn+* .bin/prefill .bin/qwen35_layer .bin/serving
# Everything is built without the symbol table and DWARF (-s -w): a panic
# still names its functions and lines (those tables stay), and a full build
# then fits the device tool's 64 MiB carry beside FLA's source.
strip=(-ldflags "-s -w")
pkgs=(. ./driver ./jit ./cmd/gdn ./internal/hostpath ./cmd/libgdn)
[[ $lean == 1 ]] && pkgs=(.)
for pkg in "${pkgs[@]}"; do
	name=$(go list "$pkg" | sed "s|^github.com/gdnjit/gdn/\{0,1\}||; s|/|-|g")
	[[ -n $name ]] || name=gdn
	go test -tags cuda -c "${strip[@]}" -o ".bin/$name.test" "$pkg"
done
# The tools (and libgdn, below) carry their commit (-buildvcs=true, where
# GOFLAGS may say false): `gdn version` names it, and device-run.sh writes
# it to gpu.txt, so that every log says which build it timed.
go build -buildvcs=true -tags cuda "${strip[@]}" -o .bin/gdn ./cmd/gdn
if [[ $dev == 1 ]]; then
	go build -buildvcs=true -tags cuda,gdndev -ldflags "-s -w" -o .bin/gdn-dev ./cmd/gdn
fi
if [[ $gchunt == 1 ]]; then
	GOEXPERIMENT=norandomizedheapbase64 go test -tags cuda -c -ldflags "-s -w" -o .bin/gdn-norandheap.gchunt .
fi
if [[ $lean == 0 ]]; then
	go build -tags cuda "${strip[@]}" -o .bin/prefill ./examples/prefill
	go build -tags cuda "${strip[@]}" -o .bin/qwen35_layer ./examples/qwen35_layer
	go build -tags cuda "${strip[@]}" -o .bin/serving ./examples/serving
	# libgdn for device-run.sh's pyabi step (git ignores it: carry
	# python/gdn/libgdn.so). go build's own header goes: gdn.h is the ABI.
	go build -buildvcs=true -tags cuda -buildmode=c-shared "${strip[@]}" -o python/gdn/libgdn.so ./cmd/libgdn
	rm -f python/gdn/libgdn.h
fi
# build_at REV OUT: the cuda-tagged gdn tool of git revision REV, without
# symbols, into OUT (from a temporary worktree; the working tree untouched).
build_at() {
	local tmp
	tmp=$(mktemp -d)
	git worktree add --detach "$tmp/src" "$1" >/dev/null
	local rc=0
	(cd "$tmp/src" && go build -tags cuda -ldflags "-s -w" -o "$2" ./cmd/gdn) || rc=$?
	git worktree remove --force "$tmp/src" >/dev/null 2>&1
	rm -rf "$tmp"
	return "$rc"
}
if [[ -n $rev ]]; then
	build_at "$rev" "$PWD/.bin/gdn-old"
	echo "device-build.sh: .bin/gdn-old is $(git rev-parse --short "$rev")" >&2
	for a in "${also[@]}"; do
		build_at "$a" "$PWD/.bin/gdn+${a//\//_}"
		echo "device-build.sh: .bin/gdn+${a//\//_} is $(git rev-parse --short "$a")" >&2
	done
fi
cp scripts/device-run.sh .bin/
packed=(.bin)
[[ -f python/gdn/libgdn.so ]] && packed+=(python/gdn/libgdn.so)
tar czf .bin.tgz "${packed[@]}"
ls -la .bin >&2
du -sh .bin >&2
echo "device-build.sh: .bin.tgz holds ${packed[*]}, $(du -h .bin.tgz | cut -f1): carry it, then tar xzf .bin.tgz" >&2
