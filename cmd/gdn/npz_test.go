package main

import (
	"archive/zip"
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gdnjit/gdn"
)

func npzBytes(t *testing.T, arrays []namedArray, method uint16) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := writeNpz(&b, arrays, method); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func readNpzBytes(b []byte) (map[string]*npyArray, error) {
	return readNpz(bytes.NewReader(b), int64(len(b)))
}

func TestNpzStoredAndDeflated(t *testing.T) {
	arrays := []namedArray{
		{"x", &npyArray{Shape: []int{2, 2}, Data: []float32{1, 2, 3, 4}}},
		{"cu_seqlens", &npyArray{Shape: []int{3}, Data: []int64{0, 1, 4}}},
		{"scale", &npyArray{Shape: []int{}, Data: []float64{0.5}}},
	}
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		b := npzBytes(t, arrays, method)
		zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		if got := zr.File[0].Method; got != method {
			t.Fatalf("member method %d, want %d", got, method)
		}
		m, err := readNpzBytes(b)
		if err != nil {
			t.Fatalf("method %d: %v", method, err)
		}
		for _, na := range arrays {
			if !reflect.DeepEqual(m[na.Name], na.Array) {
				t.Errorf("method %d: %s = %+v, want %+v", method, na.Name, m[na.Name], na.Array)
			}
		}
	}
}

func TestNpzMalformedMember(t *testing.T) {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, _ := zw.Create("q.npy")
	w.Write([]byte("\x93NUMPY\x01\x00\x04\x00{}\n\n"))
	zw.Close()
	_, err := readNpzBytes(b.Bytes())
	if err == nil || !strings.HasPrefix(err.Error(), "q.npy: header") || !strings.Contains(err.Error(), "want the keys") {
		t.Errorf("err = %v, want one naming q.npy and the keys its header lacks", err)
	}
	// Each error says each thing once: no prefix twice (the archive
	// library's own "zip:" stays, once, after what gdn says).
	_, err = readNpzBytes([]byte("not a zip"))
	if err == nil || err.Error() != "not an .npz file: zip: not a valid zip file" {
		t.Errorf("a non-zip file: err = %v, want \"not an .npz file: zip: not a valid zip file\"", err)
	}
	path := filepath.Join(t.TempDir(), "in.npz")
	if err := os.WriteFile(path, []byte("not a zip"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readNpzFile(path); err == nil || err.Error() != path+": not an .npz file: zip: not a valid zip file" {
		t.Errorf("readNpzFile: err = %v, want the path, then the reason, once", err)
	}
}

// smallRunInput returns the arrays of a `gdn run` input: two packed
// sequences (lengths 2 and 3), Hq = 1, Hv = 2, with h0, int64 cu_seqlens
// and a float64 scale.
func smallRunInput() []namedArray {
	const B, T, Hq, Hv, N = 1, 5, 1, 2, 2
	fill := func(n int, v float32) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = v * float32(i%7+1) / 7
		}
		return x
	}
	f := func(v float32, shape ...int) *npyArray {
		n := 1
		for _, d := range shape {
			n *= d
		}
		return &npyArray{Shape: shape, Data: fill(n, v)}
	}
	return []namedArray{
		{"q", f(0.1, B, T, Hq, 128)},
		{"k", f(0.1, B, T, Hq, 128)},
		{"v", f(1, B, T, Hv, 128)},
		{"g", f(-0.01, B, T, Hv)},
		{"beta", f(0.5, B, T, Hv)},
		{"A", f(0.01, B, T, Hv, 64)},
		{"h0", f(1, N, Hv, 128, 128)},
		{"cu_seqlens", &npyArray{Shape: []int{N + 1}, Data: []int64{0, 2, 5}}},
		{"scale", &npyArray{Shape: []int{}, Data: []float64{0.25}}},
	}
}

func TestHostArgsFromNpz(t *testing.T) {
	m, err := readNpzBytes(npzBytes(t, smallRunInput(), zip.Deflate))
	if err != nil {
		t.Fatal(err)
	}
	h, err := hostArgsFromNpz(m, gdn.FP16)
	if err != nil {
		t.Fatal(err)
	}
	if h.B != 1 || h.T != 5 || h.Hq != 1 || h.Hv != 2 || h.Dtype != gdn.FP16 || !h.FinalState {
		t.Errorf("sizes B=%d T=%d Hq=%d Hv=%d dtype %v final %v", h.B, h.T, h.Hq, h.Hv, h.Dtype, h.FinalState)
	}
	if !reflect.DeepEqual(h.CuSeqlens, []int{0, 2, 5}) || h.SeqlensDtype != gdn.Int64 {
		t.Errorf("cu_seqlens %v (%v), want [0 2 5] (int64)", h.CuSeqlens, h.SeqlensDtype)
	}
	if h.Scale != 0.25 {
		t.Errorf("scale %v, want 0.25", h.Scale)
	}
	lens := map[string]int{"q": len(h.Q), "k": len(h.K), "v": len(h.V), "g": len(h.G), "beta": len(h.Beta), "A": len(h.A), "h0": len(h.H0)}
	want := map[string]int{"q": 640, "k": 640, "v": 1280, "g": 10, "beta": 10, "A": 640, "h0": 2 * 2 * 128 * 128}
	if !reflect.DeepEqual(lens, want) {
		t.Errorf("lengths %v, want %v", lens, want)
	}
	if h.G[1] != m["g"].Data.([]float32)[1] {
		t.Error("g not taken from the file")
	}

	// Without the optional arrays.
	for _, k := range []string{"h0", "cu_seqlens", "scale"} {
		delete(m, k)
	}
	if h, err = hostArgsFromNpz(m, gdn.BF16); err != nil {
		t.Fatal(err)
	}
	if h.H0 != nil || h.CuSeqlens != nil || h.Scale != 0 {
		t.Errorf("optional arrays absent, got h0 %d values, cu_seqlens %v, scale %v", len(h.H0), h.CuSeqlens, h.Scale)
	}
}

func TestHostArgsFromNpzErrors(t *testing.T) {
	f4 := func(shape ...int) *npyArray {
		n := 1
		for _, d := range shape {
			n *= d
		}
		return &npyArray{Shape: shape, Data: make([]float32, n)}
	}
	cases := []struct {
		name string
		edit func(m map[string]*npyArray)
		want string
	}{
		{"missing A", func(m map[string]*npyArray) { delete(m, "A") }, "array A is missing"},
		{"missing q", func(m map[string]*npyArray) { delete(m, "q") }, "array q is missing"},
		{"g float64", func(m map[string]*npyArray) { m["g"] = &npyArray{Shape: []int{1, 5, 2}, Data: make([]float64, 10)} }, "array g: dtype <f8, want float32"},
		{"beta rank 2", func(m map[string]*npyArray) { m["beta"] = f4(5, 2) }, "array beta: rank 2"},
		{"head dim", func(m map[string]*npyArray) { m["q"] = f4(1, 5, 1, 64) }, "array q: shape [1 5 1 64]: head dimension 64"},
		{"k shape", func(m map[string]*npyArray) { m["k"] = f4(1, 5, 2, 128) }, "array k: shape [1 5 2 128], want [1 5 1 128]"},
		{"v tokens", func(m map[string]*npyArray) { m["v"] = f4(1, 4, 2, 128) }, "array v: shape"},
		{"A width", func(m map[string]*npyArray) { m["A"] = f4(1, 5, 2, 128) }, "array A: shape [1 5 2 128], want [1 5 2 64]"},
		{"h0 count", func(m map[string]*npyArray) { m["h0"] = f4(1, 2, 128, 128) }, "array h0: shape [1 2 128 128], want [2 2 128 128]"},
		{"cu float", func(m map[string]*npyArray) { m["cu_seqlens"] = f4(3) }, "array cu_seqlens: dtype <f4"},
		{"cu rank", func(m map[string]*npyArray) {
			m["cu_seqlens"] = &npyArray{Shape: []int{1, 3}, Data: []int32{0, 2, 5}}
		}, "array cu_seqlens: shape [1 3]"},
		{"scale 1-d", func(m map[string]*npyArray) { m["scale"] = f4(1) }, "array scale: shape [1], want a 0-d"},
		{"scale int", func(m map[string]*npyArray) { m["scale"] = &npyArray{Shape: []int{}, Data: []int32{1}} }, "array scale: dtype <i4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := map[string]*npyArray{}
			for _, na := range smallRunInput() {
				m[na.Name] = na.Array
			}
			c.edit(m)
			_, err := hostArgsFromNpz(m, gdn.BF16)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestRunCommand runs `gdn run` end to end as far as this machine allows:
// without a GPU it must stop with a clear error wrapping ErrNoCUDA after the
// input was read and checked; with one it must write o and ht.
func TestRunCommand(t *testing.T) {
	checkRunEndToEnd(t, smallRunInput(), nil, "B=1 T=5 Hq=1 Hv=2 N=2")
}

// checkRunEndToEnd writes arrays (a call of smallRunInput's sizes) to an
// .npz and runs `gdn run` on it with flags. Without a GPU the run must
// stop with an error that wraps ErrNoCUDA and says so, after its progress
// line (which must hold describe) showed the file read and checked; with
// one it must write o and ht of the call's shapes.
func checkRunEndToEnd(t *testing.T, arrays []namedArray, flags []string, describe string) {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.npz"), filepath.Join(dir, "out.npz")
	if err := writeNpzFile(in, arrays); err != nil {
		t.Fatal(err)
	}
	var stdoutBuf, stderrBuf bytes.Buffer
	stdout, stderr = &stdoutBuf, &stderrBuf
	defer func() { stdout, stderr = os.Stdout, os.Stderr }()

	err := runRun(append([]string{"--in", in, "--out", out}, flags...))
	if errors.Is(err, gdn.ErrNoCUDA) {
		if !strings.Contains(err.Error(), "no GPU") {
			t.Errorf("error %q does not say there is no GPU", err)
		}
		if !strings.Contains(stderrBuf.String(), describe) {
			t.Errorf("stderr %q does not describe the input (%q)", stderrBuf.String(), describe)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	m, err := readNpzFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if o, ht := m["o"], m["ht"]; o == nil || ht == nil ||
		!reflect.DeepEqual(o.Shape, []int{1, 5, 2, 128}) || !reflect.DeepEqual(ht.Shape, []int{2, 2, 128, 128}) {
		t.Errorf("out.npz arrays: %v", m)
	}
}

func TestRunCommandArgs(t *testing.T) {
	var errBuf bytes.Buffer
	stderr = &errBuf
	defer func() { stderr = os.Stderr }()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--out", "x.npz"}, "--in is required"},
		{[]string{"--in", "x.npz"}, "--out is required"},
		{[]string{"--in", "a", "--out", "b", "--dtype", "fp32"}, `--dtype "fp32": want bf16 or fp16`},
		{[]string{"--in", filepath.Join(t.TempDir(), "none.npz"), "--out", "b"}, "no such file"},
	}
	for _, c := range cases {
		err := runRun(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run %v: err = %v, want one containing %q", c.args, err, c.want)
		}
	}
	if err := runRun([]string{"--bogus"}); !errors.Is(err, errUsage) {
		t.Errorf("unknown flag: err = %v, want errUsage", err)
	}
}

// TestNpzMutationsNeverPanic flips bytes of a valid .npz: every result is
// an array set or an error, never a panic.
func TestNpzMutationsNeverPanic(t *testing.T) {
	good := npzBytes(t, smallRunInput()[7:], zip.Store) // cu_seqlens and scale: small
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		b := bytes.Clone(good)
		for range 1 + rng.IntN(4) {
			b[rng.IntN(len(b))] = byte(rng.IntN(256))
		}
		if rng.IntN(4) == 0 {
			b = b[:rng.IntN(len(b))]
		}
		readNpzBytes(b) // must return
	}
}

// BenchmarkReadNpz reads an .npz with one float32 array of 4M elements (16
// MB), the size of q for 8k tokens and 32 heads.
func BenchmarkReadNpz(b *testing.B) {
	x := make([]float32, 1<<22)
	for i := range x {
		x[i] = float32(i)
	}
	var buf bytes.Buffer
	if err := writeNpz(&buf, []namedArray{{"x", &npyArray{Shape: []int{1 << 12, 1 << 10}, Data: x}}}, zip.Store); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		if _, err := readNpzBytes(buf.Bytes()); err != nil {
			b.Fatal(err)
		}
	}
}
