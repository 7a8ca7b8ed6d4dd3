package kernsrc

import (
	"math/rand/v2"
	"testing"
)

// The ring protocol's tests: the model (pipeline_model_test.go) under
// random schedules, for each form of the kernel, and each with the mistake
// it is there to catch.

// The kernel's protocol holds under every schedule tried, with one aux group
// or two; with two, the protocol before the fix of docs/PERF.md v16 (no
// wait on ready before the wait on full) lets an aux group prepare a stage
// before its chunk has landed, which the model must find.
func TestStageRingProtocol(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const trials = 20000
	for _, c := range []struct {
		aux, consumers int
		fixed          bool
	}{{1, 2, true}, {2, 1, true}, {1, 2, false}, {1, 1, true}, {2, 2, true}} {
		for n := range trials {
			nch := 1 + r.IntN(12)
			if v := runRing(r, nch, c.aux, c.consumers, c.fixed, -1, noConverter); v != "" {
				t.Fatalf("%d aux, %d consumers, fixed %v, %d chunks, schedule %d: %s", c.aux, c.consumers, c.fixed, nch, n, v)
			}
		}
	}
	mustFind(t, trials, "the unfixed protocol with two aux groups", func() string {
		return runRing(r, 4+r.IntN(9), 2, 1, false, -1, noConverter)
	})
}

// mustFind runs a broken protocol under up to trials random schedules
// (run: one schedule, its violation or "") and fails the test unless one
// of them shows the violation the model is there to catch.
func mustFind(t *testing.T, trials int, what string, run func() string) {
	t.Helper()
	for range trials {
		if v := run(); v != "" {
			t.Logf("%s: %s", what, v)
			return
		}
	}
	t.Fatalf("%d schedules of %s found no violation", trials, what)
}

// The transfer matrix's early exit (run_consumer's stop_after, run_aux's
// check after its wait on full) ends every role with no load left in
// flight and no stage prepared from tiles that never landed, under random
// schedules, for every exit chunk; a stop one chunk closer (c + 2, where a
// copy is still in flight) must be caught.
func TestStageRingEarlyExit(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const trials = 20000
	for _, c := range []struct{ aux, consumers int }{{1, 2}, {2, 1}, {1, 1}, {2, 2}} {
		for n := range trials {
			nch := 2 + r.IntN(12)
			exitAt := r.IntN(nch - 1)
			if v := runRing(r, nch, c.aux, c.consumers, true, exitAt, noConverter); v != "" {
				t.Fatalf("%d aux, %d consumers, %d chunks, exit after %d, schedule %d: %s", c.aux, c.consumers, nch, exitAt, n, v)
			}
		}
	}
	stopAhead = 2
	defer func() { stopAhead = 3 }()
	mustFind(t, trials, "a stop at c + 2", func() string {
		nch := 4 + r.IntN(9)
		return runRing(r, nch, 1+r.IntN(2), 1+r.IntN(2), true, r.IntN(nch-3), noConverter)
	})
}

// The converter warpgroup of the BV 128 core forward (run_converter: one
// aux group, two consumer groups): under random schedules it rewrites a
// chunk's K and Q only after the aux group's Q K^T has read them, and the
// consumers take a chunk only once both have marked it ready; a converter
// that waited for the tiles to land instead must be caught.
func TestStageRingConverter(t *testing.T) {
	ringWithConverter(t, rand.New(rand.NewPCG(5, 6)), converterAfterRead, &converterWaitsOnFull, "a converter waiting on full")
}

// The converter under kNorm (run_normaliser: one aux group, two
// consumer groups): it normalises a chunk's K and Q once they land, the aux
// group's Q K^T reads them only after that (normed), and the consumers
// take a chunk only once the aux group marks it ready; an aux group that
// skipped its wait on normed must be caught.
func TestStageRingNormaliser(t *testing.T) {
	ringWithConverter(t, rand.New(rand.NewPCG(7, 8)), normaliserFirst, &auxSkipsNormed, "an aux group not waiting for the normaliser")
}

// The converter under the fused preparation (kFused) (run_normaliser, then P): the aux group
// builds A2 once the normaliser is done (normed), the converter builds P
// after it, and the consumers take a chunk only once both have marked it
// ready; ready initialised for the aux group alone (its count of v25) must
// be caught.
func TestStageRingFused(t *testing.T) {
	ringWithConverter(t, rand.New(rand.NewPCG(9, 10)), normaliserThenP, &fusedReadyCountOne, "ready counting the aux group alone")
}

// The fused kernel's gate warp (run_consumer's write_gates): each chunk's
// gate vectors reach the producers and consumers through full, with the
// tiles, and overwrite a stage's only once its chunk before is released;
// a gate warp three chunks ahead must be caught.
func TestStageRingFusedGates(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const trials = 20000
	for n := range trials {
		nch := 1 + r.IntN(12)
		if v := runRing(r, nch, 1, 2, true, -1, normaliserThenP); v != "" {
			t.Fatalf("%d chunks, schedule %d: %s", nch, n, v)
		}
	}
	gatesAhead = 3
	defer func() { gatesAhead = 2 }()
	mustFind(t, trials, "a gate warp three chunks ahead", func() string {
		return runRing(r, 4+r.IntN(9), 1, 2, true, -1, normaliserThenP)
	})
}

// The converter of the fused preparation without the norm
// (run_fused_converter): P from the tiles as loaded, K and Q converted
// only once the aux group's K K^T has read K (qk_read), the gate warp's
// vectors with the tiles, the consumers taking a chunk once both producers
// marked it ready; a converter that skipped its wait on qk_read must be
// caught.
func TestStageRingFusedNoNorm(t *testing.T) {
	ringWithConverter(t, rand.New(rand.NewPCG(13, 14)), pThenConvert, &convSkipsQKRead, "a converter not waiting for the aux group's K K^T")
}

// ringWithConverter runs conv's protocol (one aux group, two consumer
// groups) under random schedules, then with *broken set, which some
// schedule must show as a violation (what names it).
func ringWithConverter(t *testing.T, r *rand.Rand, conv convMode, broken *bool, what string) {
	t.Helper()
	const trials = 20000
	for n := range trials {
		nch := 1 + r.IntN(12)
		if v := runRing(r, nch, 1, 2, true, -1, conv); v != "" {
			t.Fatalf("%d chunks, schedule %d: %s", nch, n, v)
		}
	}
	*broken = true
	defer func() { *broken = false }()
	mustFind(t, trials, what, func() string {
		return runRing(r, 2+r.IntN(11), 1, 2, true, -1, conv)
	})
}
