//go:build cuda

package gdn_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/tuning"
	"github.com/gdnjit/gdn/kernsrc"
	"github.com/gdnjit/gdn/ref"
)

// recipeDtype is the dtype of q, k and v in inputs drawn with o (the
// recipe's zero value means bf16).
func recipeDtype(o ref.RecipeOptions) gdn.Dtype {
	if o.Dtype == gdn.FP16 {
		return gdn.FP16
	}
	return gdn.BF16
}

func driverPtr(p uintptr) driver.DevicePtr { return driver.DevicePtr(p) }

// withKnobs is o with the knobs of tests and benchmarks attached
// (tuning.Set): forced variants, split lengths and the like.
func withKnobs(o gdn.Options, k tuning.Knobs) gdn.Options {
	tuning.Set(&o, k)
	return o
}

// The GPU tests run on a machine with an NVIDIA GPU (build tag cuda). Every
// case draws fresh inputs from the recipe of docs/SPEC.md (seeded from the case, so a
// failure can be replayed), runs the core forward with NaN-poisoned outputs
// and compares o and ht with the float64 recurrent reference.
var (
	rtOnce sync.Once
	rt     *gdn.Runtime
	rtErr  error
)

func testRuntime(t *testing.T) *gdn.Runtime {
	t.Helper()
	rtOnce.Do(func() { rt, rtErr = gdn.Open(gdn.Options{}) })
	if rtErr != nil {
		t.Fatalf("open runtime: %v", rtErr)
	}
	return rt
}

type coreCase struct {
	name     string
	hq, hv   int
	b        int
	lens     []int // packed sequences (B = 1); nil: B sequences of T
	t        int
	dtype    gdn.Dtype
	h0, ht   bool
	aBF16    bool
	betaIn   bool // beta in the input dtype instead of fp32
	strong   bool // g = -5 per token
	beta     *float64
	seqInt64 bool
	// rawQK: q's rows twice and k's half their unit norm (exact in either
	// dtype): the core forward must take q and k as given, never normalise
	// them itself (the full forward's in-core L2 norm is a flag of its own).
	rawQK bool
	// scale: o's scale (0: the default 1/sqrt(128)), its sign included.
	scale float64
}

func (c coreCase) shape() ref.Shape {
	if c.lens == nil {
		return ref.Shape{B: c.b, T: c.t, Hq: c.hq, Hv: c.hv}
	}
	cu := []int{0}
	for _, l := range c.lens {
		cu = append(cu, cu[len(cu)-1]+l)
	}
	return ref.Shape{B: 1, T: cu[len(cu)-1], Hq: c.hq, Hv: c.hv, CuSeqlens: cu}
}

func coreCases() []coreCase {
	var cs []coreCase
	heads := [][2]int{{1, 1}, {2, 8}, {4, 4}, {16, 32}, {8, 24}}
	// Every length with every head layout, alternating the options.
	i := 0
	for _, T := range []int{1, 63, 64, 65, 300} {
		for _, hh := range heads {
			c := coreCase{hq: hh[0], hv: hh[1], b: 1 + 2*(i%2), t: T, dtype: gdn.BF16,
				h0: i%3 != 0, ht: i%4 != 1, aBF16: i%5 == 2, betaIn: i%7 == 3}
			c.name = fmt.Sprintf("T%d_Hq%d_Hv%d_B%d", T, hh[0], hh[1], c.b)
			cs = append(cs, c)
			i++
		}
	}
	long := []coreCase{
		{name: "T4096_Hq2_Hv8", hq: 2, hv: 8, b: 1, t: 4096, h0: true, ht: true},
		{name: "T4096_Hq1_Hv1_B3", hq: 1, hv: 1, b: 3, t: 4096, h0: true, ht: true},
		{name: "T4096_Hq16_Hv32", hq: 16, hv: 32, b: 1, t: 4096, h0: true, ht: true},
		{name: "T4096_Hq8_Hv24_noh0", hq: 8, hv: 24, b: 1, t: 4096, ht: true},
		{name: "varlen_0_1_edges", hq: 2, hv: 8, lens: []int{0, 1, 63, 64, 65, 0, 130, 1}, h0: true, ht: true},
		{name: "varlen_int64", hq: 4, hv: 4, lens: []int{300, 0, 77, 1}, h0: true, ht: true, seqInt64: true},
		{name: "varlen_G3", hq: 8, hv: 24, lens: []int{1, 200, 64}, ht: true},
		{name: "fp16", hq: 2, hv: 8, b: 3, t: 300, dtype: gdn.FP16, h0: true, ht: true},
		{name: "fp16_varlen_betaIn", hq: 4, hv: 4, lens: []int{65, 1, 0, 190}, dtype: gdn.FP16, h0: true, ht: true, betaIn: true},
		{name: "fp16_A_bf16", hq: 1, hv: 1, b: 1, t: 4096, dtype: gdn.FP16, h0: true, ht: true, aBF16: true},
		{name: "strong_decay", hq: 2, hv: 8, b: 1, t: 1000, h0: true, ht: true, strong: true},
		{name: "strong_decay_varlen", hq: 4, hv: 4, lens: []int{129, 1, 64}, ht: true, strong: true},
		{name: "beta0", hq: 2, hv: 8, b: 1, t: 300, h0: true, ht: true, beta: ref.Float(0)},
		{name: "beta1", hq: 2, hv: 8, b: 3, t: 300, h0: true, ht: true, beta: ref.Float(1)},
		{name: "beta1_noh0", hq: 16, hv: 32, b: 1, t: 200, ht: true, beta: ref.Float(1)},
		{name: "no_outputs_but_o", hq: 4, hv: 4, b: 3, t: 100, h0: true},
		{name: "raw_qk_norms", hq: 2, hv: 8, b: 1, t: 300, h0: true, ht: true, rawQK: true},
		// (o grows with the scale, and the pass line's max-abs part is for
		// o's size at the default: 0.25 is about three times it.)
		{name: "scale_negative", hq: 2, hv: 8, b: 2, t: 300, h0: true, ht: true, scale: -0.3},
		{name: "scale_quarter_varlen", hq: 4, hv: 4, lens: []int{129, 1, 64}, h0: true, ht: true, scale: 0.25},
	}
	for _, c := range long {
		if c.dtype == gdn.DtypeInvalid {
			c.dtype = gdn.BF16
		}
		cs = append(cs, c)
	}
	return cs
}

var f32 = ref.Float32s

// worst tracks the largest errors over all cases for the summary line.
var worst struct {
	sync.Mutex
	o, ht ref.Errors
}

// coreVariants are the kernel variants the planner can pick: each is held to
// the reference on every case, whatever the test GPU's size would make the
// planner choose (GDN_TEST_VARIANTS, comma-separated, narrows the list).
func coreVariants(t *testing.T) []string {
	var names []string
	for _, v := range kernsrc.HopperVariants() {
		if strings.HasSuffix(v.Name, "_transfer") {
			continue // the transfer pass of split plans: TestSplit* runs it
		}
		if strings.Contains(v.Name, "_fp16qk_") || strings.Contains(v.Name, "_l2norm_") || strings.Contains(v.Name, "_fused_") {
			continue // the full forward's core on fp16 copies of q and k, normalising them, or preparing all: TestFull* runs it
		}
		names = append(names, v.Name)
	}
	if s := os.Getenv("GDN_TEST_VARIANTS"); s != "" {
		names = strings.Split(s, ",")
	}
	return names
}

func TestCoreMatchesReference(t *testing.T) {
	for _, variant := range coreVariants(t) {
		t.Run(variant, func(t *testing.T) {
			t.Parallel()
			testCoreVariant(t, variant)
		})
	}
	t.Cleanup(func() {
		fmt.Fprintf(os.Stderr, "METRIC worst o ratio=%.3g maxabs=%.3g; ht ratio=%.3g maxabs=%.3g\n",
			worst.o.Ratio, worst.o.MaxAbs, worst.ht.Ratio, worst.ht.MaxAbs)
	})
}

// variantRuntimes are Runtimes pinned to one kernel variant each.
var variantRuntimes sync.Map

func variantRuntime(t *testing.T, variant string) *gdn.Runtime {
	t.Helper()
	if r, ok := variantRuntimes.Load(variant); ok {
		return r.(*gdn.Runtime)
	}
	r, err := gdn.Open(withKnobs(gdn.Options{}, tuning.Knobs{Variant: variant}))
	if err != nil {
		t.Fatalf("open runtime for %s: %v", variant, err)
	}
	if prev, loaded := variantRuntimes.LoadOrStore(variant, r); loaded {
		r.Close()
		return prev.(*gdn.Runtime)
	}
	return r
}

// caseData is one case's inputs and float64 reference, computed once and
// shared by the variants that run it (the reference is most of the time).
type caseData struct {
	once          sync.Once
	in            ref.Inputs
	gcum, a       []float64
	wantO, wantHt []float64
	err           error
}

var caseCache sync.Map // case name + dtype -> *caseData

func loadCase(c coreCase, seed uint64) *caseData {
	e, _ := caseCache.LoadOrStore(fmt.Sprintf("%s/%v", c.name, c.dtype), new(caseData))
	d := e.(*caseData)
	d.once.Do(func() {
		s := c.shape()
		refDt := c.dtype
		in, err := ref.Recipe(s, seed, ref.RecipeOptions{Dtype: refDt, WithH0: c.h0, StrongDecay: c.strong, BetaValue: c.beta, Scale: c.scale})
		if err != nil {
			d.err = err
			return
		}
		if c.rawQK {
			for i := range in.Q {
				in.Q[i] *= 2
				in.K[i] *= 0.5
			}
		}
		if d.gcum, d.err = ref.ChunkCumsum(s, in.G); d.err != nil {
			return
		}
		if d.a, d.err = ref.SolveA(s, in.K, in.Beta, d.gcum); d.err != nil {
			return
		}
		if c.betaIn {
			// The kernel then reads beta rounded to the input dtype: so does the reference.
			in.Beta, _ = ref.Quantize(refDt, in.Beta)
		}
		d.in = in
		d.wantO, d.wantHt, d.err = ref.Recurrent(in)
	})
	return d
}

func testCoreVariant(t *testing.T, variant string) {
	r := variantRuntime(t, variant)
	dtOK := func(dt gdn.Dtype) bool { return strings.Contains(variant, "_fp16_") == (dt == gdn.FP16) }
	for i, c := range coreCases() {
		if !dtOK(c.dtype) {
			c.dtype = gdn.FP16
			if !dtOK(c.dtype) {
				c.dtype = gdn.BF16
			}
		}
		c := c
		seed := uint64(1000 + i)
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := c.shape()
			d := loadCase(c, seed)
			if d.err != nil {
				t.Fatal(d.err)
			}
			in := d.in
			args := &gdn.HostCoreArgs{
				B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, CuSeqlens: s.CuSeqlens, Dtype: c.dtype,
				Q: f32(in.Q), K: f32(in.K), V: f32(in.V), G: f32(d.gcum), Beta: f32(in.Beta), A: f32(d.a),
				FinalState: c.ht, Scale: float32(c.scale),
			}
			if c.h0 {
				args.H0 = f32(in.H0)
			}
			if c.aBF16 {
				args.ADtype = gdn.BF16
			}
			if c.betaIn {
				args.BetaDtype = c.dtype
			}
			if c.seqInt64 {
				args.SeqlensDtype = gdn.Int64
			}
			res, err := r.ForwardHost(args)
			if err != nil {
				t.Fatal(err)
			}
			wantO, wantHt := d.wantO, d.wantHt
			eo := ref.Compare32(res.O, wantO)
			if err := eo.Within(ref.PassO); err != nil {
				t.Errorf("o: %v", err)
			}
			msg := fmt.Sprintf("o %v", eo)
			var eh ref.Errors
			if c.ht {
				eh = ref.Compare32(res.Ht, wantHt)
				if err := eh.Within(ref.PassHt); err != nil {
					t.Errorf("ht: %v", err)
				}
				msg += fmt.Sprintf(" ht %v", eh)
			} else if res.Ht != nil {
				t.Errorf("ht returned although not asked for")
			}
			t.Logf("variant=%s case=%s %s", variant, c.name, msg)
			worst.Lock()
			if eo.Ratio > worst.o.Ratio {
				worst.o.Ratio = eo.Ratio
			}
			worst.o.MaxAbs = math.Max(worst.o.MaxAbs, eo.MaxAbs)
			worst.ht.Ratio = math.Max(worst.ht.Ratio, eh.Ratio)
			worst.ht.MaxAbs = math.Max(worst.ht.MaxAbs, eh.MaxAbs)
			worst.Unlock()
		})
	}
}

// Bad arguments come back as errors naming the argument, and nothing is
// written to the outputs.
func TestCoreBadInputWritesNothing(t *testing.T) {
	r := testRuntime(t)
	d := newDeviceCase(t, r, ref.Shape{B: 1, T: 100, Hq: 2, Hv: 8}, 9)
	defer d.free()
	bad := []struct {
		arg    string
		mutate func(a *gdn.CoreArgs)
	}{
		{"q", func(a *gdn.CoreArgs) { a.Q.Shape = []int{1, 100, 2, 64} }},
		{"v", func(a *gdn.CoreArgs) { a.V.Shape = []int{1, 100, 3, 128} }},
		{"k", func(a *gdn.CoreArgs) { a.K.Bytes -= 2 }},
		{"A", func(a *gdn.CoreArgs) { a.A.Ptr = 0 }},
		{"beta", func(a *gdn.CoreArgs) { a.Beta.Dtype = gdn.Int32 }},
		{"cu_seqlens", func(a *gdn.CoreArgs) { a.CuSeqlens = []int{0, 50, 40, 100} }},
		{"h0", func(a *gdn.CoreArgs) { a.H0.Shape = []int{2, 8, 128, 128} }},
	}
	for _, b := range bad {
		d.poisonO(t)
		a := *d.args
		a.Q.Shape = append([]int(nil), a.Q.Shape...)
		b.mutate(&a)
		err := r.Forward(&a, 0)
		var ae *gdn.ArgError
		if !errors.As(err, &ae) || ae.Arg != b.arg {
			t.Errorf("%s: got %v, want an ArgError naming %q", b.arg, err, b.arg)
		}
		tuning.Context(r).Synchronize()
		for i, v := range d.readO(t) {
			if !math.IsNaN(float64(v)) {
				t.Fatalf("%s: output element %d written (%v) by a rejected call", b.arg, i, v)
			}
		}
	}
}

// Many goroutines calling at once all get their own right answers.
func TestCoreConcurrentCallers(t *testing.T) {
	r := testRuntime(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			s := ref.Shape{B: 1, T: 70 + 13*g, Hq: 1 + g%2, Hv: 2 * (1 + g%2)}
			in, _ := ref.Recipe(s, uint64(500+g), ref.RecipeOptions{WithH0: true})
			gcum, _ := ref.ChunkCumsum(s, in.G)
			A, _ := ref.SolveA(s, in.K, in.Beta, gcum)
			res, err := r.ForwardHost(&gdn.HostCoreArgs{B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, Dtype: gdn.BF16,
				Q: f32(in.Q), K: f32(in.K), V: f32(in.V), G: f32(gcum), Beta: f32(in.Beta), A: f32(A),
				H0: f32(in.H0), FinalState: true})
			if err != nil {
				errs <- fmt.Errorf("goroutine %d: %w", g, err)
				return
			}
			wantO, wantHt, _ := ref.Recurrent(in)
			if err := ref.Compare32(res.O, wantO).Within(ref.PassO); err != nil {
				errs <- fmt.Errorf("goroutine %d o: %w", g, err)
			}
			if err := ref.Compare32(res.Ht, wantHt).Within(ref.PassHt); err != nil {
				errs <- fmt.Errorf("goroutine %d ht: %w", g, err)
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
