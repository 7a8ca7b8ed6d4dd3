#!/usr/bin/env bash
# cuda-sdk.sh: supplies what building and testing gdn needs where no suitable
# CUDA toolkit is installed, and prints `export NAME=value` lines for the shell:
#
#     eval "$(scripts/cuda-sdk.sh)"
#
# What it supplies (docs/TOOLCHAIN.md has the verified facts):
#   - cuda.h from CUDA 12.4, for gorgonia.org/cu v0.9.6, which does not compile
#     against CUDA 13 headers (CGO_CFLAGS);
#   - libcuda.so to link against (CGO_LDFLAGS); at run time the machine's own
#     driver library is used;
#   - NVRTC 12.4 and its builtins, so kernels compile to sm_90a cubins on a
#     machine without a GPU (GDN_NVRTC_PATH, LD_LIBRARY_PATH).
#
# It prefers an installed CUDA 12.x toolkit. The packages come from Debian's
# non-free archive through a private apt configuration under the cache
# directory: nothing on the system is changed and no root is needed.
# Idempotent: a second run only checks the cache and prints (well under 1 s).
#
# Environment:
#   GDN_CUDA_SDK_DIR  cache directory (default: ${XDG_CACHE_HOME:-~/.cache}/gdn/cuda-sdk)
#   CUDA_HOME         a toolkit to prefer when it is 12.x
# Diagnostics go to stderr; stdout carries only the export lines.
set -euo pipefail

say() { echo "cuda-sdk: $*" >&2; }
die() { say "error: $*"; exit 1; }

cache="${GDN_CUDA_SDK_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gdn/cuda-sdk}"

# Pinned package versions (Debian non-free). Changing one changes the stamp,
# so the cache is refreshed.
CUDA_DEV_PKG="nvidia-cuda-dev=12.4.127~12.4.1-2"
NVRTC_PKG="libnvrtc12=12.4.127~12.4.1-2"
BUILTINS_PKG="libnvrtc-builtins12.4=12.4.127~12.4.1-2"
LIBCUDA_PKG="libcuda1=535.261.03-1"
stamp_want="$CUDA_DEV_PKG $NVRTC_PKG $BUILTINS_PKG $LIBCUDA_PKG v1"

# cuda_major DIR prints the CUDA major version of DIR/include/cuda.h, or nothing.
cuda_major() {
	local h="$1/include/cuda.h"
	[[ -f $h ]] || return 0
	local v
	v=$(sed -n 's/^#define CUDA_VERSION \([0-9]*\).*/\1/p' "$h" | head -1)
	[[ -n $v ]] && echo $((v / 1000))
	return 0
}

# An installed 12.x toolkit needs no download for the headers.
toolkit=""
for dir in "${CUDA_HOME:-}" /usr/local/cuda /usr/local/cuda-12 /usr; do
	[[ -n $dir ]] || continue
	if [[ $(cuda_major "$dir") == 12 ]]; then
		toolkit="$dir"
		break
	fi
done
if [[ -z $toolkit ]]; then
	for dir in "${CUDA_HOME:-}" /usr/local/cuda; do
		[[ -n $dir ]] || continue
		m=$(cuda_major "$dir")
		if [[ -n $m && $m -ge 13 ]]; then
			say "found CUDA $m at $dir; gorgonia.org/cu v0.9.6 does not compile against CUDA 13 headers"
			say "(cuCtxCreate became _v4, cuMemAdvise and cuGraphAddDependencies changed), so 12.4 headers are supplied"
			break
		fi
	done
fi

fetch() {
	command -v apt-get >/dev/null || die "apt-get not found: install a CUDA 12.x toolkit and set CUDA_HOME, or run on Debian/Ubuntu"
	command -v dpkg-deb >/dev/null || die "dpkg-deb not found"
	local apt="$cache/apt"
	mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$cache/debs"
	# Trixie carries the 12.4 toolkit packages, bookworm the 535 libcuda
	# (linked against only). A private source list and state directory leave
	# the system's apt configuration alone.
	cat >"$apt/sources.list" <<-EOF
		deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie non-free
		deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm non-free
	EOF
	local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State::Lists=$apt/lists" -o "Dir::Cache::Archives=$apt/archives"
		-o APT::Architecture=amd64 -o APT::Sandbox::User=root -q)
	say "fetching CUDA 12.4 headers, NVRTC 12.4 and libcuda from Debian non-free (about 950 MB, once)"
	apt-get "${opts[@]}" update >&2 || die "apt-get update failed"
	local pkgs=("$NVRTC_PKG" "$BUILTINS_PKG" "$LIBCUDA_PKG")
	[[ -n $toolkit ]] || pkgs+=("$CUDA_DEV_PKG")
	(cd "$cache/debs" && apt-get "${opts[@]}" download "${pkgs[@]}" >&2) || die "apt-get download ${pkgs[*]} failed"

	local root="$cache/root"
	rm -rf "$root" && mkdir -p "$root"
	local deb
	for deb in "$cache"/debs/libnvrtc12_*.deb "$cache"/debs/libnvrtc-builtins12.4_*.deb "$cache"/debs/libcuda1_*.deb; do
		dpkg-deb -x "$deb" "$root"
	done
	if [[ -z $toolkit ]]; then
		say "unpacking cuda.h from nvidia-cuda-dev (about 40 s)"
		dpkg-deb --fsys-tarfile "$cache"/debs/nvidia-cuda-dev_*.deb |
			tar -x -C "$root" ./usr/include/cuda.h ./usr/include/cudaTypedefs.h ./usr/include/cuda_stdint.h 2>/dev/null ||
			dpkg-deb --fsys-tarfile "$cache"/debs/nvidia-cuda-dev_*.deb | tar -x -C "$root" ./usr/include/cuda.h ./usr/include/cudaTypedefs.h
	fi
	# Keep what the build needs in a flat layout; drop the 950 MB of archives.
	# libcuda goes into its own folder, named only to the linker: on the
	# loader path it would shadow the real driver library of a GPU machine.
	mkdir -p "$cache/include" "$cache/lib" "$cache/link"
	if [[ -z $toolkit ]]; then
		cp "$root"/usr/include/cuda*.h "$cache/include/"
	fi
	local nv="$root/usr/lib/x86_64-linux-gnu"
	cp -P "$nv"/libnvrtc.so.12* "$nv"/libnvrtc-builtins.so.12.4* "$cache/lib/"
	cp -P "$nv"/nvidia/current/libcuda.so* "$cache/link/" 2>/dev/null || cp -P "$nv"/libcuda.so* "$cache/link/"
	# The linker wants the unversioned name.
	(cd "$cache/link" && ln -sf "$(ls libcuda.so.[0-9]*.* | head -1)" libcuda.so && ln -sf "$(ls libcuda.so.[0-9]*.* | head -1)" libcuda.so.1)
	rm -rf "$root" "$cache/debs" "$apt/archives"
	echo "$stamp_want toolkit=$toolkit" >"$cache/stamp"
}

mkdir -p "$cache"
if [[ ! -f $cache/stamp || $(cat "$cache/stamp") != "$stamp_want toolkit=$toolkit" ]] ||
	[[ -z $toolkit && ! -f $cache/include/cuda.h ]] || [[ ! -e $cache/lib/libnvrtc.so.12 || ! -e $cache/link/libcuda.so ]]; then
	fetch
fi

inc="$cache/include"
[[ -n $toolkit ]] && inc="$toolkit/include"
nvrtc=$(ls "$cache"/lib/libnvrtc.so.12 2>/dev/null || true)
[[ -n $nvrtc ]] || die "libnvrtc.so.12 missing from $cache/lib"

# Headers first: gorgonia's own `-I/usr/local/cuda/include` comes after
# CGO_CFLAGS, so these 12.x headers win even where /usr/local/cuda is 13.
echo "export CGO_CFLAGS=\"-I$inc\""
echo "export CGO_LDFLAGS=\"-L$cache/link\""
echo "export GDN_NVRTC_PATH=\"$nvrtc\""
# libnvrtc loads its builtins by soname, found through the loader path that
# was set before the process started.
echo "export LD_LIBRARY_PATH=\"$cache/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\""
echo "export GDN_CUDA_SDK=\"$cache\""
say "ready: headers $inc, NVRTC $nvrtc"
