#!/usr/bin/env bash
# cuda-sdk.sh: supplies what building and testing gdn needs where no suitable
# CUDA toolkit is installed, and prints `export NAME=value` lines for the shell:
#
#     eval "$(scripts/cuda-sdk.sh)"
#
# What it supplies (docs/TOOLCHAIN.md says why each is needed):
#   - cuda.h from CUDA 12.4, for gorgonia.org/cu v0.9.6, which does not compile
#     against CUDA 13 headers (CGO_CFLAGS);
#   - libcuda.so to link against (CGO_LDFLAGS); at run time the machine's own
#     driver library is used;
#   - NVRTC 12.4 and its builtins, so kernels compile to sm_90a cubins on a
#     machine without a GPU (GDN_NVRTC_PATH, LD_LIBRARY_PATH).
#
# A CUDA 12.x toolkit (CUDA_HOME, /usr/local/cuda, ...) is used as it is when it
# has all three. Otherwise the missing pieces come from Debian's non-free
# packages, fetched from the Debian archive that the machine's own apt sources
# name (or GDN_DEBIAN_ARCHIVE), through a private apt configuration under the
# cache directory: nothing on the system is changed and no root is needed.
# Idempotent: a second run only checks the cache and prints (well under 1 s).
#
# Environment:
#   GDN_CUDA_SDK_DIR    cache directory (default: ${XDG_CACHE_HOME:-~/.cache}/gdn/cuda-sdk)
#   CUDA_HOME           a toolkit to prefer when it is 12.x
#   GDN_DEBIAN_ARCHIVE  a Debian archive URI to use instead of the apt sources'
#                       (e.g. on Ubuntu, whose sources list no Debian archive)
#   GDN_APT_SOURCES     apt source files to read instead of /etc/apt's (tests)
# Diagnostics go to stderr; stdout carries only the export lines.
#
# `cuda-sdk.sh --print-archive` prints the Debian archive URI it would fetch
# from and exits (status 1 when the apt sources name none).
set -euo pipefail

say() { echo "cuda-sdk: $*" >&2; }
die() {
	say "error: $*"
	exit 1
}

cache="${GDN_CUDA_SDK_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gdn/cuda-sdk}"

# Pinned package versions (Debian non-free). Changing one changes the stamp,
# so the cache is refreshed.
CUDA_DEV_PKG="nvidia-cuda-dev=12.4.127~12.4.1-2"
NVRTC_PKG="libnvrtc12=12.4.127~12.4.1-2"
BUILTINS_PKG="libnvrtc-builtins12.4=12.4.127~12.4.1-2"
LIBCUDA_PKG="libcuda1=535.261.03-1"
stamp_want="$CUDA_DEV_PKG $NVRTC_PKG $BUILTINS_PKG $LIBCUDA_PKG v2"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

# cuda_major DIR prints the CUDA major version of DIR/include/cuda.h, or nothing.
cuda_major() {
	local h="$1/include/cuda.h"
	[[ -f $h ]] || return 0
	local v
	v=$(sed -n 's/^#define CUDA_VERSION \([0-9]*\).*/\1/p' "$h" | head -1)
	[[ -n $v ]] && echo $((v / 1000))
	return 0
}

# first_file prints the first of its arguments that exists.
first_file() {
	local f
	for f in "$@"; do
		if [[ -e $f ]]; then
			echo "$f"
			return 0
		fi
	done
	return 0
}

# An installed 12.x toolkit needs no download for the headers; when it also
# has NVRTC 12 and the libcuda stub, nothing is downloaded at all.
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
tk_nvrtc="" tk_libcuda=""
if [[ -n $toolkit ]]; then
	tk_nvrtc=$(first_file "$toolkit"/lib64/libnvrtc.so.12 "$toolkit"/targets/x86_64-linux/lib/libnvrtc.so.12 \
		"$toolkit"/lib/x86_64-linux-gnu/libnvrtc.so.12)
	tk_libcuda=$(first_file "$toolkit"/lib64/stubs/libcuda.so "$toolkit"/targets/x86_64-linux/lib/stubs/libcuda.so \
		"$toolkit"/lib/x86_64-linux-gnu/libcuda.so)
fi

# apt_source_files lists the apt source files to read, one-line (.list) and
# deb822 (.sources) alike.
apt_source_files() {
	if [[ -n ${GDN_APT_SOURCES:-} ]]; then
		printf '%s\n' $GDN_APT_SOURCES
		return 0
	fi
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[[ -f $f ]] && echo "$f"
	done
	return 0
}

# debian_archive prints the URI of the first Debian archive entry in the
# machine's apt sources: a "deb" entry whose suite is a Debian release
# (bookworm, trixie, stable, sid, ...; not -security or -updates), in either
# source format. It prints nothing when there is none.
debian_archive() {
	local releases="buster bullseye bookworm trixie forky duke sid oldoldstable oldstable stable testing unstable"
	local f found=""
	while read -r f; do
		case "$f" in
		*.sources)
			# deb822: paragraphs of "Field: value" lines, blank-line separated.
			found=$(awk -v rel=" $releases " '
				function flush() {
					if (!done && types ~ /(^| )deb( |$)/ && enabled != "no" && uris != "") {
						n = split(suites, s, " ")
						for (i = 1; i <= n; i++) if (index(rel, " " s[i] " ")) { split(uris, u, " "); print u[1]; done = 1; break }
					}
					types = ""; uris = ""; suites = ""; enabled = ""
				}
				/^[ \t]*#/ { next }
				/^[ \t]*$/ { flush(); next }
				{
					key = tolower($1); sub(/:$/, "", key)
					val = $0; sub(/^[^:]*:[ \t]*/, "", val)
					if (key == "types") types = val
					else if (key == "uris") uris = val
					else if (key == "suites") suites = val
					else if (key == "enabled") enabled = tolower(val)
				}
				END { flush() }' "$f")
			;;
		*)
			# One-line: deb [options] uri suite component...
			found=$(awk -v rel=" $releases " '
				/^[ \t]*#/ || NF < 3 || $1 != "deb" { next }
				{
					i = 2
					if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
					if (i + 1 <= NF && index(rel, " " $(i+1) " ")) { print $i; exit }
				}' "$f")
			;;
		esac
		if [[ -n $found ]]; then
			echo "$found"
			return 0
		fi
	done < <(apt_source_files)
	return 0
}

# unpack_headers extracts the three headers from the 934 MB nvidia-cuda-dev
# archive into root, printing progress: tar reads the whole data stream, so
# the share of it read so far is the share of the wait that is over.
unpack_headers() {
	local deb="$1" root="$2"
	local total fifo
	total=$(($(dpkg-deb -f "$deb" Installed-Size 2>/dev/null || echo 0) * 1024))
	fifo="$cache/unpack.fifo"
	rm -f "$fifo" && mkfifo "$fifo"
	dpkg-deb --fsys-tarfile "$deb" >"$fifo" &
	local dpid=$!
	# The member list names every header wanted; cuda_stdint.h only exists
	# in some packagings, so tar may complain about it (checked below).
	tar -x -C "$root" -f "$fifo" './usr/include/cuda.h' './usr/include/cudaTypedefs.h' \
		'./usr/include/cuda_stdint.h' 2>"$cache/unpack.err" &
	local tpid=$!
	local start=$SECONDS shown=0 pct read
	printf 'cuda-sdk: unpacking cuda.h from nvidia-cuda-dev (20 to 40 s): ' >&2
	while kill -0 "$tpid" 2>/dev/null; do
		sleep 1
		read=$(sed -n 's/^rchar: //p' "/proc/$tpid/io" 2>/dev/null || true)
		if [[ -n $read && $total -gt 0 ]]; then
			pct=$((read * 100 / total))
			((pct > 99)) && pct=99
			# One mark per 10% passed: readable on a terminal and in a log.
			while ((shown + 10 <= pct)); do
				shown=$((shown + 10))
				printf '%d%% ' "$shown" >&2
			done
		else
			printf '.' >&2
		fi
	done
	local trc=0 drc=0
	wait "$tpid" || trc=$?
	wait "$dpid" || drc=$?
	rm -f "$fifo"
	echo "done in $((SECONDS - start)) s" >&2
	[[ $drc == 0 ]] || die "dpkg-deb --fsys-tarfile $deb failed (status $drc)"
	if [[ ! -f $root/usr/include/cuda.h || ! -f $root/usr/include/cudaTypedefs.h ]]; then
		cat "$cache/unpack.err" >&2
		die "cuda.h or cudaTypedefs.h not found in $deb (tar status $trc)"
	fi
	rm -f "$cache/unpack.err"
}

fetch() {
	local need_headers=1
	[[ -n $toolkit ]] && need_headers=0
	command -v apt-get >/dev/null || die "apt-get not found: install a CUDA 12 toolkit and set CUDA_HOME, or run on Debian/Ubuntu"
	command -v dpkg-deb >/dev/null || die "dpkg-deb not found: install dpkg, or a CUDA 12 toolkit (CUDA_HOME)"
	[[ -f $KEYRING ]] || die "$KEYRING not found: install the Debian archive keyring (package debian-archive-keyring), or a CUDA 12 toolkit (CUDA_HOME)"
	local archive="${GDN_DEBIAN_ARCHIVE:-}"
	if [[ -z $archive ]]; then
		archive=$(debian_archive)
		[[ -n $archive ]] || die "no Debian archive in the apt sources ($(apt_source_files | tr '\n' ' ')): set GDN_DEBIAN_ARCHIVE to a Debian mirror's URI, or CUDA_HOME to a CUDA 12 toolkit"
	fi
	local apt="$cache/apt"
	mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$cache/debs"
	# Trixie carries the 12.4 toolkit packages, bookworm the 535 libcuda
	# (linked against only). A private source list and state directory leave
	# the system's apt configuration alone.
	cat >"$apt/sources.list" <<-EOF
		deb [signed-by=$KEYRING] $archive trixie non-free
		deb [signed-by=$KEYRING] $archive bookworm non-free
	EOF
	local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State::Lists=$apt/lists" -o "Dir::Cache::Archives=$apt/archives"
		-o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
		-o APT::Architecture=amd64 -o APT::Sandbox::User="$(id -un)" -q)
	local pkgs=("$NVRTC_PKG" "$BUILTINS_PKG" "$LIBCUDA_PKG")
	local what="NVRTC 12.4 and libcuda (about 20 MB)"
	if ((need_headers)); then
		pkgs+=("$CUDA_DEV_PKG")
		what="CUDA 12.4 headers, NVRTC 12.4 and libcuda (about 950 MB, once)"
	fi
	say "fetching $what from $archive (Debian non-free)"
	apt-get "${opts[@]}" update >&2 || die "apt-get update with $archive failed"
	(cd "$cache/debs" && apt-get "${opts[@]}" download "${pkgs[@]}" >&2) || die "apt-get download ${pkgs[*]} failed"

	local root="$cache/root"
	rm -rf "$root" && mkdir -p "$root"
	local deb
	for deb in "$cache"/debs/libnvrtc12_*.deb "$cache"/debs/libnvrtc-builtins12.4_*.deb "$cache"/debs/libcuda1_*.deb; do
		dpkg-deb -x "$deb" "$root"
	done
	if ((need_headers)); then
		unpack_headers "$(ls "$cache"/debs/nvidia-cuda-dev_*.deb)" "$root"
	fi
	# Keep what the build needs in a flat layout; drop the archives.
	# libcuda goes into its own folder, named only to the linker: on the
	# loader path it would shadow the real driver library of a GPU machine.
	rm -rf "$cache/include" "$cache/lib" "$cache/link"
	mkdir -p "$cache/include" "$cache/lib" "$cache/link"
	if ((need_headers)); then
		cp "$root"/usr/include/cuda*.h "$cache/include/"
	fi
	local nv="$root/usr/lib/x86_64-linux-gnu"
	cp -P "$nv"/libnvrtc.so.12* "$nv"/libnvrtc-builtins.so.12.4* "$cache/lib/"
	cp -P "$nv"/nvidia/current/libcuda.so* "$cache/link/" 2>/dev/null || cp -P "$nv"/libcuda.so* "$cache/link/"
	# The linker wants the unversioned name.
	local real
	real=$(cd "$cache/link" && ls libcuda.so.[0-9]*.* | head -1)
	ln -sf "$real" "$cache/link/libcuda.so"
	ln -sf "$real" "$cache/link/libcuda.so.1"
	rm -rf "$root" "$cache/debs" "$apt/archives"
	echo "$stamp_want toolkit=$toolkit" >"$cache/stamp"
}

if [[ ${1:-} == --print-archive ]]; then
	archive="${GDN_DEBIAN_ARCHIVE:-$(debian_archive)}"
	[[ -n $archive ]] || die "no Debian archive in the apt sources ($(apt_source_files | tr '\n' ' '))"
	echo "$archive"
	exit 0
elif [[ $# -gt 0 ]]; then
	die "unknown argument $1 (the only one is --print-archive)"
fi

mkdir -p "$cache"
if [[ -n $toolkit && -n $tk_nvrtc && -n $tk_libcuda ]]; then
	# Everything from the toolkit: nothing to fetch.
	inc="$toolkit/include"
	nvrtc="$tk_nvrtc"
	libdir=$(dirname "$tk_nvrtc")
	linkdir=$(dirname "$tk_libcuda")
else
	if [[ ! -f $cache/stamp || $(cat "$cache/stamp") != "$stamp_want toolkit=$toolkit" ]] ||
		[[ -z $toolkit && ! -f $cache/include/cuda.h ]] || [[ ! -e $cache/lib/libnvrtc.so.12 || ! -e $cache/link/libcuda.so ]]; then
		fetch
	fi
	inc="$cache/include"
	[[ -n $toolkit ]] && inc="$toolkit/include"
	nvrtc="$cache/lib/libnvrtc.so.12"
	[[ -e $nvrtc ]] || die "libnvrtc.so.12 missing from $cache/lib"
	libdir="$cache/lib"
	linkdir="$cache/link"
fi

# Headers first: gorgonia's own `-I/usr/local/cuda/include` comes after
# CGO_CFLAGS, so these 12.x headers win even where /usr/local/cuda is 13.
echo "export CGO_CFLAGS=\"-I$inc\""
echo "export CGO_LDFLAGS=\"-L$linkdir\""
echo "export GDN_NVRTC_PATH=\"$nvrtc\""
# libnvrtc loads its builtins by soname, found through the loader path that
# was set before the process started.
echo "export LD_LIBRARY_PATH=\"$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\""
echo "export GDN_CUDA_SDK=\"$cache\""
say "ready: headers $inc, NVRTC $nvrtc"
