//go:build cuda

package gdn_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/internal/tuning"
	"github.com/gdnjit/gdn/ref"
)

// Where the full forward's preparation runs: in the core kernel (the L2
// norm alone, or everything) or in a kernel of its own; and what it costs.

// The full forward's L2 norm done by the core kernel (its converter
// warpgroup, kernsrc.CoreBF16L2Norm: with the PrepKernel knob, for bf16
// inputs on an unsplit BV 128 plan with G at most NormInCoreMaxG) gives o and ht equal
// to the bit to those of the preparation's normalised copies
// (the L2NormInPrep knob), and each runtime plans the variant it should, on
// every bf16 L2Norm case (unnormalised rows, packed sequences with empty
// and one-token ones; G = 4 and 8 take the copies either way).
func TestFullNormInCoreBitIdentical(t *testing.T) {
	knobs := tuning.Knobs{Variant: "gdn_hopper_bf16_bv128", SegmentChunks: -1, PrepKernel: true}
	inCore := splitRuntime(t, withKnobs(gdn.Options{}, knobs))
	knobs.L2NormInPrep = true
	inPrep := splitRuntime(t, withKnobs(gdn.Options{}, knobs))
	ran, inCoreRan := 0, 0
	for i, c := range fullCases() {
		if !c.l2norm || recipeDtype(c.opts) != gdn.BF16 {
			continue
		}
		ran++
		inCoreVariant := "gdn_hopper_bf16_fp16qk_bv128"
		if c.shape.Hv/c.shape.Hq <= gdn.NormInCoreMaxG {
			inCoreVariant = "gdn_hopper_bf16_l2norm_bv128"
			inCoreRan++
		}
		t.Run(c.name, func(t *testing.T) {
			seed := uint64(500 + i)
			in, fo, a := runFullRaw(t, inCore, c, seed)
			_, _, b := runFullRaw(t, inPrep, c, seed)
			o, ht := checkFull(t, in, fo, a.O, a.Ht)
			t.Logf("full in-core norm o %v ht %v", o, ht)
			for _, x := range []struct {
				name string
				a, b []float32
			}{{"o", a.O, b.O}, {"ht", a.Ht, b.Ht}} {
				if len(x.a) != len(x.b) {
					t.Fatalf("%s: %d and %d elements", x.name, len(x.a), len(x.b))
				}
				diff := 0
				for j := range x.a {
					if math.Float32bits(x.a[j]) != math.Float32bits(x.b[j]) {
						if diff == 0 {
							t.Errorf("%s[%d]: %v in the core, %v from the copies", x.name, j, x.a[j], x.b[j])
						}
						diff++
					}
				}
				if diff > 0 {
					t.Errorf("%s: %d of %d elements differ", x.name, diff, len(x.a))
				}
			}
			_, _, h := fullCaseInputs(t, c, seed)
			checkPlannedVariant(t, inCore, h, inCoreVariant)
			checkPlannedVariant(t, inPrep, h, "gdn_hopper_bf16_fp16qk_bv128")
		})
	}
	if ran != 9 || inCoreRan != 7 {
		t.Errorf("%d bf16 L2Norm cases, %d of them normalised in the core; want 9 and 7", ran, inCoreRan)
	}
}

// The full forward's whole preparation in the core kernel (the default
// wherever the core runs unsplit at BV 128, any G: kernsrc.CoreBF16Fused
// with L2Norm, kernsrc.CoreBF16FusedNoNorm without) against the float64
// reference on every bf16 case: packed sequences with empty and one-token
// ones, the in-kernel gate, strong decay with beta = 1, unnormalised rows,
// G = 2, 4 and 8, with and without L2Norm; the same cases through the
// preparation kernel (the PrepKernel knob) land as close. Each runtime
// plans the variant it should.
func TestFullFused(t *testing.T) {
	knobs := tuning.Knobs{Variant: "gdn_hopper_bf16_bv128", SegmentChunks: -1}
	fused := splitRuntime(t, withKnobs(gdn.Options{}, knobs))
	knobs.PrepKernel = true
	kernel := splitRuntime(t, withKnobs(gdn.Options{}, knobs))
	ran, given := 0, 0
	for i, c := range fullCases() {
		if recipeDtype(c.opts) != gdn.BF16 {
			continue
		}
		ran++
		if !c.l2norm {
			given++
		}
		t.Run(c.name, func(t *testing.T) {
			seed := uint64(700 + i)
			in, fo, a := runFullRaw(t, fused, c, seed)
			_, _, b := runFullRaw(t, kernel, c, seed)
			o, ht := checkFull(t, in, fo, a.O, a.Ht)
			ko, kht := checkFull(t, in, fo, b.O, b.Ht)
			t.Logf("full fused o %v ht %v (preparation kernel: o %v ht %v)", o, ht, ko, kht)
			// The two build A2 with the same block arithmetic
			// (kernsrc/gdn_solve.cuh) from K K^T by the same m64n64 wgmma
			// (since docs/PERF.md v31), but round the gates and apply them
			// in their own orders: neither may be clearly worse.
			if o.Ratio > 1.1*ko.Ratio+1e-5 || ht.Ratio > 1.1*kht.Ratio+1e-5 {
				t.Errorf("fused o ratio %.3e, ht ratio %.3e; the preparation kernel's %.3e, %.3e", o.Ratio, ht.Ratio, ko.Ratio, kht.Ratio)
			}
			_, _, h := fullCaseInputs(t, c, seed)
			fusedVariant, kernelVariant := "gdn_hopper_bf16_fused_bv128", "gdn_hopper_bf16_l2norm_bv128"
			if c.shape.Hv/c.shape.Hq > gdn.NormInCoreMaxG {
				kernelVariant = "gdn_hopper_bf16_fp16qk_bv128"
			}
			if !c.l2norm {
				fusedVariant, kernelVariant = "gdn_hopper_bf16_fused_nonorm_bv128", "gdn_hopper_bf16_bv128"
			}
			checkPlannedVariant(t, fused, h, fusedVariant)
			checkPlannedVariant(t, kernel, h, kernelVariant)
		})
	}
	if ran != 13 || given != 4 {
		t.Errorf("%d bf16 cases, %d of them without L2Norm; want 13 and 4", ran, given)
	}
}

// BenchmarkForwardFull times ForwardFull on the GPU, with and without the
// L2 norm, beside Forward on the same buffers (A as the full forward
// computes it): what the preparation costs on top of the core. It reports
// ms/call of the calls issued back to back on a stream of the Runtime's
// (GPU time, CUDA events).
func BenchmarkForwardFull(b *testing.B) {
	r, err := gdn.Open(gdn.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	for _, s := range []ref.Shape{{B: 1, T: 8192, Hq: 2, Hv: 8}, {B: 1, T: 32768, Hq: 2, Hv: 8}, {B: 8, T: 1024, Hq: 16, Hv: 32}} {
		rng := rand.New(rand.NewPCG(1, 2))
		fill := func(n int, scale float64) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * scale)
			}
			return x
		}
		tok := s.Tokens()
		g := fill(tok*s.Hv, 0.02)
		for i := range g {
			g[i] = -float32(math.Abs(float64(g[i])))
		}
		beta := make([]float32, tok*s.Hv)
		for i := range beta {
			beta[i] = 0.5
		}
		up, err := r.UploadCore(&gdn.HostCoreArgs{B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, Dtype: gdn.BF16,
			Q: fill(tok*s.Hq*128, 1/math.Sqrt(128)), K: fill(tok*s.Hq*128, 1/math.Sqrt(128)), V: fill(tok*s.Hv*128, 1),
			G: g, Beta: beta, A: make([]float32, tok*s.Hv*64), FinalState: true})
		if err != nil {
			b.Fatal(err)
		}
		ca := up.Args
		fa := &gdn.FullArgs{Q: ca.Q, K: ca.K, V: ca.V, G: ca.G, Beta: ca.Beta, O: ca.O, Ht: ca.Ht, L2Norm: true}
		noNorm := *fa
		noNorm.L2Norm = false
		stream, err := r.NewStream()
		if err != nil {
			b.Fatal(err)
		}
		shape := fmt.Sprintf("B%d_T%d_Hq%d_Hv%d", s.B, s.T, s.Hq, s.Hv)
		for _, c := range []struct {
			name string
			call func() error
		}{
			{"full", func() error { return r.ForwardFull(fa, stream) }},
			{"full_no_l2norm", func() error { return r.ForwardFull(&noNorm, stream) }},
			{"core", func() error { return r.Forward(ca, stream) }},
		} {
			b.Run(shape+"/"+c.name, func(b *testing.B) {
				for range 3 {
					if err := c.call(); err != nil {
						b.Fatal(err)
					}
				}
				var gpuMs float64
				for b.Loop() {
					ms, err := r.TimeMs(stream, c.call)
					if err != nil {
						b.Fatal(err)
					}
					gpuMs += ms
				}
				b.ReportMetric(gpuMs/float64(b.N), "ms/call")
			})
		}
		r.DestroyStream(stream)
		up.Free()
	}
}
