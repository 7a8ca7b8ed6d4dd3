package scripts

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeGDN is a stand-in for the gdn tool that device-run.sh's warmup,
// compare, knob and stress steps call: `warmup` prints the table in
// $FAKE_WARMUP, `bench` writes the file after --csv (one case, its output
// digest $FAKE_HASH_n for the n-th bench call, else aa, and no digest
// column at all with $FAKE_NO_HASH, as before it had one, and no file but
// exit status 1 when $FAKE_NO_CSV names its --variant's suffix; its median
// $FAKE_MS_auto, _bv64 or _bv128 by --variant, else 0.06), prints a
// comparison header when given --compare and exits $FAKE_BENCH_RC (0 when
// unset); every call logs its name and arguments to calls.log (after
// GDN_JIT_DEFINES=... and GDN_LAB=... when those are set).
const fakeGDN = `#!/usr/bin/env bash
echo "${GDN_JIT_DEFINES:+GDN_JIT_DEFINES=$GDN_JIT_DEFINES }${GDN_LAB:+GDN_LAB=$GDN_LAB }$(basename "$0") $*" >>"$CALLS"
case "$1" in
warmup) printf '%s\n' "variant  compile ms  registers  spill B  stack B  smem B  status" "$FAKE_WARMUP" ;;
bench)
	shift
	while [[ $# -gt 0 ]]; do
		case "$1" in
		--variant) variant=$2; shift ;;
		--csv)
			n=$(grep -c " bench " "$CALLS")
			hash="FAKE_HASH_$n"
			v=${variant:-auto}
			ms="FAKE_MS_${v##*_}"
			if [[ ${FAKE_NO_CSV:-} == "${v##*_}" ]]; then
				exit 1 # a run that dies before its CSV
			elif [[ -n ${FAKE_NO_HASH:-} ]]; then
				printf 'case,median_ms,variant,plan\ntp8_2k,%s,%s,%s\n' "0.06$n" "${variant:-gdn_hopper_bf16_bv64}" "x" >"$2"
			else
				printf 'case,median_ms,out_hash,variant,plan\ntp8_2k,%s,%s,%s,%s\n' "${!ms:-0.06}" "${!hash:-aa}" \
					"${variant:-gdn_hopper_bf16_bv64}" "${variant:-gdn_hopper_bf16_bv64} grid=[16 1 1] split=7x4${FAKE_PLAN_EXTRA:-}" >"$2"
			fi
			shift ;;
		--compare) echo "case  lens  old ms  new ms  speed-up"; echo "q35_4kx8  4096x8  0.50  0.44  1.13x"; shift ;;
		esac
		shift
	done
	exit "${FAKE_BENCH_RC:-0}" ;;
esac
`

// runDeviceSteps runs device-run.sh with the given steps in a folder whose
// .bin holds the fake tool (and a fake baseline when withOld), returning
// stderr, the output folder and whether it exited 0.
func runDeviceSteps(t *testing.T, warmupRows string, withOld bool, steps ...string) (string, string, bool) {
	return runDeviceStepsEnv(t, warmupRows, withOld, nil, steps...)
}

// runDeviceStepsEnv is runDeviceSteps with more environment (NAME=VALUE).
func runDeviceStepsEnv(t *testing.T, warmupRows string, withOld bool, env []string, steps ...string) (string, string, bool) {
	t.Helper()
	return runDevice(t, warmupRows, withOld, nil, env, steps...)
}

// runDevice is runDeviceStepsEnv with more copies of the fake tool in .bin
// under the names in extra (device-build.sh --also's gdn+REV).
func runDevice(t *testing.T, warmupRows string, withOld bool, extra, env []string, steps ...string) (string, string, bool) {
	t.Helper()
	dir, write := deviceDir(t)
	write("gdn", fakeGDN)
	write("gdn-dev", fakeGDN)
	if withOld {
		write("gdn-old", fakeGDN)
	}
	for _, name := range extra {
		write(name, fakeGDN)
	}
	out := filepath.Join(dir, "out")
	cmd := exec.Command("bash", ".bin/device-run.sh")
	cmd.Args = append(cmd.Args, steps...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GDN_JIT_DEFINES=", "GDN_LAB=", "OUT="+out, "FAKE_WARMUP="+warmupRows, "CALLS="+filepath.Join(dir, "calls.log"),
		"PATH="+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, env...)
	var errb strings.Builder
	cmd.Stderr = &errb
	err := cmd.Run()
	return errb.String(), out, err == nil
}

func TestDeviceRunWarmupFailsOnSerializedOrSpills(t *testing.T) {
	ok := "gdn_hopper_bf16_bv64   800  168  0  0  0  ok\ngdn_hopper_bf16_bv128  790  168  0  0  0  ok"
	for _, c := range []struct {
		name, rows string
		pass       bool
	}{
		{"all ok", ok, true},
		{"serialised", ok + "\ngdn_hopper_fp16_bv64  810  168  0  0  0  WGMMA SERIALIZED", false},
		{"spills", ok + "\ngdn_hopper_fp16_bv64  810  168  48  8  0  SPILLS", false},
		{"ptx fallback", ok + "\ngdn_hopper_fp16_bv64  810  -  0  -  -  ok (ptx)", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			stderr, out, pass := runDeviceSteps(t, c.rows, false, "warmup")
			if pass != c.pass {
				t.Fatalf("exit 0 = %v, want %v; stderr:\n%s", pass, c.pass, stderr)
			}
			if !c.pass && !strings.Contains(stderr, "FAIL warmup") {
				t.Errorf("stderr does not say which step failed:\n%s", stderr)
			}
			table, err := os.ReadFile(filepath.Join(out, "warmup.txt"))
			if err != nil || !strings.Contains(string(table), "gdn_hopper_bf16_bv128") {
				t.Errorf("warmup.txt = %q, %v", table, err)
			}
		})
	}
}

func TestDeviceRunCompare(t *testing.T) {
	stderr, _, pass := runDeviceSteps(t, "", false, "compare")
	if pass || !strings.Contains(stderr, "no .bin/gdn-old") {
		t.Errorf("compare without a baseline: exit 0 = %v, stderr:\n%s", pass, stderr)
	}
	stderr = checkCompareStep(t, "compare", "", "q35_4kx8")
	if !strings.Contains(stderr, "speed-up") {
		t.Errorf("the comparison is not printed:\n%s", stderr)
	}
}

// comparefull times both binaries' full forward (bench --full).
func TestDeviceRunCompareFull(t *testing.T) {
	// --no-l2norm spelt out: a baseline from before docs/PERF.md v35 read
	// --full alone as the norm inside.
	checkCompareStep(t, "comparefull", "--full --no-l2norm ", "tp8_8k")
}

// checkCompareStep runs step:cases with a baseline and checks that the
// baseline, then the new tool, ran gdn bench (with flags) on those cases,
// the new one against the old one's CSV, and that the comparison reached
// step.txt; it returns device-run.sh's stderr.
func checkCompareStep(t *testing.T, step, flags, cases string) string {
	t.Helper()
	stderr, out, pass := runDeviceSteps(t, "", true, step+":"+cases)
	if !pass {
		t.Fatalf("%s failed; stderr:\n%s", step, stderr)
	}
	calls, err := os.ReadFile(filepath.Join(filepath.Dir(out), "calls.log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(calls)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "gdn-old bench "+flags+"--cases "+cases) ||
		!strings.HasPrefix(lines[1], "gdn bench "+flags+"--cases "+cases) || !strings.Contains(lines[1], "--compare") {
		t.Errorf("%s calls:\n%s", step, calls)
	}
	if text, err := os.ReadFile(filepath.Join(out, step+".txt")); err != nil || !strings.Contains(string(text), "1.13x") {
		t.Errorf("%s.txt = %q, %v", step, text, err)
	}
	return stderr
}

// A knob step (or a lab step) compiles every variant with the switch (or
// the experiment's kernels), then times the same development build
// without and with it on the cases named, in that order, the second run
// against the first's CSV; a switch that makes a variant spill fails the
// step, and so does a missing development build.
func TestDeviceRunKnob(t *testing.T) {
	ok := "gdn_hopper_bf16_bv128  790  168  0  0  0  ok"
	for _, c := range []struct {
		step, rows, flags, env string
		pass                   bool
	}{
		{"knob:GDN_A=1+GDN_B=2@q35_4kx8,tp8_32k", ok, "", "GDN_JIT_DEFINES=GDN_A=1 GDN_B=2 ", true},
		{"knobfull:GDN_A=1+GDN_B=2@q35_4kx8,tp8_32k", ok, "--full ", "GDN_JIT_DEFINES=GDN_A=1 GDN_B=2 ", true},
		{"lab:fused_consumers@q35_4kx8,tp8_32k", ok, "", "GDN_LAB=fused_consumers ", true},
		{"labfull:fused_consumers@q35_4kx8,tp8_32k", ok, "--full ", "GDN_LAB=fused_consumers ", true},
		{"knob:GDN_A=1+GDN_B=2@q35_4kx8,tp8_32k", ok + "\ngdn_hopper_fp16_bv64  810  168  48  8  0  SPILLS", "", "", false},
	} {
		stderr, out, pass := runDeviceSteps(t, c.rows, false, c.step)
		if pass != c.pass {
			t.Fatalf("%s with %q: exit 0 = %v, want %v; stderr:\n%s", c.step, c.rows, pass, c.pass, stderr)
		}
		name := strings.SplitN(c.step, ":", 2)[0]
		if !c.pass {
			if !strings.Contains(stderr, "FAIL "+name+": a variant spills") {
				t.Errorf("stderr does not say the switch broke a variant:\n%s", stderr)
			}
			continue
		}
		calls, err := os.ReadFile(filepath.Join(filepath.Dir(out), "calls.log"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(calls)), "\n")
		cases := "--cases q35_4kx8,tp8_32k"
		if len(lines) != 3 || !strings.HasPrefix(lines[0], c.env+"gdn-dev warmup --cache-dir ") ||
			!strings.HasPrefix(lines[1], "gdn-dev bench "+c.flags+cases+" --csv ") || strings.Contains(lines[1], "--compare") ||
			!strings.HasPrefix(lines[2], c.env+"gdn-dev bench "+c.flags+cases+" --csv ") || !strings.Contains(lines[2], "--compare") {
			t.Errorf("%s calls:\n%s", c.step, calls)
		}
		if text, err := os.ReadFile(filepath.Join(out, name+".txt")); err != nil || !strings.Contains(string(text), "1.13x") ||
			!strings.Contains(string(text), "gdn_hopper_bf16_bv128") {
			t.Errorf("%s.txt = %q, %v", name, text, err)
		}
		if !strings.Contains(stderr, "speed-up") {
			t.Errorf("the comparison is not printed:\n%s", stderr)
		}
	}
	stderr, _, pass := runDeviceStepsEnv(t, ok, false, []string{"DEV_GDN=.bin/no-such-build"}, "lab:fused_consumers")
	if pass || !strings.Contains(stderr, "FAIL lab: no .bin/no-such-build (scripts/device-build.sh --dev builds it") {
		t.Errorf("a lab step without the development build: exit 0 = %v, stderr:\n%s", pass, stderr)
	}
}

// The stress step runs gdn bench --full processes (BV 64, forced short
// segments) until its time is up: it passes when every process exits 0
// with the first process's output digests, and fails, saying which
// process, on a failed process or on a digest that differs.
func TestDeviceRunStress(t *testing.T) {
	for _, c := range []struct {
		name string
		env  []string
		pass bool
		says string
	}{
		{"steady", nil, true, ""},
		{"a digest differs", []string{"FAKE_HASH_3=bb"}, false, "process 3: outputs differ"},
		{"processes fail", []string{"FAKE_BENCH_RC=1"}, false, "process 1 failed"},
		{"another binary", []string{"STRESS_GDN=.bin/gdn-old"}, true, ""},
		// A binary from before the digest column: its medians differ from
		// process to process, and only its exit status counts.
		{"no digest column", []string{"STRESS_GDN=.bin/gdn-old", "FAKE_NO_HASH=1"}, true, "exit status only"},
		{"no digest column, failing", []string{"STRESS_GDN=.bin/gdn-old", "FAKE_NO_HASH=1", "FAKE_BENCH_RC=1"}, false, "process 1 failed"},
	} {
		stderr, out, pass := runDeviceStepsEnv(t, "", true, c.env, "stress:2")
		if pass != c.pass {
			t.Fatalf("%s: exit 0 = %v, want %v; stderr:\n%s", c.name, pass, c.pass, stderr)
		}
		log, err := os.ReadFile(filepath.Join(out, "stress.log"))
		if err != nil {
			t.Fatal(err)
		}
		var n, bad int
		if _, err := fmt.Sscanf(lastLine(string(log)), "%d processes, %d failed", &n, &bad); err != nil {
			t.Fatalf("%s: last line of stress.log %q: %v", c.name, lastLine(string(log)), err)
		}
		if n < 3 || (bad == 0) != c.pass {
			t.Errorf("%s: %d processes, %d failed", c.name, n, bad)
		}
		if c.says != "" && !strings.Contains(string(log), c.says) {
			t.Errorf("%s: stress.log does not say %q:\n%s", c.name, c.says, log)
		}
		calls, err := os.ReadFile(filepath.Join(filepath.Dir(out), "calls.log"))
		if err != nil {
			t.Fatal(err)
		}
		first := strings.SplitN(string(calls), "\n", 2)[0]
		bin := "gdn"
		if len(c.env) > 0 && strings.HasPrefix(c.env[0], "STRESS_GDN=") {
			bin = "gdn-old"
		}
		if !strings.HasPrefix(first, bin+" bench --full --variant gdn_hopper_bf16_bv64 --segments 4 ") || !strings.Contains(first, "--cases tp8_2k,chain_equal") {
			t.Errorf("%s: first call %q", c.name, first)
		}
	}
}

// lastLine is s's last non-empty line.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// The plancheck step times the planner's plan and each forced tile width
// and tabulates them, marking a planner more than 3% slower than the best;
// a transfer pass with a tile of its own shows as xferN after the split.
func TestDeviceRunPlanCheck(t *testing.T) {
	for _, c := range []struct {
		env        []string
		over, star string
		slow       string
		dead       string // the run that dies before its CSV
		xfer       string // the transfer tile the plan names, if any
	}{
		{[]string{"FAKE_MS_auto=0.060", "FAKE_MS_bv64=0.061", "FAKE_MS_bv128=0.080"}, "1.00x", "", "on 0 of 1", "", ""},
		{[]string{"FAKE_MS_auto=0.070", "FAKE_MS_bv64=0.075", "FAKE_MS_bv128=0.050"}, "1.40x", " *", "on 1 of 1", "", ""},
		// The BV 128 run dies: the step fails, and still tabulates the others.
		{[]string{"FAKE_MS_auto=0.070", "FAKE_MS_bv64=0.075", "FAKE_NO_CSV=bv128"}, "1.00x", "", "on 0 of 1", "bv128", ""},
		{[]string{"FAKE_MS_auto=0.060", "FAKE_MS_bv64=0.061", "FAKE_MS_bv128=0.080", "FAKE_PLAN_EXTRA= transfer-tile=128"}, "1.00x", "", "on 0 of 1", "", "xfer128"},
	} {
		stderr, out, pass := runDeviceStepsEnv(t, "", false, c.env, "plancheck:tp8_2k")
		if !pass && c.dead == "" || pass && c.dead != "" {
			t.Fatalf("%v: failed:\n%s", c.env, stderr)
		}
		text, err := os.ReadFile(filepath.Join(out, "plancheck.txt"))
		if err != nil {
			t.Fatal(err)
		}
		row := ""
		for _, l := range strings.Split(string(text), "\n") {
			if strings.HasPrefix(l, "tp8_2k ") {
				row = l
			}
		}
		f := strings.Fields(row)
		if c.xfer != "" {
			if len(f) < 4 || f[3] != c.xfer {
				t.Errorf("%v: row %q, want %s after the split", c.env, row, c.xfer)
			}
			f = append(f[:3], f[4:]...)
		}
		if len(f) < 6 || f[1] != "bf16_bv64" || f[2] != "split=7x4" || !strings.HasSuffix(strings.TrimSuffix(row, " *"), " "+c.over) ||
			strings.HasSuffix(row, " *") != (c.star != "") || (c.dead != "") != (len(f) == 6) {
			t.Errorf("%v: row %q", c.env, row)
		}
		if !strings.Contains(string(text), "planner more than 3% slower than the best tile "+c.slow+" cases") {
			t.Errorf("%v: no summary %q in\n%s", c.env, c.slow, text)
		}
		calls, _ := os.ReadFile(filepath.Join(filepath.Dir(out), "calls.log"))
		for _, want := range []string{"gdn bench --cases tp8_2k --csv", "gdn bench --cases tp8_2k --variant gdn_hopper_bf16_bv64 --csv",
			"gdn bench --cases tp8_2k --variant gdn_hopper_bf16_bv128 --csv"} {
			if !strings.Contains(string(calls), want) {
				t.Errorf("no call %q in\n%s", want, calls)
			}
		}
	}
}

// With the tools of device-build.sh --also beside the baseline, compare
// times each of them against the same baseline run, after the working
// tree's tool, and appends their tables to compare.txt.
func TestDeviceRunCompareAlso(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	stderr, out, pass := runDeviceStepsExtra(t, []string{"gdn+scan-bulk", "gdn+feature_x"}, "compare:tp8_8k")
	if !pass {
		t.Fatalf("compare failed; stderr:\n%s", stderr)
	}
	calls, err := os.ReadFile(filepath.Join(filepath.Dir(out), "calls.log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(calls)), "\n")
	want := []string{"gdn-old bench --cases tp8_8k", "gdn bench --cases tp8_8k", "gdn+feature_x bench --cases tp8_8k", "gdn+scan-bulk bench --cases tp8_8k"}
	if len(lines) != len(want) {
		t.Fatalf("calls:\n%s", calls)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) || (i > 0 && !strings.Contains(lines[i], "--compare "+filepath.Join(out, "compare-old.csv"))) {
			t.Errorf("call %d: %q, want %q... against the baseline's CSV", i, lines[i], w)
		}
	}
	text, err := os.ReadFile(filepath.Join(out, "compare.txt"))
	if err != nil || strings.Count(string(text), "1.13x") != 3 || !strings.Contains(string(text), "== compare: gdn+scan-bulk against gdn-old") {
		t.Errorf("compare.txt = %q, %v", text, err)
	}
}

// runDeviceStepsExtra is runDeviceSteps with a baseline and more copies of
// the fake tool under the given names in .bin.
func runDeviceStepsExtra(t *testing.T, extra []string, steps ...string) (string, string, bool) {
	t.Helper()
	return runDevice(t, "", true, extra, nil, steps...)
}

// The gchunt step runs the GPU test binaries in turns, whole rounds until
// its time is up, with GOGC=10 and the tests it names; a binary that dies
// is counted, the Go runtime's bad-pointer crash apart, its first failure
// kept, and the step fails. (The second binary crashes on its first run,
// which whole rounds guarantee however slow the machine: a crash on a later
// run was missed on a loaded one, where one run took the second given.)
func TestDeviceRunGCHunt(t *testing.T) {
	dir, write := deviceDir(t)
	calls := filepath.Join(dir, "calls.log")
	// Each fake logs its environment and arguments; the norandheap one
	// crashes on its first run as the runtime does.
	fake := func(crashOn string) string {
		return `#!/usr/bin/env bash
echo "$(basename "$0") GOGC=$GOGC $*" >>"$CALLS"
n=$(grep -c "^$(basename "$0") " "$CALLS")
if [[ $n == "` + crashOn + `" ]]; then
	echo "runtime: pointer 0x18e9a2de4000 to unallocated span"
	echo "fatal error: found bad pointer in Go heap (incorrect use of unsafe or cgo?)"
	exit 2
fi
echo PASS
`
	}
	write("gdn.test", fake("never"))
	write("gdn-norandheap.gchunt", fake("1"))
	out := filepath.Join(dir, "out")
	cmd := exec.Command("bash", ".bin/device-run.sh", "gchunt:1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OUT="+out, "CALLS="+calls, "GCHUNT_RUN=^TestFull")
	var errb strings.Builder
	cmd.Stderr = &errb
	if cmd.Run() == nil {
		t.Errorf("gchunt passed with a crashing binary:\n%s", errb.String())
	}
	log, err := os.ReadFile(filepath.Join(out, "gchunt.log"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(log)
	if !strings.Contains(text, "== gdn-norandheap.gchunt, run 1: first failure") || !strings.Contains(text, "found bad pointer") {
		t.Errorf("the first crash is not kept:\n%s", text)
	}
	if !strings.Contains(text, "gdn-norandheap.gchunt: ") || !strings.Contains(text, " 1 bad pointers") {
		t.Errorf("no count of the bad-pointer crash:\n%s", text)
	}
	var runs, failed, bad int
	if _, err := fmt.Sscanf(text[strings.Index(text, "gdn.test: "):], "gdn.test: %d runs, %d failed, %d bad pointers", &runs, &failed, &bad); err != nil || runs < 1 || failed != 0 || bad != 0 {
		t.Errorf("gdn.test's line: %d runs, %d failed, %d bad (%v):\n%s", runs, failed, bad, err, text)
	}
	c, _ := os.ReadFile(calls)
	if !strings.Contains(string(c), "gdn.test GOGC=10 -test.run ^TestFull -test.count=1") {
		t.Errorf("calls:\n%s", c)
	}
}

// compare says which cases gave the baseline's output digests bit for bit:
// the fake's n-th bench call writes digest $FAKE_HASH_n (the baseline's
// call is the first); an older binary without the column gives no line.
func TestDeviceRunCompareSameOutputs(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	for _, c := range []struct {
		name string
		env  []string
		want string
	}{
		{"same", []string{"FAKE_HASH_1=ab12", "FAKE_HASH_2=ab12"}, "outputs bit-identical to gdn-old: tp8_2k; differ: none"},
		{"differ", []string{"FAKE_HASH_1=ab12", "FAKE_HASH_2=cd34"}, "outputs bit-identical to gdn-old: none; differ: tp8_2k"},
		{"no digests", []string{"FAKE_NO_HASH=1"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			stderr, out, pass := runDevice(t, "", true, nil, c.env, "compare:tp8_2k")
			if !pass {
				t.Fatalf("compare failed:\n%s", stderr)
			}
			text, err := os.ReadFile(filepath.Join(out, "compare.txt"))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Contains(string(text), "outputs bit-identical")
			if c.want == "" && got || c.want != "" && !strings.Contains(string(text), c.want) {
				t.Errorf("compare.txt:\n%s\nwant %q", text, c.want)
			}
			if c.want != "" && !strings.Contains(stderr, c.want) {
				t.Errorf("not on stderr:\n%s", stderr)
			}
		})
	}
}

// deviceDir makes a folder with .bin/device-run.sh (this tree's script)
// for a run of it, and returns the folder and a writer of more executable
// files into .bin; it skips the test without bash.
func deviceDir(t *testing.T) (string, func(name, text string)) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, ".bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("device-run.sh")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("device-run.sh", string(script))
	return dir, write
}

// More output files than the device tool brings back (8) are bundled: all
// but gpu.txt into outputs.tgz, which holds every one of them.
func TestDeviceRunBundlesManyOutputs(t *testing.T) {
	rows := "gdn_hopper_bf16_bv64  100  168  0  0  0  ok"
	steps := []string{"warmup", "compare", "comparefull", "knob:A=1@tp8_2k", "knobfull:C=1@tp8_2k", "bench", "benchfull", "plancheck:tp8_2k"}
	stderr, out, ok := runDeviceSteps(t, rows, true, steps...)
	if !ok {
		t.Fatalf("device-run failed:\n%s", stderr)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 2 || names[0] != "gpu.txt" || names[1] != "outputs.tgz" {
		t.Fatalf("outputs %v, want gpu.txt and outputs.tgz\n%s", names, stderr)
	}
	list, err := exec.Command("tar", "tzf", filepath.Join(out, "outputs.tgz")).Output()
	if err != nil {
		t.Fatal(err)
	}
	files := strings.Fields(string(list))
	if len(files) < 8 || !strings.Contains(string(list), "warmup.txt") || !strings.Contains(string(list), "compare.txt") {
		t.Fatalf("outputs.tgz holds %v", files)
	}
	if !strings.Contains(stderr, "bundled into outputs.tgz") {
		t.Errorf("no word of the bundle:\n%s", stderr)
	}
}

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

// The profile step is kerneltimes with the metrics issue 7 asks for: each
// kernel's line gains the tensor pipe's activity, eligible / resident
// warps a scheduler and achieved occupancy, and a line of its leading
// stall reasons, largest first; by default on issue 7's rows that miss
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

// The sanitize step runs each tool named over each test group named
// (default: the four tools over the four groups), and refuses a group it
// does not know; SANITIZER stands in for compute-sanitizer.
func TestDeviceRunSanitizeGroups(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "sanitizer")
	if err := os.WriteFile(fake, []byte("#!/usr/bin/env bash\necho \"sanitizer $*\" >>\"$CALLS\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"SANITIZER=" + fake}
	calls := func(out string) []string {
		b, _ := os.ReadFile(filepath.Join(filepath.Dir(out), "calls.log"))
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if strings.HasPrefix(l, "sanitizer ") {
				lines = append(lines, l)
			}
		}
		return lines
	}
	stderr, out, ok := runDeviceStepsEnv(t, "", false, env, "sanitize:racecheck@prep")
	if got := calls(out); !ok || len(got) != 1 || !strings.Contains(got[0], "--tool racecheck") ||
		!strings.Contains(got[0], "-test.run ^TestFullMatchesReference$/^seg0_prep[04]$/") {
		t.Errorf("sanitize:racecheck@prep: ok %v, calls %q\n%s", ok, got, stderr)
	}
	stderr, out, ok = runDeviceStepsEnv(t, "", false, env, "sanitize@fused,norm")
	if got := calls(out); !ok || len(got) != 8 || !strings.Contains(got[0], "--tool memcheck") || !strings.Contains(got[0], "^TestFullFused$") ||
		!strings.Contains(got[1], "^TestFullNormInCoreBitIdentical$") || !strings.Contains(got[7], "--tool initcheck") {
		t.Errorf("sanitize@fused,norm: ok %v, calls %q\n%s", ok, got, stderr)
	}
	_, out, ok = runDeviceStepsEnv(t, "", false, env, "sanitize:synccheck")
	if got := calls(out); !ok || len(got) != 4 || !strings.Contains(got[0], "^TestEveryVariant$") {
		t.Errorf("sanitize:synccheck: ok %v, calls %q", ok, got)
	}
	stderr, out, ok = runDeviceStepsEnv(t, "", false, env, "sanitize@prep,nope")
	if ok || !strings.Contains(stderr, "no test group nope") || len(calls(out)) != 0 {
		t.Errorf("an unknown group passed (ok %v, %d calls):\n%s", ok, len(calls(out)), stderr)
	}
}
