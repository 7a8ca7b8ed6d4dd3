#!/usr/bin/env bash
# device-run.sh: runs on the GPU machine, from the repository root, after
# scripts/device-build.sh filled .bin/. Logs go to $OUT (or ./device-out),
# at most one file per step (the device tool brings back 8 files; with
# more, all but gpu.txt are bundled into outputs.tgz).
#
#   .bin/device-run.sh [warmup] [tests] [sanitize[:TOOLS][@GROUPS]] [soak[:MINUTES]] [stress[:SECONDS]] [gchunt[:SECONDS]] [plancheck[:CASES]] [splitgrid[:CASES]] [bench] [bench:CASES] [compare[:CASES]] [comparefull[:CASES]] [knob:DEFINES[@CASES]] [knobfull:DEFINES[@CASES]] [lab:EXPERIMENT[@CASES]] [labfull:EXPERIMENT[@CASES]] [ncu:KERNEL@CASE] [ncufull:KERNEL@CASE] [kerneltimes[:CASES]] [kerneltimesfull[:CASES]] [profile[:CASES]] [profilefull[:CASES]] [benchfull] [benchfull:CASES] [benchl2norm[:CASES]] [hostbench] [example] [layer] [python] [serving] [pyabi] [flatests] [pybench[:CASES]] [soakbg[:MINUTES]] [soakwait]
#
# Each step, its arguments and the file it writes: scripts/README.md.
set -uo pipefail
out="${OUT:-device-out}"
mkdir -p "$out"
export GDN_CACHE_DIR="${GDN_CACHE_DIR:-/tmp/gdn-cache}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv >"$out/gpu.txt" 2>&1
# The build this run timed (a tool older than `gdn version` adds nothing).
[[ -x .bin/gdn ]] && .bin/gdn version >>"$out/gpu.txt" 2>/dev/null
status=0
fail() { status=1; echo "FAIL $*" >&2; }
# all_ok FILE: every variant row of a gdn warmup table in FILE ends in "ok"
# (no spills, no serialised wgmma, no compile error; "ok (no report)", a
# cubin whose ptxas report NVRTC left out, is not enough).
all_ok() { ! grep -E "^gdn_" "$1" | grep -vqE "[[:space:]]ok( \(ptx\))?$"; }
# fresh_home CMD...: CMD with an empty HOME and XDG_CACHE_HOME (removed
# after), so that NVRTC 13 compiles every program anew and reports ptxas's
# registers and spills: from a cache of its own under the home it returns
# cubins without the report (docs/PERF.md v29).
fresh_home() {
	local h rc
	h=$(mktemp -d)
	HOME="$h" XDG_CACHE_HOME="$h/.cache" "$@"
	rc=$?
	rm -rf "$h"
	return $rc
}
# same_outputs OLD.csv NEW.csv [OLD_NAME]: one line saying which cases gave
# the same output digest (out_hash: the last call's o of each input set) in
# both runs, bit for bit, and which did not; a change meant to keep the bits
# (a new memory layout, a new schedule of the same sums) shows as all the
# same. OLD_NAME names the first run (default gdn-old). Nothing when either
# CSV lacks the column (an older binary).
same_outputs() {
	awk -F, -v old_name="${3:-gdn-old}" 'FNR == 1 { c = h = 0; for (i = 1; i <= NF; i++) { if ($i == "case") c = i; if ($i == "out_hash") h = i }; if (!h) bad = 1; next }
		!h { next }
		FNR == NR { old[$c] = $h; next }
		($c in old) { if (old[$c] == $h) same = same " " $c; else diff = diff " " $c }
		END { if (bad) exit; printf "outputs bit-identical to %s:%s; differ:%s\n", old_name, (same == "" ? " none" : same), (diff == "" ? " none" : diff) }' "$1" "$2"
}
# soak_limit MINUTES: the timeout of a soak of MINUTES (fractional allowed),
# in whole seconds: gdn soak stops drawing problems at --minutes, and the
# extra two minutes leave room for the problem in flight and the reference
# of the last one.
# fla_abs: FLA_PATH made absolute (empty without it), for PYTHONPATH from
# any folder: a relative ".fla" once left FLA unimportable.
fla_abs() { [[ -z ${FLA_PATH:-} ]] || (cd "$FLA_PATH" && pwd); }
soak_limit() { awk -v m="$1" 'BEGIN { printf "%d", m * 60 + 120 }'; }
for step in "${@:-tests}"; do
	case "$step" in
	tests)
		for t in .bin/*.test; do
			name=$(basename "$t" .test)
			# A test binary runs in its package's folder, as go test runs
			# it (tests read testdata/ relative to it): gdn -> ., cmd-gdn -> cmd/gdn.
			dir=.
			[[ $name != gdn ]] && dir=${name//-//}
			echo "== $name" | tee -a "$out/tests.log" >&2
			(cd "$dir" && timeout 330 "$OLDPWD/$t" -test.v -test.count=1 -test.timeout 320s) >"$out/test.tmp" 2>&1 || fail "$name"
			cat "$out/test.tmp" >>"$out/tests.log"
			grep -E "^(--- FAIL|FAIL|ok|PASS)|METRIC worst" "$out/test.tmp" | tail -20 >&2
		done
		rm -f "$out/test.tmp"
		;;
	sanitize | sanitize:* | sanitize@*)
		# Every variant the planner can choose, forced, on small and tail
		# shapes: TestEveryVariant (forward_variants_gpu_test.go). initcheck also
		# checks that no kernel reads device memory nothing wrote.
		# sanitize:racecheck,initcheck runs only the tools named (to split
		# the four over device calls of 10 minutes); @prep,fused only those
		# groups of tests (a change to one kernel need not rerun the rest).
		san="${SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}"
		spec=${step#sanitize}
		groups="variants prep norm fused serving"
		[[ $spec == *@* ]] && groups="${spec#*@}" && groups="${groups//,/ }" && spec=${spec%%@*}
		tools="memcheck racecheck synccheck initcheck"
		[[ $spec == :* ]] && tools="${spec#:}" && tools="${tools//,/ }"
		for group in $groups; do
			case $group in
			variants | prep | norm | fused | serving) ;;
			*) fail "sanitize: no test group $group (want variants, prep, norm, fused or serving)"; groups="" ;;
			esac
		done
		for tool in $tools; do
			echo "== sanitizer $tool ($groups)" | tee -a "$out/san.log" >&2
			for group in $groups; do
				case $group in
				variants) run='^TestEveryVariant$' limit=280 what="" ;;
				# The full forward's prep kernel, on packed sequences with
				# empty and one-token ones, fp16, in-kernel gate and L2 norm,
				# one and four value heads a block.
				prep) run='^TestFullMatchesReference$/^seg0_prep[04]$/^(plain|l2norm_gate_varlen_fp16|l2norm_G4_varlen)$' limit=200 what=" (full)" ;;
				# The core kernel's own L2 norm (gdn_hopper_bf16_l2norm_bv128)
				# beside the copies it must equal, G = 2, 4 and 8, varlen.
				norm) run='^TestFullNormInCoreBitIdentical$' limit=200 what=" (in-core norm)" ;;
				# The whole preparation in the core kernel (gdn_hopper_bf16_fused_bv128,
				# and gdn_hopper_bf16_fused_nonorm_bv128 without the L2 norm).
				fused) run='^TestFullFused$' limit=200 what=" (fused)" ;;
				# The serving layer: decode, pooled prefills (unsplit and
				# split) with the states variants and their scan,
				# checkpoints, and mixed batches.
				serving) run='^(TestDecodeMatchesReference|TestPoolCoreMatchesReference|TestPoolSplitEarly|TestCheckpointsFull|TestCheckpointsSplitEarly|TestForwardMixedMatchesReference)$' limit=280 what=" (serving)" ;;
				esac
				timeout "$limit" "$san" --tool "$tool" --error-exitcode 9 .bin/gdn.test -test.run "$run" -test.count=1 -test.v >>"$out/san.log" 2>&1 || fail "sanitizer $tool$what"
			done
			grep -E "ERROR SUMMARY|^(--- FAIL|FAIL|ok|PASS)" "$out/san.log" | tail -2 >&2
		done
		;;
	soak | soak:*)
		minutes=9
		[[ $step == soak:* ]] && minutes="${step#soak:}"
		seed="${SOAK_SEED:-$(date +%s)}"
		echo "== soak $minutes minutes, seed $seed" | tee "$out/soak.log" >&2
		timeout "$(soak_limit "$minutes")" .bin/gdn soak --minutes "$minutes" --seed "$seed" >>"$out/soak.log" 2>&1 || fail soak
		grep -E "^(FAIL|soak: variant)" "$out/soak.log" | head -20 >&2
		tail -4 "$out/soak.log" >&2
		;;
	stress | stress:*)
		secs=240
		[[ $step == stress:* ]] && secs="${step#stress:}"
		variant="${STRESS_VARIANT:-gdn_hopper_bf16_bv64}"
		cases="${STRESS_CASES:-tp8_2k,chain_equal}"
		gdn="${STRESS_GDN:-.bin/gdn}"
		echo "== stress $secs s: $gdn, $variant on $cases, --segments 4" | tee "$out/stress.log" >&2
		tmp=$(mktemp -d)
		end=$((SECONDS + secs))
		n=0
		bad=0
		while :; do
			n=$((n + 1))
			# Few reps: the digests see each input set's last call only, so
			# more, shorter processes look at more calls.
			if ! timeout 60 "$gdn" bench --full --variant "$variant" --segments 4 --reps 5 --cases "$cases" --csv "$tmp/run.csv" >"$tmp/run.txt" 2>&1; then
				bad=$((bad + 1))
				{ echo "process $n failed:"; tail -3 "$tmp/run.txt"; } >>"$out/stress.log"
			elif ! head -1 "$tmp/run.csv" | tr , '\n' | grep -qx out_hash; then
				[[ $n == 1 ]] && echo "no out_hash column in $gdn's CSV: exit status only" | tee -a "$out/stress.log" >&2
			else
				# "case digest" lines, compared with the first process's.
				awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "case") c = i; if ($i == "out_hash") h = i }; next } { print $c, $h }' \
					"$tmp/run.csv" >"$tmp/digests.txt"
				if [[ ! -f $tmp/first.txt ]]; then
					cp "$tmp/digests.txt" "$tmp/first.txt"
				elif ! cmp -s "$tmp/first.txt" "$tmp/digests.txt"; then
					bad=$((bad + 1))
					{ echo "process $n: outputs differ from the first process's:"; diff "$tmp/first.txt" "$tmp/digests.txt"; } >>"$out/stress.log"
				fi
			fi
			((SECONDS < end)) || break
		done
		rm -rf "$tmp"
		echo "$n processes, $bad failed" | tee -a "$out/stress.log" >&2
		((bad == 0)) || fail stress
		;;
	gchunt | gchunt:*)
		secs=240
		[[ $step == gchunt:* ]] && secs="${step#gchunt:}"
		bins=(.bin/gdn.test)
		[[ -x .bin/gdn-norandheap.gchunt ]] && bins+=(.bin/gdn-norandheap.gchunt)
		run="${GCHUNT_RUN:-^Test(Full|Split|Core)}"
		echo "== gchunt $secs s: ${bins[*]}, -test.run '$run', GOGC=${GCHUNT_GOGC:-10}" | tee "$out/gchunt.log" >&2
		declare -A runs=() failed=() badptr=()
		end=$((SECONDS + secs))
		i=0
		while :; do
			b=${bins[$((i % ${#bins[@]}))]}
			i=$((i + 1))
			name=$(basename "$b")
			runs[$name]=$((${runs[$name]:-0} + 1))
			if ! GOGC="${GCHUNT_GOGC:-10}" timeout 300 "$b" -test.run "$run" -test.count=1 >"$out/gchunt.tmp" 2>&1; then
				failed[$name]=$((${failed[$name]:-0} + 1))
				grep -q "bad pointer" "$out/gchunt.tmp" && badptr[$name]=$((${badptr[$name]:-0} + 1))
				if ((${failed[$name]} == 1)); then
					{ echo "== $name, run ${runs[$name]}: first failure"; head -c 200000 "$out/gchunt.tmp"; } >>"$out/gchunt.log"
				fi
			fi
			# Whole rounds only: every binary gets as many runs as the others
			# (and at least one), however slow a run was.
			((SECONDS < end || i % ${#bins[@]} != 0)) || break
		done
		rm -f "$out/gchunt.tmp"
		bad=0
		for b in "${bins[@]}"; do
			name=$(basename "$b")
			echo "$name: ${runs[$name]:-0} runs, ${failed[$name]:-0} failed, ${badptr[$name]:-0} bad pointers" | tee -a "$out/gchunt.log" >&2
			bad=$((bad + ${failed[$name]:-0}))
		done
		((bad == 0)) || fail gchunt
		;;
	splitgrid | splitgrid:*)
		cases=tp8_32k,tp4_32k,tp8_8k,chain_equal,tp2_32k,tp2_16kx2,tp8_2k
		[[ $step == splitgrid:* ]] && cases="${step#splitgrid:}"
		echo "== splitgrid $cases" >&2
		grid="$out/splitgrid"
		mkdir -p "$grid"
		for w in 64 128; do
			v=gdn_hopper_bf16_bv$w
			for x in 64 128; do
				for s in 8 16 32 64 128; do
					timeout 120 .bin/gdn bench --reps 20 --variant $v --transfer-tile $x --segments $s --cases "$cases" \
						--csv "$grid/bv$w-x$x-s$s.csv" >"$grid/bv$w-x$x-s$s.txt" 2>&1 || fail "splitgrid (bv$w x$x s$s)"
				done
			done
			timeout 120 .bin/gdn bench --reps 20 --variant $v --segments -1 --cases "$cases" \
				--csv "$grid/bv$w-unsplit.csv" >"$grid/bv$w-unsplit.txt" 2>&1 || fail "splitgrid (bv$w unsplit)"
		done
		(cd "$out" && tar czf splitgrid.tgz splitgrid && rm -rf splitgrid)
		;;
	plancheck | plancheck:*)
		cases=""
		[[ $step == plancheck:* ]] && cases="--cases ${step#plancheck:}"
		echo "== plancheck $cases" | tee "$out/plancheck.txt" >&2
		tmp=$(mktemp -d)
		runs="auto gdn_hopper_bf16_bv64 gdn_hopper_bf16_bv128"
		for v in $runs; do
			flag=""
			[[ $v != auto ]] && flag="--variant $v"
			# shellcheck disable=SC2086 # cases and flag are word lists
			timeout 180 .bin/gdn bench $cases $flag --csv "$tmp/$v.csv" >>"$out/plancheck.txt" 2>&1 || fail "plancheck ($v)"
			# A run that died leaves no rows: its column stays empty.
			[[ -s $tmp/$v.csv ]] || echo "case,median_ms,variant,plan" >"$tmp/$v.csv"
		done
		# One row per case: the planner's plan and time, each forced
		# width's time, and the planner's time over the best of the three.
		# shellcheck disable=SC2086 # one CSV per run, in order
		awk -F, '
			FNR == 1 { f++; for (i = 1; i <= NF; i++) col[f, $i] = i; next }
			{ c = $col[f, "case"]; ms[c, f] = $col[f, "median_ms"]
			  if (f == 1) {
				order[++n] = c; plan[c] = $col[1, "variant"]; sub(/^gdn_hopper_/, "", plan[c])
				if (match($col[1, "plan"], /split=[0-9x]+/)) plan[c] = plan[c] " " substr($col[1, "plan"], RSTART, RLENGTH)
				if (match($col[1, "plan"], /transfer-tile=[0-9]+/)) plan[c] = plan[c] " xfer" substr($col[1, "plan"], RSTART + 14, RLENGTH - 14)
			  } }
			END {
				printf "%-18s %-24s %9s %9s %9s %10s\n", "case", "planner", "ms", "bv64 ms", "bv128 ms", "over best"
				slow = 0
				for (k = 1; k <= n; k++) {
					c = order[k]; best = ms[c, 1]
					for (j = 2; j <= 3; j++) if (ms[c, j] != "" && ms[c, j] + 0 < best + 0) best = ms[c, j]
					r = ms[c, 1] / best; mark = r > 1.03 ? " *" : ""; slow += r > 1.03
					printf "%-18s %-24s %9s %9s %9s %9.2fx%s\n", c, plan[c], ms[c, 1], ms[c, 2], ms[c, 3], r, mark
				}
				printf "planner more than 3%% slower than the best tile on %d of %d cases\n", slow, n
			}' $(for v in $runs; do echo "$tmp/$v.csv"; done) | tee -a "$out/plancheck.txt" >&2
		rm -rf "$tmp"
		;;
	warmup)
		echo "== warmup (this machine's NVRTC, empty cache)" >&2
		wc=$(mktemp -d)
		fresh_home timeout 300 .bin/gdn warmup --cache-dir "$wc" --strict >"$out/warmup.txt" 2>&1 || fail warmup
		rm -rf "$wc"
		grep -E "^(variant|gdn_)" "$out/warmup.txt" >&2
		# Every row of the table must end in "ok".
		all_ok "$out/warmup.txt" || fail "warmup: a variant spills, is serialised or failed"
		;;
	compare | compare:* | comparefull | comparefull:*)
		# comparefull: the same with gdn bench --full (the full forward).
		name=${step%%:*}
		cases=""
		[[ $step == *:* ]] && cases="--cases ${step#*:}"
		full=""
		# (--no-l2norm spelt out: gdn-old may be a build from before
		# PERF.md v35, where --full alone meant the norm inside.)
		[[ $name == comparefull ]] && full="--full --no-l2norm"
		if [[ ! -x .bin/gdn-old ]]; then
			fail "$name: no .bin/gdn-old (build it with scripts/device-build.sh --old REV)"
			continue
		fi
		echo "== $name $cases" >&2
		timeout 240 .bin/gdn-old bench $full $cases --csv "$out/$name-old.csv" >"$out/$name.txt" 2>&1 || fail "$name (old)"
		timeout 240 .bin/gdn bench $full $cases --csv "$out/$name-new.csv" --compare "$out/$name-old.csv" >>"$out/$name.txt" 2>&1 || fail "$name (new)"
		same_outputs "$out/$name-old.csv" "$out/$name-new.csv" >>"$out/$name.txt"
		sed -n '/old ms/,$p' "$out/$name.txt" >&2
		# The revisions of scripts/device-build.sh --also, each against the
		# same baseline run.
		for extra in .bin/gdn+*; do
			[[ -x $extra ]] || continue
			echo "== $name: ${extra#.bin/} against gdn-old" | tee -a "$out/$name.txt" >&2
			timeout 240 "$extra" bench $full $cases --csv "$out/$name-extra.csv" --compare "$out/$name-old.csv" >"$out/$name-extra.txt" 2>&1 || fail "$name (${extra#.bin/})"
			same_outputs "$out/$name-old.csv" "$out/$name-extra.csv" >>"$out/$name-extra.txt"
			cat "$out/$name-extra.txt" >>"$out/$name.txt"
			sed -n '/old ms/,$p' "$out/$name-extra.txt" >&2
		done
		rm -f "$out/$name-old.csv" "$out/$name-new.csv" "$out/$name-extra.csv" "$out/$name-extra.txt"
		;;
	knob:* | knobfull:* | lab:* | labfull:*)
		# The same development build without and with the switch (defines,
		# or a lab experiment), after a warm-up of every variant with it.
		name=${step%%:*}
		spec=${step#*:}
		cases=""
		[[ $spec == *@* ]] && cases="--cases ${spec#*@}" && spec=${spec%%@*}
		full=""
		[[ $name == *full ]] && full="--full"
		if [[ $name == knob* ]]; then
			with=(GDN_JIT_DEFINES="${spec//+/ }")
		else
			with=(GDN_LAB="$spec")
		fi
		dev=${DEV_GDN:-.bin/gdn-dev}
		echo "== $name [${with[*]}] $cases" | tee -a "$out/$name.txt" >&2
		if [[ ! -x $dev ]]; then
			fail "$name: no $dev (scripts/device-build.sh --dev builds it: only a development build reads ${with[0]%%=*})"
			continue
		fi
		tmp=$(mktemp -d)
		(export "${with[@]}" && fresh_home timeout 300 "$dev" warmup --cache-dir "$tmp/cache" --strict) >"$tmp/warmup.txt" 2>&1 || fail "$name: warmup with ${with[*]}"
		cat "$tmp/warmup.txt" >>"$out/$name.txt"
		all_ok "$tmp/warmup.txt" || fail "$name: a variant spills, is serialised or failed with ${with[*]}"
		timeout 240 "$dev" bench $full $cases --csv "$tmp/without.csv" >>"$out/$name.txt" 2>&1 || fail "$name (without)"
		(export "${with[@]}" && timeout 240 "$dev" bench $full $cases --csv "$tmp/with.csv" --compare "$tmp/without.csv") >"$tmp/with.txt" 2>&1 || fail "$name (with ${with[*]})"
		# An experiment that moves the same work (lab's pingpong,
		# static_ring) must show all the same; one that leaves work out
		# shows which cases it changed.
		same_outputs "$tmp/without.csv" "$tmp/with.csv" "the same build without it" >>"$tmp/with.txt"
		cat "$tmp/with.txt" >>"$out/$name.txt"
		sed -n '/old ms/,$p' "$tmp/with.txt" >&2
		rm -rf "$tmp"
		;;
	ncu:* | ncufull:*)
		name=${step%%:*}
		spec=${step#*:}
		kernel=${spec%%@*}
		case=${spec#*@}
		if [[ $spec != *@* || -z $kernel || -z $case ]]; then
			fail "$step: want $name:KERNEL@CASE"
			continue
		fi
		full=""
		[[ $name == ncufull ]] && full="--full"
		bin=${NCU_GDN:-.bin/gdn}
		base="$out/ncu-${kernel//[^A-Za-z0-9_]/_}-$case"
		echo "== $name $kernel in $bin bench $full --cases $case" >&2
		tmp=$(mktemp -d)
		# --cache-control none: the kernel sees what the call's earlier
		# kernels left in L2, as it does in a real call. The bench's own
		# exit status is not the step's: under ncu's replays its output
		# check may find NaN (seen on a split call's graph; the GPU tests,
		# not a profiled run, say whether outputs are right).
		# --clock-control none: the card's clocks as found (ncu's default
		# locks them to base, 1.37 GHz on the H200, and the device notes
		# ask that clocks be left alone).
		timeout 240 ncu --clock-control none --cache-control none -k "regex:$kernel" --launch-count 1 \
			--section SpeedOfLight --section MemoryWorkloadAnalysis --section SchedulerStats \
			--section WarpStateStats --section Occupancy --section LaunchStats --section SourceCounters \
			-o "$tmp/rep" "$bin" bench $full --cases "$case" --reps 1 --warmup 1 --calls 1 >"$base.txt" 2>&1
		if [[ -f $tmp/rep.ncu-rep ]]; then
			timeout 120 ncu -i "$tmp/rep.ncu-rep" >>"$base.txt" 2>&1 || fail "$name $kernel@$case: print"
			timeout 120 ncu -i "$tmp/rep.ncu-rep" --page source --csv --print-source sass >"$base.csv" 2>>"$base.txt" || fail "$name $kernel@$case: source"
		else
			fail "$name $kernel@$case: no report (no launch matched?)"
		fi
		grep -E "Duration|Elapsed Cycles|L1/TEX Cache Throughput|L2 Cache Throughput|Issued Warp Per Scheduler|Registers Per Thread" "$base.txt" >&2
		rm -rf "$tmp"
		;;
	kerneltimes | kerneltimes:* | kerneltimesfull | kerneltimesfull:* | profile | profile:* | profilefull | profilefull:*)
		name=${step%%:*}
		metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active
		cases=tp8_32k,tp4_32k,tp2_32k,tp2_16kx2,q397_32k,chain_equal
		if [[ $name == profile* ]]; then
			# What explains a row that misses its core target: the
			# tensor pipe's activity, warps eligible and resident a
			# scheduler, achieved occupancy, and every stall reason
			# (warps stalled per issued instruction; the summary shows the
			# leading ones). All names checked against the H200's ncu
			# (--query-metrics) in docs/PERF.md v32.
			cases=q35_4kx8,q35_1kx8,q397_4kx8,sym32_8kx4,varlen_mix
			metrics+=,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active
			metrics+=,smsp__warps_eligible.avg.per_cycle_active,smsp__warps_active.avg.per_cycle_active
			metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active
			for r in barrier branch_resolving dispatch_stall drain gmma imc_miss lg_throttle long_scoreboard \
				math_pipe_throttle membar mio_throttle misc no_instruction not_selected selected short_scoreboard \
				sleeping tex_throttle wait; do
				metrics+=,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio
			done
		fi
		[[ $step == *:* ]] && cases=${step#*:}
		full=""
		[[ $name == *full ]] && full="--full"
		bin=${NCU_GDN:-.bin/gdn}
		echo "== $name in $bin bench $full, cases $cases" >&2
		tmp=$(mktemp -d)
		for case in ${cases//,/ }; do
			# One timed call after one warm-up (its kernels compiled and
			# cached first); three metrics (kerneltimes: a pass or two a
			# launch) or about thirty (profile: a few more passes).
			timeout 240 ncu --clock-control none --cache-control none --metrics "$metrics" \
				--csv "$bin" bench $full --cases "$case" --reps 1 --warmup 1 --calls 1 >"$tmp/$case.csv" 2>>"$out/$name.txt" ||
				fail "$name $case"
		done
		python3 scripts/kerneltimes.py "$tmp"/*.csv >>"$out/$name.txt" 2>&1 || fail "$name: summary"
		grep -v "^==PROF==\|^==WARNING==" "$out/$name.txt" >&2
		rm -rf "$tmp"
		;;
	benchfull | benchfull:*)
		cases=""
		[[ $step == benchfull:* ]] && cases="--cases ${step#benchfull:}"
		echo "== bench --full $cases" >&2
		timeout 300 .bin/gdn bench --full $cases --csv "$out/benchfull.csv" --plot "$out/benchfull.svg" >"$out/benchfull.txt" 2>>"$out/benchfull.txt" || fail benchfull
		grep -v "^bench:" "$out/benchfull.txt" >&2
		;;
	benchl2norm | benchl2norm:*)
		cases=""
		[[ $step == benchl2norm:* ]] && cases="--cases ${step#benchl2norm:}"
		echo "== bench --full --l2norm $cases" >&2
		timeout 300 .bin/gdn bench --full --l2norm $cases --csv "$out/benchl2norm.csv" >"$out/benchl2norm.txt" 2>>"$out/benchl2norm.txt" || fail benchl2norm
		grep -v "^bench:" "$out/benchl2norm.txt" >&2
		;;
	bench*)
		cases=""
		[[ $step == bench:* ]] && cases="--cases ${step#bench:}"
		echo "== bench $cases" >&2
		timeout 240 .bin/gdn bench $cases --csv "$out/bench.csv" --plot "$out/bench.svg" >"$out/bench.txt" 2>>"$out/bench.txt" || fail bench
		grep -v "^bench:" "$out/bench.txt" >&2
		;;
	hostbench)
		echo "== hostbench" >&2
		timeout 120 .bin/gdn.test -test.run '^$' -test.bench ForwardHost -test.benchtime 20x >"$out/hostbench.log" 2>&1 || fail hostbench
		timeout 60 .bin/jit.test -test.run '^$' -test.bench GPULaunch >>"$out/hostbench.log" 2>&1 || fail hostbench
		# The host side of ForwardHost without the GPU, on this host's cores:
		# preparing a 137 MB result (reused and fresh memory, before/now/THP)
		# and calls back to back (docs/PERF.md, fourth pass).
		timeout 150 .bin/internal-hostpath.test -test.run '^$' -test.bench 'PrepareResult|HostBackToBack' -test.benchtime 20x >>"$out/hostbench.log" 2>&1 || fail hostbench
		grep -E "^Benchmark|FAIL" "$out/hostbench.log" >&2
		;;
	example)
		echo "== example" >&2
		timeout 120 .bin/prefill >"$out/example.log" 2>&1 || fail example
		tail -30 "$out/example.log" >&2
		;;
	layer)
		echo "== layer (examples/qwen35_layer)" >&2
		timeout 120 .bin/qwen35_layer >"$out/layer.log" 2>&1 || fail layer
		cat "$out/layer.log" >&2
		;;
	serving)
		# The serving layer: its GPU tests (decode, pooled prefills,
		# checkpoints, mixed batches), then decode beside a copy of its
		# bytes and a mixed batch beside its halves; with FLA's source on
		# FLA_PATH, FLA's fused_recurrent on the decode suite too.
		echo "== serving" >&2
		timeout 240 .bin/gdn.test -test.run 'Mixed|Decode|Pool|Checkpoint' -test.count=1 -test.v >"$out/serving.log" 2>&1 || fail "serving tests"
		grep -E "^(--- FAIL|FAIL|ok|PASS)" "$out/serving.log" | tail -3 >&2
		timeout 150 .bin/gdn bench --decode >"$out/serving.txt" 2>&1 || fail "bench --decode"
		timeout 100 .bin/gdn bench --mixed >>"$out/serving.txt" 2>&1 || fail "bench --mixed"
		if [[ -n ${FLA_PATH:-} ]]; then
			PYTHONPATH=$FLA_PATH PYTHONUNBUFFERED=1 timeout 200 python3 scripts/fla_decode.py >>"$out/serving.txt" 2>&1 || fail "FLA decode"
		fi
		grep -v '^\[\|^  ' "$out/serving.txt" >&2
		;;
	pyabi)
		# The C ABI and the Python package: cmd/libgdn's GPU test, and the
		# package's tests on python/gdn/libgdn.so (device-build.sh builds
		# it; carry it, git ignores it).
		echo "== pyabi" >&2
		# In its package's folder, as go test runs it: its tests read the
		# package's sources (gdn.h against the exports).
		(cd cmd/libgdn && timeout 120 ../../.bin/cmd-libgdn.test -test.count=1 -test.v) >"$out/pyabi.log" 2>&1 || fail "libgdn tests"
		# With FLA_PATH, the package's comparison with FLA runs too.
		(cd python && PYTHONPATH="$(fla_abs)" timeout 300 python3 -m unittest discover -s tests -v) >>"$out/pyabi.log" 2>&1 || fail "python package tests"
		tail -25 "$out/pyabi.log" >&2
		;;
	flatests)
		# FLA's own tests of chunk_gated_delta_rule, its test file as FLA
		# ships it, run through gdn's Python entry point (how, and what the
		# gradient checks test: python/tests/fla_plugin.py). FLA_PATH holds
		# FLA's fla/ and tests/, carried for this and never committed.
		echo "== flatests" >&2
		if [[ -z ${FLA_PATH:-} || ! -f ${FLA_PATH:-}/tests/ops/test_gdn.py ]]; then
			fail "flatests: FLA_PATH must name a copy of FLA holding tests/ops/test_gdn.py"
		else
			root=$PWD
			# The control, beside it (both check, neither times): FLA alone
			# on the cases gdn runs (head dimension 128), whose gradient
			# checks test the same backward. (On Hopper with Triton 3.4 or
			# later FLA's backward refuses to run without tilelang: the
			# control then fails every case, and the plugin takes the
			# gradient from FLA's naive recurrence and says so.)
			(cd "$FLA_PATH" && PYTHONPATH="$PWD" timeout 500 \
				python3 -m pytest -p no:cacheprovider -rf -q tests/ops/test_gdn.py -k "test_chunk and D128") \
				>"$out/flatests-fla.log" 2>&1 &
			control=$!
			(cd "$FLA_PATH" && PYTHONPATH="$PWD:$root/python:$root/python/tests" timeout 500 \
				python3 -m pytest -p fla_plugin -p no:cacheprovider -rs -q tests/ops/test_gdn.py -k test_chunk) \
				>"$out/flatests.log" 2>&1 || fail flatests
			grep -E "^FAILED|gdn in FLA's tests|^gradient from FLA's naive" "$out/flatests.log" >&2
			wait "$control"
			echo "FLA alone: $(tail -1 "$out/flatests-fla.log")" >&2
		fi
		;;
	pybench | pybench:*)
		# The full forward through the Python package beside gdn bench
		# --full and FLA (with FLA_PATH), in one call on one card.
		cases=q35_4kx8,tp8_32k
		[[ $step == pybench:* ]] && cases="${step#pybench:}"
		echo "== pybench $cases" >&2
		timeout 200 .bin/gdn bench --full --cases "$cases" --csv "$out/pybench.csv" >"$out/pybench.txt" 2>&1 || fail "pybench: bench --full"
		PYTHONPATH="python${FLA_PATH:+:$(fla_abs)}" timeout 300 python3 scripts/pybench.py --cases "$cases" \
			--bench-csv "$out/pybench.csv" >>"$out/pybench.txt" 2>&1 || fail pybench
		grep -v '^\[\|^  ' "$out/pybench.txt" >&2
		;;
	soakbg | soakbg:*)
		# The soak in a process session of its own, which outlives this
		# call (the device tool ends a call's other processes when it
		# returns): a soak longer than one call's 10 minutes, or one beside
		# other steps. soakwait collects it. SOAK_DIR (default
		# /tmp/gdn-soak) holds its log and exit status.
		minutes=10
		[[ $step == soakbg:* ]] && minutes="${step#soakbg:}"
		seed="${SOAK_SEED:-$(date +%s)}"
		sd="${SOAK_DIR:-/tmp/gdn-soak}"
		mkdir -p "$sd" && rm -f "$sd/soak.log" "$sd/rc"
		echo "== soak $minutes minutes in the background, seed $seed" | tee "$sd/soak.log" >&2
		setsid bash -c 'timeout "$1" .bin/gdn soak --minutes "$2" --seed "$3" >>"$4/soak.log" 2>&1; echo $? >"$4/rc"' \
			soakbg "$(soak_limit "$minutes")" "$minutes" "$seed" "$sd" </dev/null >/dev/null 2>&1 &
		;;
	soakwait)
		# Waits up to SOAKWAIT_S seconds (default 540) for soakbg's soak,
		# then copies its log here; still running is a failure that says so
		# (call soakwait again).
		sd="${SOAK_DIR:-/tmp/gdn-soak}"
		end=$((SECONDS + ${SOAKWAIT_S:-540}))
		while [[ ! -f $sd/rc ]] && ((SECONDS < end)) && [[ -f $sd/soak.log ]]; do sleep 2; done
		if [[ ! -f $sd/soak.log ]]; then
			fail "soakwait: no soak started (soakbg first, on this machine)"
		else
			cp "$sd/soak.log" "$out/soak.log"
			if [[ ! -f $sd/rc ]]; then
				fail "soakwait: the soak is still running; call soakwait again"
			elif [[ $(cat "$sd/rc") != 0 ]]; then
				fail "soak (exit status $(cat "$sd/rc"))"
			fi
			grep -E "^(FAIL|soak: variant)" "$out/soak.log" | head -20 >&2
			tail -4 "$out/soak.log" >&2
		fi
		;;
	python)
		echo "== python (gdn run from NumPy)" >&2
		timeout 120 python3 examples/python/check_run.py .bin/gdn "$(mktemp -d)" >"$out/python.log" 2>&1 || fail python
		cat "$out/python.log" >&2
		;;
	*)
		echo "unknown step $step" >&2
		status=2
		;;
	esac
done
# The device tool brings back at most 8 files: with more, everything but
# gpu.txt goes into one outputs.tgz (tar xzf it here), rather than losing
# what does not fit (a splitgrid.tgz was once left out so).
files=$(find "$out" -maxdepth 1 -type f | wc -l)
if ((files > 8)); then
	(cd "$out" && find . -maxdepth 1 -type f ! -name gpu.txt ! -name outputs.tgz -printf '%P\n' | sort >outputs.list &&
		tar czf outputs.tgz -T outputs.list && xargs rm -f <outputs.list && rm -f outputs.list)
	echo "== $files output files: all but gpu.txt bundled into outputs.tgz (tar xzf outputs.tgz)" >&2
fi
exit $status
