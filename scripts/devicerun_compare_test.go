package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

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

// A lab step says, beside the times, which cases kept the outputs of the
// same build without the experiment bit for bit (lab's pingpong must keep
// all): the fake's first bench call is the run without it.
func TestDeviceRunLabSameOutputs(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	ok := "gdn_hopper_bf16_bv128  790  168  0  0  0  ok"
	for _, c := range []struct {
		name string
		env  []string
		want string
	}{
		{"same", []string{"FAKE_HASH_1=ab12", "FAKE_HASH_2=ab12"}, "outputs bit-identical to the same build without it: tp8_2k; differ: none"},
		{"differ", []string{"FAKE_HASH_1=ab12", "FAKE_HASH_2=cd34"}, "outputs bit-identical to the same build without it: none; differ: tp8_2k"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stderr, out, pass := runDeviceStepsEnv(t, ok, false, c.env, "labfull:pingpong@tp8_2k")
			if !pass {
				t.Fatalf("labfull failed:\n%s", stderr)
			}
			text, err := os.ReadFile(filepath.Join(out, "labfull.txt"))
			if err != nil || !strings.Contains(string(text), c.want) || !strings.Contains(stderr, c.want) {
				t.Errorf("labfull.txt (%v):\n%s\nstderr:\n%s\nwant %q in both", err, text, stderr, c.want)
			}
		})
	}
}
