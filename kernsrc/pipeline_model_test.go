package kernsrc

import (
	"fmt"
	"math/rand/v2"
)

// A model of the Hopper kernel's stage ring (ring.cuh), run under random
// schedules: the mbarriers with their parity waits, the TMA loads that
// land after a delay, the aux groups (run_aux, hopper_aux.cuh: each takes
// every kAux-th chunk) and the consumer groups (run_consumer,
// hopper_consumer.cuh: every chunk; the first refills a stage once all are
// done with it, during the chunk after it; under the fused preparation
// (kFused) at the top of that chunk, and its first warp then writes the
// gate vectors of the chunk refilled into the stage, an arrival on full).
// The consumers run warp by warp, round by round, with their named
// barriers, o's staging tile and its stores, and (the lab's pingpong) the
// two groups' turns at the tensor pipe: pipeline_consumer_model_test.go.
// It mirrors the kernel's order of waits and arrivals; a change to that
// protocol in the kernel belongs here too. The tests that run it are in
// pipeline_protocol_test.go and pipeline_consumer_test.go.
//
// The model checks what the parity waits are meant to guarantee: an aux
// group prepares only its own chunk's landed tiles, the consumers take only
// their chunk's prepared stage (and, with a converter warpgroup, its
// converted K and Q, rewritten only after the aux group's Q K^T read them,
// or under the in-core norm (kNorm) normalised before Q K^T reads them, or
// in the fused preparation without it converted after both Q K^T and
// K K^T read them), a load overwrites a stage only after every consumer is
// done with it, nothing waits forever, and (with the transfer matrix's
// early exit: the consumers stop after a chunk, the aux groups at the
// stop) no load is left in flight when every role has ended.

// mbarrier is one barrier: a phase completes when count arrivals (and,
// for a TMA barrier, the bytes of the load in flight) are in.
type mbarrier struct {
	count, arrivals, completed int
	txPending                  bool
}

// arrive counts an arrival; false for one beyond the phase's count (the
// phase waiting for its bytes): undefined on the hardware.
func (b *mbarrier) arrive() bool {
	if b.arrivals >= b.count {
		return false
	}
	b.arrivals++
	if b.arrivals == b.count && !b.txPending {
		b.completed++
		b.arrivals = 0
	}
	return true
}

// passes is mbarrier.try_wait.parity: true once the barrier's current
// (incomplete) phase has the other parity, i.e. the most recent phase of
// this parity has completed. A waiter two phases behind passes too: the
// aliasing the kernel's waits must rule out.
func (b *mbarrier) passes(parity int) bool { return b.completed&1 != parity }

// ringModel is one CTA's stages and barriers, with what each stage holds.
type ringModel struct {
	stages              int
	full, ready, empty  []mbarrier
	qkRead              []mbarrier // the aux group has read K and Q as loaded (converterAfterRead)
	normed              []mbarrier // the converter has normalised K and Q (normaliserFirst, normaliserThenP)
	data, loading, prep []int      // chunk landed (-1: none or being overwritten), in flight, prepared
	read, conv          []int      // chunk whose K and Q the aux group has read, the converter converted
	pBuilt              []int      // chunk whose P the converter has built (normaliserThenP)
	gates               []int      // chunk whose gate vectors the stage holds (normaliserThenP)
	done                []int      // per chunk: consumer warps done with it
	releases            int        // consumer warps (each arrives on empty)
	fused               bool       // the fused preparation (kFused): gate vectors in the stages
	votes               []bool     // the transfer pass: the chunks after which the consumers vote
	inFlight            []int      // stages with a load in flight, in issue order
	stop                int        // the early exit's stop chunk (run_aux), nch without one
	consumerState
	violation string
}

// op is one step of a role: wait (until ok), or do; then, if exit says
// so, the role ends.
type op struct {
	wait func() bool
	do   func(m *ringModel)
	exit func() bool
}

// arriveOn arrives on b, a violation if the arrival is beyond its phase's count.
func (m *ringModel) arriveOn(b *mbarrier, name string, s int) {
	if !b.arrive() {
		m.fail("an arrival on %s[%d] beyond its phase's count (the phase still waits for its bytes)", name, s)
	}
}

func (m *ringModel) fail(format string, a ...any) {
	if m.violation == "" {
		m.violation = fmt.Sprintf(format, a...)
	}
}

// issue is issue_loads: chunk c into its stage (arrive.expect_tx on full).
func (m *ringModel) issue(c int) {
	s := c % m.stages
	if c >= m.stages && m.done[c-m.stages] != m.releases {
		m.fail("chunk %d's load overwrites stage %d while consumers still read chunk %d", c, s, c-m.stages)
	}
	m.data[s], m.loading[s] = -1, c
	m.full[s].txPending = true
	m.arriveOn(&m.full[s], "full", s)
	m.inFlight = append(m.inFlight, s)
}

// land completes the load in flight on stage s.
func (m *ringModel) land(s int) {
	m.data[s], m.loading[s] = m.loading[s], -1
	m.full[s].txPending = false
	if m.full[s].arrivals == m.full[s].count {
		m.full[s].completed++
		m.full[s].arrivals = 0
	}
}

// stopAhead is how far past the last consumed chunk the early exit's stop
// lies: the kernel's c + 3 (copies are in flight up to c + 2). A variable
// only so that a test can check that the model catches a stop too close.
var stopAhead = 3

// converterWaitsOnFull makes the model's converter wait for a chunk's
// tiles to land rather than for the aux group's read of them: a variable
// only so that a test can check that the model catches that mistake.
var converterWaitsOnFull = false

// auxSkipsNormed makes the model's aux group start Q K^T without waiting
// for the normaliser (normaliserFirst): for the test that it is caught.
var auxSkipsNormed = false

// fusedReadyCountOne initialises ready for the aux group alone under
// normaliserThenP, whose converter arrives on it too: for the test that it
// is caught.
var fusedReadyCountOne = false

// gatesAhead is how many chunks ahead the gate warp (normaliserThenP)
// writes the gate vectors: the kernel's 2 (the chunk its group refills).
// A variable only so that a test can check that the model catches 3 (a
// stage still in use). (The model runs the gate warp as one thread with
// the refill's; in the kernel its other lanes wait on empty themselves.)
var gatesAhead = 2

// convMode is the converter warpgroup a run has, if any.
type convMode int

const (
	noConverter convMode = iota
	// converterAfterRead: run_converter, K and Q converted once the aux
	// group's Q K^T has read them (qk_read), ready from both.
	converterAfterRead
	// normaliserFirst: run_normaliser (kNorm), K and Q normalised as
	// soon as they land, the aux group's Q K^T after it (normed), ready
	// from the aux group alone.
	normaliserFirst
	// normaliserThenP: run_normaliser under the fused preparation (kFused), K and Q normalised
	// as soon as they land (normed: the aux group's go for A2), then P built
	// from the stage and ready from both.
	normaliserThenP
	// pThenConvert: run_fused_converter (kFused without kNorm):
	// P from K and Q as loaded, then, once the aux group's K K^T has read
	// them too (qk_read), K and Q converted in place; ready from both.
	pThenConvert
)

// convSkipsQKRead breaks pThenConvert: the converter converts K and Q
// without waiting for the aux group's K K^T (qk_read).
var convSkipsQKRead bool

// ringCase is one form of the kernel and one CTA's walk.
type ringCase struct {
	nch, aux, consumers int
	// fixed: the aux groups' wait on ready for chunk c - stages before
	// their wait on full (run_aux).
	fixed bool
	// exitAt >= 0: the consumers stop after that chunk (the transfer
	// matrix's early exit, run_consumer's stop_after), exitAt + 1 < nch.
	exitAt int
	conv   convMode // the converter warpgroup, if any (one aux group, no early exit)
	// transfer: the transfer pass (no o; the consumer groups vote on the
	// early exit after the chunks votes marks, and exitAt among them).
	transfer bool
	votes    []bool
	turns    bool // the consumer groups take turns at the tensor pipe (the lab's pingpong)
	partial  bool // the last chunk is short: its o stored row by row, never deferred
}

// runRing runs the protocol for nch chunks under one random schedule and
// returns the first violation ("" for none): runCase's ringCase, a
// transfer pass where the consumers stop early (exitAt >= 0), else the
// core forward.
func runRing(r *rand.Rand, nch, aux, consumers int, fixed bool, exitAt int, conv convMode) string {
	return runCase(r, ringCase{nch: nch, aux: aux, consumers: consumers, fixed: fixed, exitAt: exitAt, conv: conv, transfer: exitAt >= 0})
}

// runCase runs k's protocol under one random schedule and returns the first
// violation ("" for none).
func runCase(r *rand.Rand, k ringCase) string {
	if k.transfer && k.votes == nil {
		// The consumers vote (every fourth chunk in the kernel, once the
		// gates say the state may be near zero) at random chunks here, and
		// where they exit.
		k.votes = make([]bool, k.nch)
		for c := range k.nch - 1 {
			k.votes[c] = c == k.exitAt || r.IntN(3) == 0
		}
	}
	// A form's programs are built once (they read the run's state, the
	// votes included, only through m, reset for each run): the consumers'
	// warps make building them most of a run's cost.
	form := k
	form.votes = nil
	key := fmt.Sprintf("%+v %v", form, knobs())
	b, ok := builtCases[key]
	if !ok {
		b.m = &ringModel{}
		b.m.reset(k)
		b.roles = b.m.roles(k)
		builtCases[key] = b
	}
	b.m.reset(k)
	return b.m.schedule(r, b.roles)
}

// builtCases are the programs runCase built, by form and knobs.
var builtCases = map[string]struct {
	m     *ringModel
	roles [][]op
}{}

// knobs are the mistake switches and constants the programs are built
// with (a test sets one for the schedules that must show its violation).
func knobs() []any {
	return []any{stopAhead, converterWaitsOnFull, auxSkipsNormed, fusedReadyCountOne, gatesAhead, convSkipsQKRead,
		turnBar, turnThreads, turnNoStart, turnNoEnd, passAfterVote, noStoreWaitRead}
}

// reset puts m in k's state before its first step.
func (m *ringModel) reset(k ringCase) {
	fused := k.conv == normaliserThenP || k.conv == pThenConvert
	const stages = 3
	*m = ringModel{stages: stages, releases: k.consumers * warpsPerGroup, fused: fused, stop: k.nch, votes: k.votes,
		full: make([]mbarrier, stages), ready: make([]mbarrier, stages), empty: make([]mbarrier, stages),
		qkRead: make([]mbarrier, stages), normed: make([]mbarrier, stages), data: make([]int, stages), loading: make([]int, stages),
		prep: make([]int, stages), read: make([]int, stages), conv: make([]int, stages), pBuilt: make([]int, stages),
		gates: make([]int, stages), done: make([]int, k.nch), consumerState: newConsumerState()}
	readyCount := 1
	if k.conv == converterAfterRead || fused && !fusedReadyCountOne {
		readyCount = 2 // the aux group and the converter
	}
	fullCount := 1
	if fused {
		fullCount = 2 // the TMA issuer and the gate warp (its 32 lanes as one)
	}
	for s := range stages {
		m.full[s].count, m.ready[s].count, m.empty[s].count, m.qkRead[s].count, m.normed[s].count = fullCount, readyCount, m.releases, 1, 1
		m.data[s], m.loading[s], m.prep[s], m.read[s], m.conv[s], m.pBuilt[s], m.gates[s] = -1, -1, -1, -1, -1, -1, -1
	}
}

// roles are the programs of k's roles: the aux groups, the converter, the
// consumers' warps.
func (m *ringModel) roles(k ringCase) [][]op {
	nch, aux, consumers, fixed, conv := k.nch, k.aux, k.consumers, k.fixed, k.conv
	converter, norm := conv == converterAfterRead, conv == normaliserFirst || conv == normaliserThenP
	fused := conv == normaliserThenP || conv == pThenConvert
	stages := m.stages
	usesGates := m.usesGates
	var roles [][]op
	for a := range aux {
		var prog []op
		if a == 0 {
			for c := range min(stages, nch) {
				prog = append(prog, op{do: func(m *ringModel) { m.issue(c) }})
			}
		}
		for c := a; c < nch; c += aux {
			s, use := c%stages, c/stages
			if fixed && aux > 1 && c >= stages {
				prog = append(prog, op{wait: func() bool { return m.ready[s].passes((use - 1) & 1) }})
			}
			prog = append(prog,
				op{wait: func() bool { return m.full[s].passes(use & 1) }, exit: func() bool { return c >= m.stop }})
			if norm && !auxSkipsNormed {
				prog = append(prog, op{wait: func() bool { return m.normed[s].passes(use & 1) }})
			}
			prog = append(prog,
				op{do: func(m *ringModel) {
					if m.data[s] != c {
						m.fail("aux %d prepares chunk %d from stage %d holding chunk %d (-1: not landed)", a, c, s, m.data[s])
					}
					if norm && m.conv[s] != c { // Q K^T of the normalised rows
						m.fail("aux %d reads chunk %d's K and Q in stage %d normalised for chunk %d", a, c, s, m.conv[s])
					}
					if conv == pThenConvert && m.conv[s] == c { // K K^T of K as loaded
						m.fail("aux %d reads chunk %d's K in stage %d already converted", a, c, s)
					}
					usesGates("the aux group", c, s)
					if converter || conv == pThenConvert { // the product done: the converter may rewrite K and Q
						m.read[s] = c
						m.arriveOn(&m.qkRead[s], "qk_read", s)
					}
				}},
				op{do: func(m *ringModel) {
					if m.data[s] != c {
						m.fail("aux %d finishes chunk %d in stage %d holding chunk %d", a, c, s, m.data[s])
					}
					m.prep[s] = c
					m.arriveOn(&m.ready[s], "ready", s)
				}})
		}
		roles = append(roles, prog)
	}
	if conv == pThenConvert {
		// run_fused_converter: P from the tiles as they land, then the
		// conversion once the aux group has read K (qk_read), then ready.
		var prog []op
		for c := range nch {
			s, use := c%stages, c/stages
			prog = append(prog, op{wait: func() bool { return m.full[s].passes(use & 1) }}, op{do: func(m *ringModel) {
				if m.data[s] != c || m.conv[s] == c {
					m.fail("the converter builds chunk %d's P in stage %d holding chunk %d (converted for %d)", c, s, m.data[s], m.conv[s])
				}
				usesGates("the converter's P", c, s)
				m.pBuilt[s] = c
			}})
			if !convSkipsQKRead {
				prog = append(prog, op{wait: func() bool { return m.qkRead[s].passes(use & 1) }})
			}
			prog = append(prog, op{do: func(m *ringModel) {
				if m.data[s] != c {
					m.fail("the converter rewrites chunk %d's K and Q in stage %d holding chunk %d", c, s, m.data[s])
				}
				m.conv[s] = c
				m.arriveOn(&m.ready[s], "ready", s)
			}})
		}
		roles = append(roles, prog)
	} else if conv != noConverter {
		// run_converter: after the aux group's Q K^T has read K and Q, then
		// its half of ready; run_normaliser: as soon as they land, then the
		// aux group's go (normed).
		var prog []op
		for c := range nch {
			s, use := c%stages, c/stages
			wait := func() bool { return m.qkRead[s].passes(use & 1) }
			if norm || converterWaitsOnFull {
				wait = func() bool { return m.full[s].passes(use & 1) }
			}
			prog = append(prog, op{wait: wait}, op{do: func(m *ringModel) {
				if m.data[s] != c || (converter && m.read[s] != c) {
					m.fail("the converter rewrites chunk %d's K and Q in stage %d holding chunk %d, read by the aux group for %d", c, s, m.data[s], m.read[s])
				}
				m.conv[s] = c
				if norm {
					m.arriveOn(&m.normed[s], "normed", s)
				} else {
					m.arriveOn(&m.ready[s], "ready", s)
				}
			}})
			if fused { // P from the stage's Q and K, then this group's half of ready
				prog = append(prog, op{do: func(m *ringModel) {
					if m.data[s] != c {
						m.fail("the converter builds chunk %d's P in stage %d holding chunk %d", c, s, m.data[s])
					}
					usesGates("the converter's P", c, s)
					m.pBuilt[s] = c
					m.arriveOn(&m.ready[s], "ready", s)
				}})
			}
		}
		roles = append(roles, prog)
	}
	for g := range consumers {
		for w := range warpsPerGroup {
			roles = append(roles, m.consumerWarp(k, g, w))
		}
	}
	return roles
}

// schedule runs the roles under one random schedule, the loads and stores
// in flight landing or read at random times, and returns the first
// violation ("" for none).
func (m *ringModel) schedule(r *rand.Rand, roles [][]op) string {
	pc := make([]int, len(roles))
	ended := 0 // roles at their programs' end
	for _, prog := range roles {
		if len(prog) == 0 {
			ended++
		}
	}
	runnable := func(i int) bool {
		prog := roles[i]
		return pc[i] < len(prog) && (prog[pc[i]].wait == nil || prog[pc[i]].wait())
	}
	can := make([]int, 0, len(roles))
	for m.violation == "" {
		if ended == len(roles) && len(m.inFlight) > 0 {
			return fmt.Sprintf("every role has ended with %d loads in flight", len(m.inFlight))
		}
		if ended == len(roles) && len(m.stores) > 0 {
			return fmt.Sprintf("every role has ended with %d stores of o still reading a staging tile", len(m.stores))
		}
		// The choices: every role whose next op can go, every load in
		// flight (which lands whenever the schedule picks it) and every
		// store of o still reading its staging tile (which finishes
		// reading then), each as likely. A few draws over all roles first,
		// kept if runnable (most are, most of the time), then the list.
		n, k := len(roles)+len(m.inFlight)+len(m.stores), -1
		for range 4 {
			if j := r.IntN(n); j >= len(roles) || runnable(j) {
				k = j
				break
			}
		}
		if k < 0 {
			can = can[:0]
			for i := range roles {
				if runnable(i) {
					can = append(can, i)
				}
			}
			choices := len(can) + n - len(roles)
			if choices == 0 {
				if ended < len(roles) {
					stuck := ""
					for i, prog := range roles {
						if pc[i] < len(prog) {
							stuck += fmt.Sprintf(" %d (step %d of %d)", i, pc[i], len(prog))
						}
					}
					return "deadlock: roles stuck:" + stuck
				}
				return m.barriersLeft()
			}
			if k = r.IntN(choices); k < len(can) {
				k = can[k]
			} else {
				k += len(roles) - len(can)
			}
		}
		switch {
		case k >= len(roles)+len(m.inFlight):
			j := k - len(roles) - len(m.inFlight)
			m.stores = append(m.stores[:j], m.stores[j+1:]...)
		case k >= len(roles):
			j := k - len(roles)
			s := m.inFlight[j]
			m.inFlight = append(m.inFlight[:j], m.inFlight[j+1:]...)
			m.land(s)
		default:
			o := roles[k][pc[k]]
			pc[k]++
			if o.do != nil {
				o.do(m)
			}
			if o.exit != nil && o.exit() {
				pc[k] = len(roles[k])
			}
			if pc[k] == len(roles[k]) {
				ended++
			}
		}
	}
	return m.violation
}
