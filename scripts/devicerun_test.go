package scripts

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeGDN is a stand-in for the gdn tool that device-run.sh's warmup,
// compare, knob and stress steps call: `warmup` prints the table in
// $FAKE_WARMUP, `bench` writes the file after --csv (one case, its output
// digest $FAKE_HASH_n for the n-th bench call, else aa, and no digest
// column at all with $FAKE_NO_HASH, as before it had one, and no file but
// exit status 1 when $FAKE_NO_CSV names its --variant's suffix; its median
// $FAKE_MS_auto, _bv64 or _bv128 by --variant, else 0.06), prints a
// comparison header when given --compare and exits $FAKE_BENCH_RC (0 when
// unset); every call but `version` (which prints a line, as device-run.sh
// asks before its steps) logs its name and arguments to calls.log (after
// GDN_JIT_DEFINES=... and GDN_LAB=... when those are set).
const fakeGDN = `#!/usr/bin/env bash
[[ $1 == version ]] && { echo "gdn fake-build (commit 0123456789ab)"; exit 0; }
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
soak) sleep "${FAKE_SOAK_SLEEP:-0}"; echo "3 passed, 0 failed"; exit "${FAKE_SOAK_RC:-0}" ;;
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

// A stress case: the environment of the fake tools, whether the step
// passes, and what its log says.
type stressCase struct {
	name string
	env  []string
	pass bool
	says string
}

// The stress step runs gdn bench --full processes (BV 64, forced short
// segments) until its time is up: it passes when every process exits 0
// with the first process's output digests, and fails, saying which
// process, on a failed process or on a digest that differs.
func TestDeviceRunStress(t *testing.T) {
	for _, c := range []stressCase{
		{"steady", nil, true, ""},
		{"a digest differs", []string{"FAKE_HASH_3=bb"}, false, "process 3: outputs differ"},
		{"processes fail", []string{"FAKE_BENCH_RC=1"}, false, "process 1 failed"},
		{"another binary", []string{"STRESS_GDN=.bin/gdn-old"}, true, ""},
		// A binary from before the digest column: its medians differ from
		// process to process, and only its exit status counts.
		{"no digest column", []string{"STRESS_GDN=.bin/gdn-old", "FAKE_NO_HASH=1"}, true, "exit status only"},
		{"no digest column, failing", []string{"STRESS_GDN=.bin/gdn-old", "FAKE_NO_HASH=1", "FAKE_BENCH_RC=1"}, false, "process 1 failed"},
	} {
		// Each case is two seconds of fake processes in a folder of its
		// own: the cases run side by side.
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.check(t)
		})
	}
}

// check runs the stress step for two seconds with c's environment and
// checks its verdict, its log and the binary it ran.
func (c stressCase) check(t *testing.T) {
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
	// gpu.txt also names the build the steps ran (.bin/gdn version).
	if gpu, err := os.ReadFile(filepath.Join(out, "gpu.txt")); err != nil || !strings.Contains(string(gpu), "gdn fake-build (commit 0123456789ab)") {
		t.Errorf("gpu.txt lacks the build's line (%v):\n%s", err, gpu)
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
	if got := calls(out); !ok || len(got) != 5 || !strings.Contains(got[0], "^TestEveryVariant$") || !strings.Contains(got[4], "TestDecodeMatchesReference") {
		t.Errorf("sanitize:synccheck: ok %v, calls %q", ok, got)
	}
	stderr, out, ok = runDeviceStepsEnv(t, "", false, env, "sanitize@prep,nope")
	if ok || !strings.Contains(stderr, "no test group nope") || len(calls(out)) != 0 {
		t.Errorf("an unknown group passed (ok %v, %d calls):\n%s", ok, len(calls(out)), stderr)
	}
}

// The serving step runs the serving layer's GPU tests, then gdn bench
// --decode and --mixed, and FLA's decode script only with FLA_PATH; a
// failed test run fails the step.
func TestDeviceRunServing(t *testing.T) {
	dir, write := deviceDir(t)
	write("gdn", fakeGDN)
	write("gdn.test", "#!/usr/bin/env bash\necho \"gdn.test $*\" >>\"$CALLS\"\necho ok\nexit ${FAKE_TEST_RC:-0}\n")
	run := func(env ...string) (string, bool) {
		out := filepath.Join(dir, "out")
		cmd := exec.Command("bash", ".bin/device-run.sh", "serving")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "OUT="+out, "CALLS="+filepath.Join(dir, "calls.log"))
		cmd.Env = append(cmd.Env, env...)
		err := cmd.Run()
		b, _ := os.ReadFile(filepath.Join(dir, "calls.log"))
		os.Remove(filepath.Join(dir, "calls.log"))
		return string(b), err == nil
	}
	calls, ok := run()
	if !ok || !strings.Contains(calls, "gdn.test -test.run Mixed|Decode|Pool|Checkpoint") ||
		!strings.Contains(calls, "gdn bench --decode") || !strings.Contains(calls, "gdn bench --mixed") {
		t.Errorf("serving: ok %v, calls:\n%s", ok, calls)
	}
	if _, ok := run("FAKE_TEST_RC=1"); ok {
		t.Error("serving passed with its tests failing")
	}
}

// soakbg starts the soak in a session of its own and returns at once;
// soakwait waits for it, brings its log back, and fails on a failed soak
// or on one still running when its wait ends.
func TestDeviceRunSoakInBackground(t *testing.T) {
	dir, write := deviceDir(t)
	write("gdn", fakeGDN)
	soakDir := filepath.Join(dir, "soak")
	run := func(step string, env ...string) (string, bool) {
		cmd := exec.Command("bash", ".bin/device-run.sh", step)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "OUT="+filepath.Join(dir, "out"), "CALLS="+filepath.Join(dir, "calls.log"),
			"SOAK_DIR="+soakDir, "SOAK_SEED=7")
		cmd.Env = append(cmd.Env, env...)
		b, err := cmd.CombinedOutput()
		return string(b), err == nil
	}
	if out, ok := run("soakwait"); ok || !strings.Contains(out, "no soak started") {
		t.Errorf("soakwait with no soak: ok %v\n%s", ok, out)
	}
	start := time.Now()
	if out, ok := run("soakbg:0.5", "FAKE_SOAK_SLEEP=3"); !ok || time.Since(start) > 2*time.Second {
		t.Fatalf("soakbg: ok %v after %v\n%s", ok, time.Since(start), out)
	}
	if out, ok := run("soakwait", "SOAKWAIT_S=0"); ok || !strings.Contains(out, "still running") {
		t.Errorf("soakwait before the soak ended: ok %v\n%s", ok, out)
	}
	if out, ok := run("soakwait"); !ok || !strings.Contains(out, "3 passed, 0 failed") {
		t.Errorf("soakwait: ok %v\n%s", ok, out)
	}
	calls, _ := os.ReadFile(filepath.Join(dir, "calls.log"))
	if !strings.Contains(string(calls), "gdn soak --minutes 0.5 --seed 7") {
		t.Errorf("calls:\n%s", calls)
	}
	run("soakbg", "FAKE_SOAK_RC=1")
	if out, ok := run("soakwait"); ok || !strings.Contains(out, "exit status 1") {
		t.Errorf("soakwait after a failed soak: ok %v\n%s", ok, out)
	}
}
