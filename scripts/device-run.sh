#!/usr/bin/env bash
# device-run.sh: runs on the GPU machine, from the repository root, after
# scripts/device-build.sh filled .bin/. Logs go to $OUT (or ./device-out).
#
#   .bin/device-run.sh [tests] [sanitize] [bench] [bench:CASES]
#
# tests     the GPU tests of every package (-test.v)
# sanitize  compute-sanitizer memcheck, racecheck and synccheck on small cases
# bench     gdn bench over the whole suite (bench:a,b for named cases)
# example   the main example (examples/prefill)
set -uo pipefail
out="${OUT:-device-out}"
mkdir -p "$out"
export GDN_CACHE_DIR="${GDN_CACHE_DIR:-/tmp/gdn-cache}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv >"$out/gpu.txt" 2>&1
status=0
for step in "${@:-tests}"; do
	case "$step" in
	tests)
		for t in .bin/*.test; do
			name=$(basename "$t" .test)
			echo "== $name" >&2
			timeout 200 "$t" -test.v -test.count=1 -test.timeout 190s >"$out/test-$name.log" 2>&1 || { status=1; echo "FAIL $name" >&2; }
			grep -E "^(--- FAIL|FAIL|ok|PASS)|METRIC" "$out/test-$name.log" | tail -60 >&2
		done
		;;
	sanitize)
		san=/usr/local/cuda/bin/compute-sanitizer
		small='TestCoreMatchesReference/(T65_Hq2_Hv8|T1_Hq1_Hv1|varlen_0_1_edges|fp16_varlen)'
		for tool in memcheck racecheck synccheck; do
			echo "== sanitizer $tool" >&2
			timeout 150 "$san" --tool "$tool" --error-exitcode 9 .bin/gdn.test -test.run "$small" -test.count=1 >"$out/san-$tool.log" 2>&1 || { status=1; echo "FAIL sanitizer $tool" >&2; }
			tail -5 "$out/san-$tool.log" >&2
		done
		;;
	bench*)
		cases=""
		[[ $step == bench:* ]] && cases="--cases ${step#bench:}"
		echo "== bench $cases" >&2
		timeout 240 .bin/gdn bench $cases --csv "$out/bench.csv" >"$out/bench.txt" 2>"$out/bench.err" || { status=1; echo "FAIL bench" >&2; tail -20 "$out/bench.err" >&2; }
		cat "$out/bench.txt" >&2
		;;
	example)
		echo "== example" >&2
		.bin/prefill >"$out/example.log" 2>&1 || { status=1; echo "FAIL example" >&2; }
		tail -30 "$out/example.log" >&2
		;;
	*)
		echo "unknown step $step" >&2
		status=2
		;;
	esac
done
exit $status
