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
// It mirrors the kernel's order of waits and arrivals; a change to that
// protocol in the kernel belongs here too. The tests that run it are in
// pipeline_protocol_test.go.
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
	done                []int      // per chunk: consumer groups done with it
	consumers           int
	inFlight            []int // stages with a load in flight, in issue order
	stop                int   // the early exit's stop chunk (run_aux), nch without one
	violation           string
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
	if c >= m.stages && m.done[c-m.stages] != m.consumers {
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

// runRing runs the protocol for nch chunks under one random schedule and
// returns the first violation ("" for none). fixed: the aux groups' wait on
// ready for chunk c - stages before their wait on full (run_aux). exitAt >=
// 0: the consumers stop after that chunk (the transfer matrix's early exit,
// run_consumer's stop_after), exitAt + 1 < nch. conv: the converter
// warpgroup, if any (one aux group, no early exit).
func runRing(r *rand.Rand, nch, aux, consumers int, fixed bool, exitAt int, conv convMode) string {
	converter, norm := conv == converterAfterRead, conv == normaliserFirst || conv == normaliserThenP
	fused := conv == normaliserThenP || conv == pThenConvert
	const stages = 3
	m := &ringModel{stages: stages, consumers: consumers, stop: nch,
		full: make([]mbarrier, stages), ready: make([]mbarrier, stages), empty: make([]mbarrier, stages),
		qkRead: make([]mbarrier, stages), normed: make([]mbarrier, stages), data: make([]int, stages), loading: make([]int, stages),
		prep: make([]int, stages), read: make([]int, stages), conv: make([]int, stages), pBuilt: make([]int, stages),
		gates: make([]int, stages), done: make([]int, nch)}
	readyCount := 1
	if converter || fused && !fusedReadyCountOne {
		readyCount = 2 // the aux group and the converter
	}
	fullCount := 1
	if fused {
		fullCount = 2 // the TMA issuer and the gate warp (its 32 lanes as one)
	}
	for s := range stages {
		m.full[s].count, m.ready[s].count, m.empty[s].count, m.qkRead[s].count, m.normed[s].count = fullCount, readyCount, consumers, 1, 1
		m.data[s], m.loading[s], m.prep[s], m.read[s], m.conv[s], m.pBuilt[s], m.gates[s] = -1, -1, -1, -1, -1, -1, -1
	}
	// The gate warp's writes of chunk x's vectors (write_gates), checked
	// against the stage's last user, then its arrival on full.
	writeGates := func(x int) op {
		return op{do: func(m *ringModel) {
			s := x % stages
			if x >= stages && m.done[x-stages] != m.consumers {
				m.fail("chunk %d's gate vectors overwrite stage %d while consumers still read chunk %d", x, s, x-stages)
			}
			m.gates[s] = x
			m.arriveOn(&m.full[s], "full", s)
		}}
	}
	// usesGates is a reader's check that stage s holds chunk c's gate vectors.
	usesGates := func(who string, c, s int) {
		if fused && m.gates[s] != c {
			m.fail("%s takes chunk %d's gate vectors from stage %d holding chunk %d's", who, c, s, m.gates[s])
		}
	}
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
		var prog []op
		gateWarp := fused && g == 0
		if gateWarp { // chunks 0 and 1 before the loop
			for x := range min(gatesAhead, nch) {
				prog = append(prog, writeGates(x))
			}
		}
		for c := range nch {
			s, use := c%stages, c/stages
			// Under the fused preparation (kFused) the refill first, at the top of the chunk, then
			// the gate warp's vectors of chunk c + 2 (the chunk refilled),
			// once chunk c - 1 (the stage's last user) is released.
			if fused && g == 0 && c >= 1 && c-1+stages < nch {
				ps, puse := (c-1)%stages, (c-1)/stages
				prog = append(prog,
					op{wait: func() bool { return m.empty[ps].passes(puse & 1) }},
					op{do: func(m *ringModel) { m.issue(c - 1 + stages) }})
			}
			if gateWarp && c+gatesAhead < nch {
				if c >= 1 {
					ps, puse := (c-1)%stages, (c-1)/stages
					prog = append(prog, op{wait: func() bool { return m.empty[ps].passes(puse & 1) }})
				}
				prog = append(prog, writeGates(c+gatesAhead))
			}
			prog = append(prog, op{wait: func() bool { return m.ready[s].passes(use & 1) }})
			// The first group refills the stage of the chunk before (refill,
			// issued with this chunk's first products).
			if !fused && g == 0 && c >= 1 && c-1+stages < nch {
				ps, puse := (c-1)%stages, (c-1)/stages
				prog = append(prog,
					op{wait: func() bool { return m.empty[ps].passes(puse & 1) }},
					op{do: func(m *ringModel) { m.issue(c - 1 + stages) }})
			}
			prog = append(prog,
				op{do: func(m *ringModel) {
					if m.prep[s] != c || m.data[s] != c || (conv != noConverter && m.conv[s] != c) || (fused && m.pBuilt[s] != c) {
						m.fail("consumer %d takes chunk %d from stage %d prepared for %d, converted for %d, P for %d, holding %d", g, c, s, m.prep[s], m.conv[s], m.pBuilt[s], m.data[s])
					}
					usesGates(fmt.Sprintf("consumer %d", g), c, s)
					m.done[c]++
					m.arriveOn(&m.empty[s], "empty", s)
				}})
			if c == exitAt {
				if g == 0 {
					prog = append(prog, op{do: func(m *ringModel) { m.stop = c + stopAhead }})
					for k := range aux {
						cc := c + stopAhead + k
						if cc >= nch {
							break
						}
						// The stage's chunk before, if not consumed, must have been
						// prepared (its aux group past its own wait on full): else
						// completing the next phase by hand would put full two
						// phases past that group's parity wait.
						if prev := cc - stages; prev > c {
							prog = append(prog, op{wait: func() bool { return m.ready[prev%stages].passes((prev / stages) & 1) }})
						}
						prog = append(prog, op{do: func(m *ringModel) { m.arriveOn(&m.full[cc%stages], "full", cc%stages) }})
					}
				}
				break
			}
		}
		roles = append(roles, prog)
	}
	pc := make([]int, len(roles))
	for m.violation == "" {
		// Runnable: every role whose next op can go, and every load in
		// flight (which lands whenever the schedule picks it).
		var can []int
		for i, prog := range roles {
			if pc[i] < len(prog) && (prog[pc[i]].wait == nil || prog[pc[i]].wait()) {
				can = append(can, i)
			}
		}
		ended := true
		for i, prog := range roles {
			ended = ended && pc[i] == len(prog)
		}
		if ended && len(m.inFlight) > 0 {
			return fmt.Sprintf("every role has ended with %d loads in flight", len(m.inFlight))
		}
		choices := len(can) + len(m.inFlight)
		if choices == 0 {
			for i, prog := range roles {
				if pc[i] < len(prog) {
					return fmt.Sprintf("deadlock: role %d stuck at step %d of %d", i, pc[i], len(prog))
				}
			}
			return ""
		}
		k := r.IntN(choices)
		if k >= len(can) {
			j := k - len(can)
			s := m.inFlight[j]
			m.inFlight = append(m.inFlight[:j], m.inFlight[j+1:]...)
			m.land(s)
			continue
		}
		i := can[k]
		o := roles[i][pc[i]]
		pc[i]++
		if o.do != nil {
			o.do(m)
		}
		if o.exit != nil && o.exit() {
			pc[i] = len(roles[i])
		}
	}
	return m.violation
}
