package kernsrc

import "fmt"

// The consumer groups of the ring model (pipeline_model_test.go), warp by
// warp: run_consumer (hopper_consumer.cuh) with its three rounds of
// products a chunk, its named barriers (the group's, around o's staging
// tile; both groups' vote on the transfer pass's early exit), o's staging
// tile and the TMA stores that read it (under kFused a whole chunk's store
// waits for the next chunk's first products), and, in the lab's pingpong
// (kernsrc/lab/pingpong.cu), the two groups' turns at the tensor pipe.
//
// Beyond the ring it checks: each phase of a named barrier holds each warp
// once, for one use (two uses of one id would complete each other's
// phases), and every phase has completed when all roles have ended; o's
// staging tile is never written while a store still reads it, and a store
// reads a tile all of the group's warps have written; with turns, the
// groups' rounds alternate on the pipe, group 0's first, never both
// groups' at once.

// warpsPerGroup are a consumer group's warps, each a role of the model.
const warpsPerGroup = 4

// barConsumers is the named barrier of both groups' vote on the early exit
// (hopper_cfg.cuh's kBarConsumers); 1 + g is group g's own.
const barConsumers = 5

// turnBar is group 0's turn barrier and turnBar + 1 group 1's (pingpong.cu's
// kBarTurn), turnThreads a turn phase's threads: variables only so that a
// test can check that the model catches a barrier colliding with the
// kernel's and a phase of one group.
var turnBar, turnThreads = 9, 256

// The turns' mistakes, for the tests that the model catches them: group 1
// not arriving before its first round (turnNoStart), group 0 not taking
// group 1's last arrival (turnNoEnd), the last round's arrival after the
// early exit's vote (passAfterVote). And o's: the staging tile written
// without waiting for the store before to have read it (noStoreWaitRead).
var turnNoStart, turnNoEnd, passAfterVote, noStoreWaitRead bool

// namedBar is one named barrier (bar.sync and bar.arrive): a phase
// completes when its count of warps has arrived.
type namedBar struct {
	warps, phase, arrived int
	uses                  [2 * warpsPerGroup]string // what each warp arrived for in this phase ("": not)
}

// oStore is a TMA store of group g's staging tile (chunk c's o) still
// reading it.
type oStore struct{ g, c int }

// consumerState is what the consumer warps share beyond the ring.
type consumerState struct {
	bars             [16]namedBar          // by id, as the hardware's
	entered, left    [2][warpsPerGroup]int // rounds each warp has begun and ended issuing
	tile, tileWrites [2]int                // the chunk whose o each group's tile holds; its warps' writes
	stores           []oStore
}

func newConsumerState() consumerState {
	return consumerState{tile: [2]int{-1, -1}}
}

// barArrive is warp id's arrival on named barrier bar of threads threads,
// for use; it returns the phase it arrived in.
func (m *ringModel) barArrive(bar, threads, id int, use string) int {
	b := &m.bars[bar]
	if b.arrived == 0 {
		b.warps = threads / 32
	} else if b.warps != threads/32 {
		m.fail("named barrier %d: warp %d arrives for %s counting %d threads, in a phase of %d", bar, id, use, threads, 32*b.warps)
	}
	if u := b.uses[id]; u != "" {
		m.fail("named barrier %d: warp %d arrives for %s in the phase it arrived in for %s", bar, id, use, u)
	}
	for w, u := range b.uses {
		if u != "" && u != use {
			m.fail("named barrier %d: one phase mixes warp %d's arrival for %s and warp %d's for %s", bar, id, use, w, u)
			break
		}
	}
	b.uses[id] = use
	b.arrived++
	p := b.phase
	if b.arrived == b.warps {
		b.phase++
		b.arrived = 0
		clear(b.uses[:])
	}
	return p
}

// barriersLeft is "" when every named barrier's phases have completed
// (what the model requires once every role has ended), else which has not.
func (m *ringModel) barriersLeft() string {
	for id, b := range m.bars {
		if b.arrived > 0 {
			return fmt.Sprintf("every role has ended with named barrier %d part-way: %d of %d warps arrived", id, b.arrived, b.warps)
		}
	}
	return ""
}

// enterRound is warp w of group g beginning to issue its next round; with
// turns, group 1 must have ended as many rounds as group 0 has before it
// (group 0 goes first), group 0 one more before group 1's, and no warp
// of the other group may be issuing.
func (m *ringModel) enterRound(g, w int, turns bool) {
	r := m.entered[g][w]
	m.entered[g][w]++
	if !turns {
		return
	}
	o, need := 1-g, r+g
	for x := range warpsPerGroup {
		if m.entered[o][x] > m.left[o][x] {
			m.fail("group %d's warp %d issues its round %d while group %d's warp %d issues its round %d: both groups at the pipe", g, w, r, o, x, m.left[o][x])
		} else if m.left[o][x] != need {
			m.fail("group %d's warp %d issues its round %d after %d rounds of group %d's warp %d, not %d: out of turn", g, w, r, m.left[o][x], o, x, need)
		}
	}
}

// storeReading says whether a store still reads group g's staging tile.
func (m *ringModel) storeReading(g int) bool {
	for _, s := range m.stores {
		if s.g == g {
			return true
		}
	}
	return false
}

// writeTile is warp w of group g writing its part of chunk c's o into the
// group's staging tile (stage_o).
func (m *ringModel) writeTile(g, w, c int) {
	for _, s := range m.stores {
		if s.g == g {
			m.fail("group %d's warp %d writes chunk %d's o into the staging tile chunk %d's store still reads", g, w, c, s.c)
		}
	}
	if m.tile[g] != c {
		m.tile[g], m.tileWrites[g] = c, 0
	}
	m.tileWrites[g]++
}

// storeTile stores chunk c's o from group g's staging tile (flush_o): by
// TMA, which reads the tile until the schedule says, or row by row
// (rows), done at once.
func (m *ringModel) storeTile(g, c int, rows bool) {
	if m.tile[g] != c || m.tileWrites[g] != warpsPerGroup {
		m.fail("group %d stores chunk %d's o from a staging tile holding chunk %d's, %d of %d warps' parts written", g, c, m.tile[g], m.tileWrites[g], warpsPerGroup)
	}
	if !rows {
		m.stores = append(m.stores, oStore{g, c})
	}
}

// usesGates is a reader's check that stage s holds chunk c's gate vectors.
func (m *ringModel) usesGates(who string, c, s int) {
	if m.fused && m.gates[s] != c {
		m.fail("%s takes chunk %d's gate vectors from stage %d holding chunk %d's", who, c, s, m.gates[s])
	}
}

// writeGates is the gate warp's writes of chunk x's vectors (write_gates),
// checked against the stage's last user, then its arrival on full.
func (m *ringModel) writeGates(x int) op {
	return op{do: func(m *ringModel) {
		s := x % m.stages
		if x >= m.stages && m.done[x-m.stages] != m.releases {
			m.fail("chunk %d's gate vectors overwrite stage %d while consumers still read chunk %d", x, s, x-m.stages)
		}
		m.gates[s] = x
		m.arriveOn(&m.full[s], "full", s)
	}}
}

// consumerWarp is the program of warp w of consumer group g: run_consumer's
// waits, arrivals, rounds and stores in the kernel's order (with k.turns,
// the lab's PingPongTurns: start, a take before and a pass after each
// round, end).
func (m *ringModel) consumerWarp(k ringCase, g, w int) []op {
	stages, nch := m.stages, k.nch
	id, who := g*warpsPerGroup+w, fmt.Sprintf("consumer %d's warp %d", g, w)
	lead := g == 0 && w == 0 // its thread 0 refills the stages; under kFused the gate warp
	gateWarp := m.fused && lead
	wide := k.consumers == 1 && !k.transfer // kWide
	storeO, deferStore := !k.transfer, m.fused
	turns := k.turns && k.consumers == 2
	chunkLen := func(c int) int {
		if k.partial && c == nch-1 {
			return 37
		}
		return 64
	}
	prog := make([]op, 0, 24*nch+8)
	do := func(f func(m *ringModel)) { prog = append(prog, op{do: f}) }
	wait := func(f func() bool) { prog = append(prog, op{wait: f}) }
	sync := func(bar, threads int, use string) {
		var ph int
		do(func(m *ringModel) { ph = m.barArrive(bar, threads, id, use) })
		wait(func() bool { return m.bars[bar].phase > ph })
	}
	take := func() {
		if turns {
			sync(turnBar+g, turnThreads, "the turns")
		}
	}
	pass := func() {
		if turns {
			do(func(m *ringModel) { m.barArrive(turnBar+1-g, turnThreads, id, "the turns") })
		}
	}
	// A round of products reading chunk c's stage: issued (the warp's
	// part of the warpgroup's wgmma), then committed.
	round := func(c int) {
		take()
		s := c % stages
		do(func(m *ringModel) {
			m.enterRound(g, w, turns)
			if m.prep[s] != c || m.data[s] != c || (k.conv != noConverter && m.conv[s] != c) || (m.fused && m.pBuilt[s] != c) {
				m.fail("%s reads chunk %d from stage %d prepared for %d, converted for %d, P for %d, holding %d", who, c, s, m.prep[s], m.conv[s], m.pBuilt[s], m.data[s])
			}
			m.usesGates(who, c, s)
		})
		do(func(m *ringModel) { m.left[g][w]++ })
	}
	// refill(c): the lead's thread 0 loads chunk c + stages into chunk c's
	// stage once every consumer warp has released it.
	refill := func(c int) {
		if !lead || c < 0 || c+stages >= nch {
			return
		}
		s, use := c%stages, c/stages
		wait(func() bool { return m.empty[s].passes(use & 1) })
		do(func(m *ringModel) { m.issue(c + stages) })
	}
	groupSync := func() { sync(1+g, 128, "the group") }
	flush := func(c int) { // flush_o
		groupSync()
		if chunkLen(c) == 64 {
			if w == 0 {
				do(func(m *ringModel) { m.storeTile(g, c, false) })
			}
		} else {
			do(func(m *ringModel) { m.storeTile(g, c, true) })
		}
	}
	store := func(c int) { // store_o: stage_o, then flush_o unless deferred
		if w == 0 && !noStoreWaitRead {
			wait(func() bool { return !m.storeReading(g) })
		}
		groupSync()
		do(func(m *ringModel) { m.writeTile(g, w, c) })
		if !deferStore || chunkLen(c) < 64 {
			flush(c)
		}
	}
	release := func(c int) {
		s := c % stages
		do(func(m *ringModel) {
			m.done[c]++
			m.arriveOn(&m.empty[s], "empty", s)
		})
	}

	if gateWarp { // chunks 0 and 1 before the loop
		for x := range min(gatesAhead, nch) {
			prog = append(prog, m.writeGates(x))
		}
	}
	if turns && g == 1 && nch > 0 && !turnNoStart {
		do(func(m *ringModel) { m.barArrive(turnBar, turnThreads, id, "the turns") })
	}
	for c := range nch {
		s, use := c%stages, c/stages
		// Under kFused the refill first, at the top of the chunk, then the
		// gate warp's vectors of chunk c + 2 (the chunk refilled), once
		// chunk c - 1 (the stage's last user) is released.
		if m.fused {
			refill(c - 1)
		}
		if gateWarp && c+gatesAhead < nch {
			if c >= 1 {
				ps, puse := (c-1)%stages, (c-1)/stages
				wait(func() bool { return m.empty[ps].passes(puse & 1) })
			}
			prog = append(prog, m.writeGates(c+gatesAhead))
		}
		wait(func() bool { return m.ready[s].passes(use & 1) })
		round(c) // U and O' (kWide: as one product in two commit groups)
		pass()
		if deferStore && storeO && c > 0 && chunkLen(c-1) == 64 {
			flush(c - 1) // the chunk before's o, behind this chunk's first products
		}
		if !m.fused && !wide {
			refill(c - 1)
		}
		round(c) // Vn
		pass()
		if wide {
			refill(c - 1)
		}
		round(c) // the state update and the P term
		if !passAfterVote {
			pass()
		}
		if wide { // o stored between the P term's wait and the update's
			if storeO {
				store(c)
			}
			release(c)
		} else {
			release(c)
			if storeO {
				store(c)
			}
		}
		if k.transfer { // the vote, where this run's m.votes has one
			var ph int
			do(func(m *ringModel) {
				if m.votes[c] {
					ph = m.barArrive(barConsumers, 128*k.consumers, id, "the early exit's vote")
				}
			})
			wait(func() bool { return !m.votes[c] || m.bars[barConsumers].phase > ph })
		}
		if passAfterVote {
			pass()
		}
		if c == k.exitAt {
			if lead { // stop_after
				do(func(m *ringModel) { m.stop = c + stopAhead })
				for a := range k.aux {
					cc := c + stopAhead + a
					if cc >= nch {
						break
					}
					// The stage's chunk before, if not consumed, must have been
					// prepared (its aux group past its own wait on full): else
					// completing the next phase by hand would put full two
					// phases past that group's parity wait.
					if prev := cc - stages; prev > c {
						wait(func() bool { return m.ready[prev%stages].passes((prev / stages) & 1) })
					}
					do(func(m *ringModel) { m.arriveOn(&m.full[cc%stages], "full", cc%stages) })
				}
			}
			break
		}
	}
	if deferStore && storeO && nch > 0 && chunkLen(nch-1) == 64 {
		flush(nch - 1)
	}
	if turns && g == 0 && nch > 0 && !turnNoEnd {
		sync(turnBar, turnThreads, "the turns")
	}
	if w == 0 { // tma_store_wait_all
		wait(func() bool { return !m.storeReading(g) })
	}
	return prog
}
