package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeNCU stands in for Nsight Compute: profiling (-o REPORT ... PROGRAM
// ARGS) logs its arguments to $CALLS, runs nothing and writes the report
// file; printing a report (-i REPORT) prints a section, and with --page
// source a two-instruction CSV.
const fakeNCU = `#!/usr/bin/env bash
echo "ncu $*" >>"$CALLS"
if [[ $1 == -i ]]; then
	if [[ " $* " == *" --page source "* ]]; then
		printf '"Kernel Name","gdn_scan_states",\n"Address","Source","Warp Stall Sampling (All Samples)","stall_long_sb"\n"0x10","LDG.E.128 R4, [R2]","1","0"\n"0x20","LOP3.LUT R8, R5, 0xffffe000, RZ, 0xc0, !PT","9","9"\n'
	else
		echo "    Duration                         us        31.94"
	fi
	exit 0
fi
if [[ " $* " == *" --csv "* ]]; then
	echo "the bench's own output"
	h='"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
	echo "$h"
	row() { printf '"%s","1","gdn","h","%s","1","13","(128, 1, 1)","%s","0","9.0","m","%s","u","%s"\n' "$@"; }
	for id in 0 3; do
		row $id gdn_prep_chunk "(512, 4, 1)" gpu__time_duration.sum "86,528"
		row $id gdn_prep_chunk "(512, 4, 1)" dram__throughput.avg.pct_of_peak_sustained_elapsed "45.90"
		row $id gdn_prep_chunk "(512, 4, 1)" smsp__issue_active.avg.pct_of_peak_sustained_active "53.10"
		row $((id + 1)) gdn_hopper_fwd "(32, 7, 1)" gpu__time_duration.sum "175,680"
		row $((id + 2)) gdn_hopper_fwd "(16, 8, 1)" gpu__time_duration.sum "160,480"
		if [[ " $* " == *sm__pipe_tensor_cycles_active* ]]; then # the profile step's metrics
			k=$((id + 1))
			row $k gdn_hopper_fwd "(32, 7, 1)" sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active "5$id.10"
			row $k gdn_hopper_fwd "(32, 7, 1)" smsp__warps_eligible.avg.per_cycle_active "0.7$((2 * id))"
			row $k gdn_hopper_fwd "(32, 7, 1)" smsp__warps_active.avg.per_cycle_active "3.9$((2 * id))"
			row $k gdn_hopper_fwd "(32, 7, 1)" sm__warps_active.avg.pct_of_peak_sustained_active "24.70"
			for st in long_scoreboard:2.3$((2 * id)) short_scoreboard:1.19 wait:1.09 barrier:1.0$((2 * id)) selected:1.00 not_selected:0.70 gmma:0.46 drain:0.01; do
				row $k gdn_hopper_fwd "(32, 7, 1)" "smsp__average_warps_issue_stalled_${st%%:*}_per_issue_active.ratio" "${st#*:}"
			done
		fi
	done
	exit 0
fi
while [[ $# -gt 0 && $1 != -o ]]; do shift; done
touch "$2.ncu-rep"
`

// The ncu step profiles the named kernel in one bench call of the case (with
// --full for ncufull, another build with NCU_GDN) at the card's own clocks,
// and keeps the printed sections and the per-instruction CSV; a step without
// KERNEL@CASE fails.
func TestDeviceRunNCU(t *testing.T) {
	fake := t.TempDir()
	if err := os.WriteFile(filepath.Join(fake, "ncu"), []byte(fakeNCU), 0o755); err != nil {
		t.Fatal(err)
	}
	path := []string{"PATH=" + fake + ":" + os.Getenv("PATH")}
	stderr, out, ok := runDeviceStepsEnv(t, "", false, path, "ncu:gdn_scan@chain_equal", "ncufull:gdn_hopper.*@tp8_2k")
	if !ok {
		t.Fatalf("device-run failed:\n%s", stderr)
	}
	txt, err := os.ReadFile(filepath.Join(out, "ncu-gdn_scan-chain_equal.txt"))
	if err != nil || !strings.Contains(string(txt), "Duration") {
		t.Fatalf("sections: %q, %v", txt, err)
	}
	csv, err := os.ReadFile(filepath.Join(out, "ncu-gdn_scan-chain_equal.csv"))
	if err != nil || !strings.Contains(string(csv), "LOP3.LUT") {
		t.Fatalf("source CSV: %q, %v", csv, err)
	}
	if _, err := os.Stat(filepath.Join(out, "ncu-gdn_hopper__-tp8_2k.csv")); err != nil {
		t.Errorf("the regex's characters are not kept out of the file name: %v", err)
	}
	calls, _ := os.ReadFile(filepath.Join(filepath.Dir(out), "calls.log"))
	for _, want := range []string{"-k regex:gdn_scan --launch-count 1", "--clock-control none --cache-control none", "bench --cases chain_equal --reps 1",
		"-k regex:gdn_hopper.* ", "bench --full --cases tp8_2k"} {
		if !strings.Contains(string(calls), want) {
			t.Errorf("no %q in the calls:\n%s", want, calls)
		}
	}
	if stderr, _, ok := runDeviceStepsEnv(t, "", false, path, "ncu:gdn_scan"); ok || !strings.Contains(stderr, "want ncu:KERNEL@CASE") {
		t.Errorf("ncu without a case passed:\n%s", stderr)
	}
}

// wantAll reports each of wants that text (described by what) lacks.
func wantAll(t *testing.T, text []byte, what string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(string(text), want) {
			t.Errorf("no %q in %s:\n%s", want, what, text)
		}
	}
}

// runKernelTimesSteps runs device-run.sh's ncu-summary steps (kerneltimes,
// profile) with the fake gdn and the fake ncu, and scripts/kerneltimes.py
// beside them, returning the folder (its calls.log) and the output folder;
// it skips the test without python3.
func runKernelTimesSteps(t *testing.T, steps ...string) (dir, out string) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	fake := t.TempDir()
	if err := os.WriteFile(filepath.Join(fake, "ncu"), []byte(fakeNCU), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, write := deviceDir(t)
	write("gdn", fakeGDN)
	script, err := os.ReadFile("kerneltimes.py")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scripts", "kerneltimes.py"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	out = filepath.Join(dir, "out")
	cmd := exec.Command("bash", append([]string{".bin/device-run.sh"}, steps...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OUT="+out, "CALLS="+filepath.Join(dir, "calls.log"), "PATH="+fake+":"+os.Getenv("PATH"))
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("device-run failed: %v\n%s", err, errb.String())
	}
	return dir, out
}

// The kerneltimes step times every kernel of one call of each case at the
// GPU's own clocks and summarises them per kernel and grid (a split call's
// two passes of one kernel apart): the medians, and their sum.
func TestDeviceRunKernelTimes(t *testing.T) {
	dir, out := runKernelTimesSteps(t, "kerneltimes:tp4_32k,chain_equal", "kerneltimesfull:tp2_32k")
	txt, err := os.ReadFile(filepath.Join(out, "kerneltimes.txt"))
	if err != nil {
		t.Fatal(err)
	}
	wantAll(t, txt, "kerneltimes.txt", "== tp4_32k", "== chain_equal", "gdn_prep_chunk           (512,4,1)             2      86.5    45.9     53.1",
		"gdn_hopper_fwd           (32,7,1)              2     175.7", "gdn_hopper_fwd           (16,8,1)              2     160.5",
		"sum of medians                                       422.7")
	if full, err := os.ReadFile(filepath.Join(out, "kerneltimesfull.txt")); err != nil || !strings.Contains(string(full), "== tp2_32k") {
		t.Errorf("kerneltimesfull.txt: %q, %v", full, err)
	}
	// The profile step's columns and metrics stay out of kerneltimes.
	if strings.Contains(string(txt), "tensor %") || strings.Contains(string(txt), "stalls:") {
		t.Errorf("kerneltimes.txt has the profile's columns:\n%s", txt)
	}
	calls, _ := os.ReadFile(filepath.Join(dir, "calls.log"))
	if strings.Contains(string(calls), "sm__pipe_tensor") || strings.Contains(string(calls), "--cases q35_1kx8") {
		t.Errorf("kerneltimes asked for the profile's metrics or cases:\n%s", calls)
	}
	wantAll(t, calls, "the calls", "--clock-control none", "--csv .bin/gdn bench --cases tp4_32k --reps 1 --warmup 1 --calls 1",
		"--csv .bin/gdn bench --full --cases tp2_32k")
}

// The profile step is kerneltimes with the metrics that say why: each
// kernel's line gains the tensor pipe's activity, eligible / resident
// warps a scheduler and achieved occupancy, and a line of its leading
// stall reasons, largest first; by default on the suite's rows that miss
// their targets.
func TestDeviceRunProfile(t *testing.T) {
	dir, out := runKernelTimesSteps(t, "profile", "profilefull:varlen_mix")
	txt, err := os.ReadFile(filepath.Join(out, "profile.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// Medians of the two launches: tensor (50.10, 53.10) 51.6, eligible
	// (0.70, 0.76) 0.73, resident (3.90, 3.96) 3.93; long_scoreboard
	// (2.30, 2.36) 2.33, barrier (1.00, 1.06) 1.03; drain and gmma are
	// not among the six shown.
	wantAll(t, txt, "profile.txt", "== q35_4kx8", "== varlen_mix", "tensor %  elig/res  occup %",
		"gdn_hopper_fwd           (32,7,1)              2     175.7     nan      nan      51.6 0.73/3.93     24.7",
		"    stalls: long_scoreboard 2.33, short_scoreboard 1.19, wait 1.09, barrier 1.03, selected 1.00, not_selected 0.70\n")
	if strings.Contains(string(txt), "drain") || strings.Contains(string(txt), "gmma") {
		t.Errorf("more than six stall reasons shown:\n%s", txt)
	}
	if full, err := os.ReadFile(filepath.Join(out, "profilefull.txt")); err != nil || !strings.Contains(string(full), "== varlen_mix") ||
		strings.Contains(string(full), "== q35_4kx8") {
		t.Errorf("profilefull.txt: %q, %v", full, err)
	}
	calls, _ := os.ReadFile(filepath.Join(dir, "calls.log"))
	wantAll(t, calls, "the calls", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
		"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", "sm__warps_active.avg.pct_of_peak_sustained_active",
		"--csv .bin/gdn bench --cases q35_4kx8 --reps 1", "--cases q35_1kx8 ", "--cases q397_4kx8 ", "--cases sym32_8kx4 ",
		"--cases varlen_mix ", "--csv .bin/gdn bench --full --cases varlen_mix")
}

// ncuhot runs scripts/ncuhot.py on a CSV of the given text with args and
// returns its output and error (skipping the test without python3).
func ncuhot(t *testing.T, csvText string, args ...string) (string, error) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	csv := filepath.Join(t.TempDir(), "src.csv")
	if err := os.WriteFile(csv, []byte(csvText), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command(py, append([]string{"ncuhot.py", csv}, args...)...).CombinedOutput()
	return string(got), err
}

// ncuhot.py ranks the stall reasons and the instructions, and shows the
// instructions before each (where what it waits for comes from).
func TestNCUHot(t *testing.T) {
	out, err := ncuhot(t, `"Kernel Name","k",
"Address","Source","Warp Stall Sampling (All Samples)","stall_long_sb","stall_wait","stall_long_sb (Not Issued)"
"0x10","LDG.E.128 R4, [R2]","2","0","2","0"
"0x20","BAR.SYNC.DEFER_BLOCKING 0x0","0","0","0","0"
"0x30","LOP3.LUT R8, R5, 0xffffe000, RZ, 0xc0, !PT","8","8","0","8"
`, "--context", "1")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"3 instructions, 10 samples", "long_sb           80.0%", "wait              20.0%",
		" 80.0%  #2     LOP3.LUT", "#1     BAR.SYNC", "[long_sb 8]", " 20.0%  #0     LDG.E.128"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Index(out, "LOP3.LUT") > strings.Index(out, " 20.0%  #0") {
		t.Errorf("not ranked by samples:\n%s", out)
	}
}

// ncuhot.py --ranges sums samples, executed instructions (per --per),
// reasons and opcodes by range of instruction indices, and refuses ranges
// that are not ascending.
func TestNCUHotRanges(t *testing.T) {
	const csv = `"Kernel Name","k",
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","stall_long_sb","stall_wait"
"0x10","LDG.E.128 R4, [R2]","2","40","0","2"
"0x20","@P0 FMUL R6, R5, R4","0","60","0","0"
"0x30","FMUL R8, R5, R4","6","20","6","0"
"0x40","HGMMA.64x64x16.F32 R24, gdesc[UR8], RZ","2","10","0","2"
`
	out, err := ncuhot(t, csv, "--ranges", "0,2,4", "--per", "10")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"#0-#2:  20.0% of samples, 10.0 executed", "wait 20.0%", "FMUL 6.0, LDG 4.0",
		"#2-#4:  80.0% of samples, 3.0 executed", "long_sb 60.0%, wait 20.0%", "FMUL 2.0, HGMMA 1.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if out, err := ncuhot(t, csv, "--ranges", "4,2"); err == nil || !strings.Contains(out, "ascending") {
		t.Errorf("descending ranges accepted: %v\n%s", err, out)
	}
}

// ncuhot.py --roles splits the kernel at its setmaxnreg instructions and
// gives each part's share of the samples and its instructions as shares
// of the part's own samples; a kernel without setmaxnreg is refused.
func TestNCUHotRoles(t *testing.T) {
	const csv = `"Kernel Name","k",
"Address","Source","Warp Stall Sampling (All Samples)","stall_long_sb","stall_wait","stall_barrier"
"0x10","S2R R0, SR_TID.X","2","0","2","0"
"0x20","USETMAXREG.DEALLOC.CTAPOOL 0x40","0","0","0","0"
"0x30","SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R9+URZ], R10","2","2","0","0"
"0x40","@!P0 BRA 0x30","2","2","0","0"
"0x50","USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xc0","0","0","0","0"
"0x60","HGMMA.64x64x16.F32 R24, gdesc[UR8], RZ","1","0","1","0"
"0x70","BAR.SYNC.DEFER_BLOCKING R11, 0x80","3","0","0","3"
`
	out, err := ncuhot(t, csv, "--roles", "--top", "2")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"#0-#1 (the entry, before any setmaxnreg): 20.0% of samples",
		"#1-#4 USETMAXREG.DEALLOC.CTAPOOL 0x40: 40.0% of samples", "long_sb 100.0%",
		" 50.0%  #3     @!P0 BRA 0x30   after #2 SYNCS.PHASECHK",
		"#4-#7 USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xc0: 40.0% of samples", "barrier 75.0%, wait 25.0%",
		" 75.0%  #6     BAR.SYNC", " 25.0%  #5     HGMMA",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if out, err := ncuhot(t, `"Kernel Name","k",
"Address","Source","Warp Stall Sampling (All Samples)","stall_wait"
"0x10","FMUL R1, R2, R3","1","1"
`, "--roles"); err == nil || !strings.Contains(out, "no setmaxnreg") {
		t.Errorf("a kernel without setmaxnreg accepted: %v\n%s", err, out)
	}
}

// With the executed counts, --roles gives each role's instructions a warp
// (over its setmaxnreg's count: every warp of the role runs it once; for
// a setmaxnreg.inc, which warps retry, the count after its loop), and
// with --chunks a warp and chunk.
func TestNCUHotRolesPerWarp(t *testing.T) {
	const csv = `"Kernel Name","k",
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","stall_wait"
"0x10","S2R R0, SR_TID.X","1","16","1"
"0x20","USETMAXREG.DEALLOC.CTAPOOL 0x40","1","4","1"
"0x30","FMUL R1, R2, R3","1","400","1"
"0x40","USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xc0","1","11","1"
"0x50","@!P0 BRA 0x40","0","11","0"
"0x60","FFMA R1, R2, R3, R4","1","8","1"
"0x70","FFMA R1, R2, R3, R4","1","1570","1"
`
	out, err := ncuhot(t, csv, "--roles", "--chunks", "10")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"#0-#1 (the entry, before any setmaxnreg): 16.7% of samples\n",
		"#1-#3 USETMAXREG.DEALLOC.CTAPOOL 0x40: 33.3% of samples, 10 instructions a warp and chunk",
		"#3-#7 USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xc0: 50.0% of samples, 20 instructions a warp and chunk",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if out, _ := ncuhot(t, csv, "--roles"); !strings.Contains(out, "0x40: 33.3% of samples, 101 instructions a warp") {
		t.Errorf("without --chunks, want instructions a warp:\n%s", out)
	}
}
