package hostpath

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// BenchmarkDecodeSpare is the result side of a repeated ForwardHost call
// on the batch of examples/prefill (o and ht, 137 MB of float32; the
// device encoding in a staging buffer), without the device: widening the
// outputs into a new result allocated by the call (fresh: ForwardHost
// before spares), into a spare prepared between calls with the timer
// stopped until it is ready (spare: a caller with other work between
// calls; spare-ms is how long the preparation took), into a spare taken at
// once (spare-tight: calls back to back, the preparation competing with
// the next call), and into the same result every call (reuse:
// ForwardHostInto). On every core (-cpu to vary); it reports ms/call.
func BenchmarkDecodeSpare(b *testing.B) {
	h := prefillHostArgs()
	h.FinalState = true
	l, err := NewCoreLayout(h)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, l.total)
	for i := l.inBytes; i < l.total; i++ {
		buf[i] = byte(i*7) & 0x3F // finite values of either encoding
	}
	out := cutPieces(l.out, pieceBytes)
	reused := &Result{}
	for _, c := range []string{"fresh", "spare", "spare-tight", "reuse"} {
		b.Run(c, func(b *testing.B) {
			var p resultPool
			defer p.close()
			b.SetBytes(int64(l.total - l.inBytes))
			var prep time.Duration
			for b.Loop() {
				switch c {
				case "fresh":
					l.decodeOutputs(buf, &Result{})
				case "reuse":
					l.decodeOutputs(buf, reused)
				default:
					if c == "spare" {
						b.StopTimer()
						start := time.Now()
						p.settle()
						prep += time.Since(start)
						b.StartTimer()
					}
					results, end := p.fresh(l, &Result{})
					l.decodeRun(buf, results(), out).run()
					end(nil)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/call")
			if c == "spare" {
				b.ReportMetric(float64(prep.Microseconds())/1e3/float64(b.N), "spare-ms")
			}
		})
	}
}

// BenchmarkHostBackToBack models ForwardHost called back to back on the
// batch of examples/prefill, without the device: each op is the host side
// of one call, in the order Path.run runs it: take the result (the
// pool's fresh), encode the inputs on every core (204 MB of bf16 and fp32
// written, 330 MB of float32 read), wait gpuPhase (the last upload piece,
// the kernel, the first download piece: CPU idle), widen o and ht (137 MB
// of float32 written) into the result, end. The next op starts at once,
// as the next call of a caller with nothing else to do; the spare each call
// leaves is prepared while the next one runs.
//
//   - tight: back to back, the heap in its steady state (a new result
//     lands on heap memory Go reuses, which Go zeroes, unless allocated
//     without zeroing);
//   - fresh-os: the same, but every result lands on memory fresh from the
//     OS, whose pages fault in on first write (with the timer stopped, the
//     pool's spare is dropped, debug.FreeOSMemory returns the free heap,
//     and a new spare is started just before the call);
//   - into: the same result every call (ForwardHostInto), the floor.
//
// It reports ms/call; on every core (-cpu to vary).
func BenchmarkHostBackToBack(b *testing.B) {
	const gpuPhase = time.Millisecond
	l, err := NewCoreLayout(prefillBenchArgs())
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, l.total)
	in, out := cutPieces(l.in, pieceBytes), cutPieces(l.out, pieceBytes)
	shape := resultShapeOf(l)
	for _, c := range []string{"tight", "fresh-os", "into"} {
		b.Run(c, func(b *testing.B) {
			var p resultPool
			defer p.close()
			reused := &Result{}
			call := func() {
				res, results, end := reused, func() [][]float32 { return l.results(reused) }, func(error) {}
				if c != "into" {
					res = &Result{}
					results, end = p.fresh(l, res)
				}
				l.encodeRun(buf, in).run()
				time.Sleep(gpuPhase)
				l.decodeRun(buf, results(), out).run()
				end(nil)
			}
			// Warm up until the heap has grown to its goal (two collections
			// since the first call): from then on a new result lands on
			// memory Go reuses, as in a long-running program.
			gc0 := gcCount()
			for i := 0; i < 40 && gcCount() < gc0+2; i++ {
				call() // the first call of the shape leaves a spare
			}
			call()
			waited0, faults0 := p.waited.Load(), minorFaults()
			b.SetBytes(int64(l.total))
			for b.Loop() {
				if c == "fresh-os" {
					b.StopTimer()
					if sp := p.take(shape); sp != nil {
						sp.stop.Store(true)
						<-sp.done
					}
					debug.FreeOSMemory()
					p.refill(shape)
					b.StartTimer()
				}
				call()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/call")
			b.ReportMetric(float64(p.waited.Load()-waited0)/float64(b.N), "waited/call")
			b.ReportMetric(float64(minorFaults()-faults0)/float64(b.N), "faults/call")
		})
	}
}

// gcCount returns the number of completed garbage collections.
func gcCount() uint32 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.NumGC
}

// BenchmarkPrepareResult times the preparation of one result of the shape
// of examples/prefill's batch (o and ht, 137 MB of float32) on an
// otherwise idle machine, from the refill that starts it to its last page
// faulted in: spare-ms, the gap a caller needs between calls for the next
// call to find its result ready (ForwardHostGap reports it on the GPU). The
// memory is
//
//   - reused: heap memory Go reuses (a collection, timer stopped, frees the
//     last result first; a ballast keeps the heap goal above the result,
//     so the free memory stays with the process), the steady state;
//   - fresh-os: fresh from the OS (debug.FreeOSMemory, timer stopped,
//     first), as while the heap grows, or after the scavenger returned it.
//
// The preparation is
//
//   - make-1: make (Go zeroes reused memory, on one core) then one
//     goroutine's page writes, the preparation before spare results were
//     allocated without zeroing;
//   - nozero-1: makeNoZero, one goroutine's page writes;
//   - nozero: makeNoZero, touchWorkers goroutines (what the pool does);
//   - nozero-thp: the same after madvise(MADV_HUGEPAGE) on the result's
//     2 MiB-aligned interior (evaluated, not used; docs/PERF.md says why).
//
// It reports spare-ms and faults/op (minor page faults).
func BenchmarkPrepareResult(b *testing.B) {
	l, err := NewCoreLayout(func() *CoreArgs { h := prefillHostArgs(); h.FinalState = true; return h }())
	if err != nil {
		b.Fatal(err)
	}
	shape := resultShapeOf(l)
	ballast := make([]byte, 1<<30) // never written: address space only
	defer runtime.KeepAlive(ballast)
	// The huge-page advice outlives the result it was given for (it stays
	// on the address range, which later allocations reuse), so its cases
	// run last.
	for _, how := range []string{"make-1", "nozero-1", "nozero", "nozero-thp"} {
		for _, mem := range []string{"reused", "fresh-os"} {
			b.Run(mem+"/"+how, func(b *testing.B) {
				p := &resultPool{}
				defer p.close()
				switch how {
				case "make-1":
					p.alloc, p.workers = func(n int) []float32 { return make([]float32, n) }, 1
				case "nozero-1":
					p.workers = 1
				case "nozero-thp":
					p.alloc = func(n int) []float32 {
						x := makeNoZero(n)
						adviseHugePages(x)
						return x
					}
				}
				var faults int64
				for b.Loop() {
					b.StopTimer()
					if mem == "reused" {
						runtime.GC()
					} else {
						debug.FreeOSMemory()
					}
					f := minorFaults()
					b.StartTimer()
					p.refill(shape)
					p.settle()
					b.StopTimer()
					faults += minorFaults() - f
					p.take(shape) // dropped: the next op's collection frees it
					b.StartTimer()
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "spare-ms")
				b.ReportMetric(float64(faults)/float64(b.N), "faults/op")
			})
		}
	}
}
