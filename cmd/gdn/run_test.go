package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gdnjit/gdn"
)

// smallFullInput is smallRunInput for --full --gate-in-kernel: no A, g the
// gate's raw input, A_log and dt_bias [Hv].
func smallFullInput() []namedArray {
	var out []namedArray
	for _, na := range smallRunInput() {
		if na.Name != "A" {
			out = append(out, na)
		}
	}
	return append(out,
		namedArray{"A_log", &npyArray{Shape: []int{2}, Data: []float32{-1, 0.5}}},
		namedArray{"dt_bias", &npyArray{Shape: []int{2}, Data: []float32{0.25, -3}}})
}

func arrayMap(arrays []namedArray) map[string]*npyArray {
	m := map[string]*npyArray{}
	for _, na := range arrays {
		m[na.Name] = na.Array
	}
	return m
}

func TestParseRunArgs(t *testing.T) {
	o, err := parseRunArgs([]string{"--in", "a.npz", "--out", "b.npz"})
	if err != nil || o.full || o.l2norm || o.gateIn || o.betaLogits || o.negEigval || o.dtype != gdn.BF16 || o.mode() != "core forward" {
		t.Errorf("defaults: %+v, %v", o, err)
	}
	o, err = parseRunArgs([]string{"--in", "a.npz", "--out", "b.npz", "--full", "--l2norm", "--gate-in-kernel", "--dtype", "fp16"})
	if err != nil || !o.full || !o.l2norm || !o.gateIn || o.dtype != gdn.FP16 {
		t.Errorf("full: %+v, %v", o, err)
	}
	if m := o.mode(); m != "full forward, L2 norm of q and k inside, gate from A_log and dt_bias" {
		t.Errorf("mode %q", m)
	}
	for _, c := range []struct {
		flags    []string
		neg      bool
		wantMode string
	}{
		{[]string{"--beta-logits"}, false, "full forward, beta = sigmoid(logits)"},
		{[]string{"--beta-logits", "--neg-eigval"}, true, "full forward, beta = 2 sigmoid(logits)"},
	} {
		o, err = parseRunArgs(append([]string{"--in", "a.npz", "--out", "b.npz", "--full"}, c.flags...))
		if err != nil || !o.betaLogits || o.negEigval != c.neg || o.mode() != c.wantMode {
			t.Errorf("%v: %+v (mode %q), %v", c.flags, o, o.mode(), err)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--in", "a", "--out", "b", "--l2norm"}, "--l2norm is a step of the full forward: add --full"},
		{[]string{"--in", "a", "--out", "b", "--gate-in-kernel"}, "--gate-in-kernel is a step of the full forward: add --full"},
		{[]string{"--in", "a", "--full"}, "--out is required"},
		{[]string{"--in", "a", "--out", "b", "--beta-logits"}, "--beta-logits and --neg-eigval are steps of the full forward: add --full"},
		{[]string{"--in", "a", "--out", "b", "--full", "--neg-eigval"}, "--neg-eigval applies to beta given as logits: add --beta-logits"},
	} {
		if _, err := parseRunArgs(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want one containing %q", c.args, err, c.want)
		}
	}
}

func TestHostFullArgsFromNpz(t *testing.T) {
	m := arrayMap(smallFullInput())
	h, err := hostFullArgsFromNpz(m, gdn.FP16, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if h.B != 1 || h.T != 5 || h.Hq != 1 || h.Hv != 2 || h.Dtype != gdn.FP16 || !h.FinalState || !h.L2Norm || !h.GateInKernel {
		t.Errorf("call %+v", h)
	}
	if !reflect.DeepEqual(h.ALog, []float32{-1, 0.5}) || !reflect.DeepEqual(h.DtBias, []float32{0.25, -3}) {
		t.Errorf("A_log %v, dt_bias %v", h.ALog, h.DtBias)
	}
	if !reflect.DeepEqual(h.CuSeqlens, []int{0, 2, 5}) || h.SeqlensDtype != gdn.Int64 || h.Scale != 0.25 || len(h.H0) != 2*2*128*128 {
		t.Errorf("cu_seqlens %v (%v), scale %v, h0 %d values", h.CuSeqlens, h.SeqlensDtype, h.Scale, len(h.H0))
	}
	if h.G[3] != m["g"].Data.([]float32)[3] || len(h.G) != 10 {
		t.Error("g not taken from the file as it is")
	}
	// Raw log-gates: no gate parameters.
	delete(m, "A_log")
	delete(m, "dt_bias")
	if h, err = hostFullArgsFromNpz(m, gdn.BF16, false, false); err != nil || h.ALog != nil || h.GateInKernel || h.L2Norm {
		t.Errorf("plain full call: %+v, %v", h, err)
	}
}

func TestHostFullArgsFromNpzErrors(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(m map[string]*npyArray)
		gateIn bool
		want   string
	}{
		{"A given", func(m map[string]*npyArray) { m["A"] = smallRunInput()[5].Array }, true, "array A: the full forward computes A itself"},
		{"no A_log", func(m map[string]*npyArray) { delete(m, "A_log") }, true, "array A_log is missing (want float32 [Hv] = [2]"},
		{"no dt_bias", func(m map[string]*npyArray) { delete(m, "dt_bias") }, true, "array dt_bias is missing"},
		{"A_log shape", func(m map[string]*npyArray) { m["A_log"] = &npyArray{Shape: []int{3}, Data: make([]float32, 3)} }, true,
			"array A_log: shape [3], want [2]"},
		{"dt_bias float64", func(m map[string]*npyArray) { m["dt_bias"] = &npyArray{Shape: []int{2}, Data: make([]float64, 2)} }, true,
			"array dt_bias: dtype <f8, want float32"},
		{"A_log without the flag", func(m map[string]*npyArray) {}, false, "array A_log is given but --gate-in-kernel is not"},
		{"dt_bias without the flag", func(m map[string]*npyArray) { delete(m, "A_log") }, false, "array dt_bias is given but --gate-in-kernel is not"},
		{"g shape", func(m map[string]*npyArray) { m["g"] = &npyArray{Shape: []int{1, 5, 3}, Data: make([]float32, 15)} }, true,
			"array g: shape [1 5 3], want [1 5 2]"},
		{"no beta", func(m map[string]*npyArray) { delete(m, "beta") }, true, "array beta is missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := arrayMap(smallFullInput())
			c.edit(m)
			_, err := hostFullArgsFromNpz(m, gdn.BF16, true, c.gateIn)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
}

// A file made for the other forward says which flag it needs.
func TestHostArgsFromNpzPointsToFull(t *testing.T) {
	m := arrayMap(smallFullInput())
	if _, err := hostArgsFromNpz(m, gdn.BF16); err == nil || !strings.Contains(err.Error(), "--full --gate-in-kernel") {
		t.Errorf("core run of a gate file: %v", err)
	}
	delete(m, "A_log")
	delete(m, "dt_bias")
	if _, err := hostArgsFromNpz(m, gdn.BF16); err == nil || !strings.Contains(err.Error(), "array A is missing") ||
		!strings.Contains(err.Error(), "run with --full") {
		t.Errorf("core run without A: %v", err)
	}
}

// gdn run --full end to end as far as this machine allows: without a GPU it
// stops with a clear error wrapping ErrNoCUDA after the file was read and
// checked (the progress line tells the mode); with one it writes o and ht.
// A bad file is an error naming the file and the array, GPU or not.
func TestRunCommandFull(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.npz"), filepath.Join(dir, "out.npz")
	if err := writeNpzFile(in, smallFullInput()); err != nil {
		t.Fatal(err)
	}
	var stderrBuf bytes.Buffer
	stderr = &stderrBuf
	defer func() { stderr = os.Stderr }()
	if err := runRun([]string{"--in", in, "--out", out, "--full"}); err == nil || !strings.Contains(err.Error(), in+": array A_log is given") {
		t.Errorf("--full without --gate-in-kernel on a gate file: %v", err)
	}
	checkRunEndToEnd(t, smallFullInput(), []string{"--full", "--l2norm", "--gate-in-kernel"},
		"B=1 T=5 Hq=1 Hv=2 N=2, bf16, h0 true; full forward, L2 norm of q and k inside, gate from A_log and dt_bias")
	checkRunEndToEnd(t, smallFullInput(), []string{"--full", "--gate-in-kernel", "--beta-logits", "--neg-eigval"},
		"B=1 T=5 Hq=1 Hv=2 N=2, bf16, h0 true; full forward, gate from A_log and dt_bias, beta = 2 sigmoid(logits)")
}

// gdn help run documents both forwards and the full forward's flags.
func TestRunHelp(t *testing.T) {
	code, out, _ := runGDN(t, "help", "run")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--full", "-l2norm", "-gate-in-kernel", "-beta-logits", "-neg-eigval", "A_log [Hv]", "dt_bias [Hv]", "raw per-token log-gate", "A [B,T,Hv,64]"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
}
