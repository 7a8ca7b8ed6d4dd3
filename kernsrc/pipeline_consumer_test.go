package kernsrc

import (
	"math/rand/v2"
	"testing"
)

// The consumer groups' protocol beyond the ring (pipeline_consumer_model_test.go):
// o's staging tile and its stores, and the lab's pingpong turns.

// turnForms are the kernel forms the turns run in (every BV 128 variant,
// kernsrc/lab's pingpong): the core forward with each converter (bf16 q
// and k; the norm; none, fp16), the fused forward with and without the
// norm (o's store deferred), and the transfer pass (no o; the early
// exit's votes and exit).
var turnForms = []struct {
	name     string
	conv     convMode
	transfer bool
}{
	{"core", converterAfterRead, false},
	{"core, the norm", normaliserFirst, false},
	{"core, fp16", noConverter, false},
	{"fused", normaliserThenP, false},
	{"fused, no norm", pThenConvert, false},
	{"transfer", noConverter, true},
}

// turnCase is a random walk of form f: every chunk count from 0 to 12 in
// turn (n), odd and even, one chunk included; a short last chunk half the
// time (the forward: its o stored row by row, never deferred); in the
// transfer pass an early exit half the time.
func turnCase(r *rand.Rand, f int, n int, turns bool) ringCase {
	k := ringCase{nch: n % 13, aux: 1, consumers: 2, fixed: true, exitAt: -1, conv: turnForms[f].conv,
		transfer: turnForms[f].transfer, turns: turns}
	if k.transfer {
		if k.nch > 1 && r.IntN(2) == 0 {
			k.exitAt = r.IntN(k.nch - 1)
		}
	} else {
		k.partial = r.IntN(2) == 0
	}
	return k
}

// The two consumer groups taking turns at the tensor pipe (the lab's
// PingPongTurns: each group syncs on its own named barrier before a round
// and arrives on the other's after committing it; group 1 arrives first,
// group 0 takes the last arrival) under random schedules, in every form
// they run in: no deadlock, the groups' rounds alternating on the pipe
// (group 0 first, never both at once), every named barrier's phases
// complete and unmixed at the end, beside the ring, the gate warp and o's
// stores. Then each mistake the model is there to catch.
func TestConsumerTurns(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	const trials = 6000
	for f, form := range turnForms {
		for n := range trials {
			k := turnCase(r, f, n, true)
			if v := runCase(r, k); v != "" {
				t.Fatalf("%s, %d chunks (short last %v, exit after %d), schedule %d: %s", form.name, k.nch, k.partial, k.exitAt, n, v)
			}
		}
	}
	// A form (chunks 1 to 12), given the mistake, must show a violation.
	broken := func(f int) func() string {
		return func() string { return runCase(r, turnCase(r, f, 1+r.IntN(12), true)) }
	}
	for _, c := range []struct {
		what string
		set  func() func()
		form int
	}{
		{"group 1 not arriving before its first round", flag(&turnNoStart), 0},
		{"group 0 not taking group 1's last arrival", flag(&turnNoEnd), 3},
		{"a turn counting one group's threads", value(&turnThreads, 128), 3},
		{"turns on the early exit's barrier", value(&turnBar, barConsumers), 5},
		{"turns on the groups' own barriers", value(&turnBar, 1), 3},
		{"the last round's arrival after the early exit's vote", flag(&passAfterVote), 5},
	} {
		restore := c.set()
		mustFind(t, trials, c.what, broken(c.form))
		restore()
	}
}

// o's staging tile and its TMA stores, with and without the turns, in the
// forward forms (the fused ones defer a whole chunk's store to the next
// chunk, behind its first products, and the last chunk's to after the
// loop): no tile written while a store still reads it, no store of a tile
// not wholly written, none left reading at the end; a stage_o that does not
// wait for the store before to have read the tile must be caught in the
// fused forms, where that store is issued in the same chunk (a chunk
// earlier in the others, which a random schedule almost never lets lag
// that far).
func TestConsumerStores(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	const trials = 6000
	for f, form := range turnForms[:5] {
		for n := range trials {
			k := turnCase(r, f, n, n%2 == 0)
			if v := runCase(r, k); v != "" {
				t.Fatalf("%s, turns %v, %d chunks (short last %v), schedule %d: %s", form.name, k.turns, k.nch, k.partial, n, v)
			}
		}
	}
	restore := flag(&noStoreWaitRead)()
	defer restore()
	for _, f := range []int{3, 4} {
		mustFind(t, trials, "o staged over a store still reading it, "+turnForms[f].name, func() string {
			return runCase(r, turnCase(r, f, 2+r.IntN(11), r.IntN(2) == 0))
		})
	}
}

// flag returns a setter of *b to true that returns its undoing.
func flag(b *bool) func() func() {
	return func() func() {
		*b = true
		return func() { *b = false }
	}
}

// value returns a setter of *p to v that returns its undoing.
func value(p *int, v int) func() func() {
	return func() func() {
		old := *p
		*p = v
		return func() { *p = old }
	}
}
