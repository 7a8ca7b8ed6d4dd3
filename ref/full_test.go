package ref

import (
	"math"
	"testing"
)

func TestL2Normalize(t *testing.T) {
	x := make([]float64, 3*D)
	for j := range D {
		x[j] = float64(j%7) - 3        // an ordinary vector
		x[2*D+j] = 1e-5 * float64(j%3) // tiny: eps dominates, so its norm stays below 1
	}
	y, err := L2Normalize(x)
	if err != nil {
		t.Fatal(err)
	}
	norm := func(r int) float64 { return math.Sqrt(dot(y[r*D:][:D], y[r*D:][:D])) }
	if n := norm(0); math.Abs(n-1) > 1e-6 {
		t.Errorf("norm of a normalised vector %v", n)
	}
	if n := norm(1); n != 0 {
		t.Errorf("zero vector became norm %v", n)
	}
	want := math.Sqrt(dot(x[2*D:][:D], x[2*D:][:D])) / math.Sqrt(dot(x[2*D:][:D], x[2*D:][:D])+L2NormEps)
	if n := norm(2); math.Abs(n-want) > 1e-12 || n > 0.5 {
		t.Errorf("tiny vector: norm %v, want %v", n, want)
	}
	if x[0] != -3 {
		t.Error("input modified")
	}
	if _, err := L2Normalize(make([]float64, D+1)); err == nil {
		t.Error("129 values accepted")
	}
}

func TestGateFromRaw(t *testing.T) {
	// Softplus is continuous at its threshold and matches log(1+e^x).
	if d := math.Abs(Softplus(20) - Softplus(math.Nextafter(20, 21))); d > 1e-8 {
		t.Errorf("softplus jumps by %v at 20", d)
	}
	for _, x := range []float64{-30, -1, 0, 1, 5} {
		if d := math.Abs(Softplus(x) - math.Log(1+math.Exp(x))); d > 1e-12 {
			t.Errorf("softplus(%v) off by %v", x, d)
		}
	}
	a := []float64{0, 1, -2, 30}
	g, err := GateFromRaw(a, []float64{0, math.Log(2)}, []float64{0.5, -1})
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{-Softplus(0.5), -2 * Softplus(0), -Softplus(-1.5), -2 * 29}
	for i := range g {
		if math.Abs(g[i]-want[i]) > 1e-12 || g[i] > 0 {
			t.Errorf("g[%d] = %v, want %v", i, g[i], want[i])
		}
	}
	if _, err := GateFromRaw(a, []float64{0}, []float64{0, 1}); err == nil {
		t.Error("A_log and dt_bias of different lengths accepted")
	}
	if _, err := GateFromRaw(a[:3], []float64{0, 0}, []float64{0, 0}); err == nil {
		t.Error("3 inputs for 2 heads accepted")
	}
}

// Full with both in-kernel steps equals Recurrent on inputs prepared by
// hand, and differs from Recurrent on the raw ones (so the steps ran).
func TestFullMatchesPreparedRecurrent(t *testing.T) {
	s := Shape{B: 1, T: 150, Hq: 2, Hv: 4, CuSeqlens: []int{0, 1, 150}}
	raw, err := Recipe(s, 3, RecipeOptions{WithH0: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw.Q { // un-normalise q and k
		raw.Q[i] *= 1 + float64(i%5)
		raw.K[i] *= 2 - float64(i%3)/4
	}
	aLog := []float64{-1, 0, 0.5, -3}
	dt := []float64{0.1, -0.2, 0, 1}
	o, ht, err := Full(raw, FullOptions{L2Norm: true, ALog: aLog, DtBias: dt})
	if err != nil {
		t.Fatal(err)
	}
	prep := raw
	prep.Q, _ = L2Normalize(raw.Q)
	prep.K, _ = L2Normalize(raw.K)
	prep.G, _ = GateFromRaw(raw.G, aLog, dt)
	wo, wht, err := Recurrent(prep)
	if err != nil {
		t.Fatal(err)
	}
	if d := math.Max(maxRelDiff(o, wo), maxRelDiff(ht, wht)); d != 0 {
		t.Errorf("Full differs from the prepared recurrence by %v", d)
	}
	ro, _, err := Recurrent(raw)
	if err != nil {
		t.Fatal(err)
	}
	if maxRelDiff(o, ro) < 1e-3 {
		t.Error("the in-kernel steps changed nothing")
	}
	if _, _, err := Full(raw, FullOptions{ALog: aLog[:2], DtBias: dt[:2]}); err == nil {
		t.Error("A_log of 2 heads for Hv = 4 accepted")
	}
}
