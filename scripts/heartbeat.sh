#!/usr/bin/env bash
# heartbeat.sh: runs a command and, whenever its output has been silent for
# HEARTBEAT seconds (default 15), prints a line saying it still runs, and
# one when it ends, so that a long step of `make test` (go vet, a build)
# never leaves the terminal or a CI log silent. Its output (stdout and
# stderr, merged) passes through unchanged; the exit status is the
# command's.
#
#   scripts/heartbeat.sh LABEL COMMAND [ARG...]
set -uo pipefail
if (($# < 2)); then
	echo "usage: scripts/heartbeat.sh LABEL COMMAND [ARG...]" >&2
	exit 2
fi
label="$1"
shift
every="${HEARTBEAT:-15}"
start=$(date +%s)
last="$(mktemp)" # its modification time is the time of the last line
ticker=""
trap 'rm -f "$last"; [[ -n $ticker ]] && kill "$ticker" 2>/dev/null' EXIT

(
	while sleep 1; do
		kill -0 $$ 2>/dev/null || exit 0 # the script is gone: so is its ticker
		now=$(date +%s)
		if ((now - $(stat -c %Y "$last" 2>/dev/null || echo "$now") >= every)); then
			echo "  ... $label: $((now - start)) s"
			touch "$last"
		fi
	done
) &
ticker=$!

"$@" 2>&1 | while IFS= read -r line || [[ -n $line ]]; do
	printf '%s\n' "$line"
	touch "$last"
done
rc=${PIPESTATUS[0]}
# A closing line, so that two silent steps in a row still print a line
# every HEARTBEAT seconds.
if ((rc == 0)); then
	echo "  ... $label: done in $(($(date +%s) - start)) s"
else
	echo "  ... $label: failed (status $rc) after $(($(date +%s) - start)) s"
fi
exit "$rc"
