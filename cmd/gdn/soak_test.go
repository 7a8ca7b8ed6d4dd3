package main

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/ref"
)

// Problems are a function of (seed, case), print as specs that parse back
// to the same problem, stay within the size budget, and over a few thousand
// draws cover every option a soak problem has.
func TestSoakProblems(t *testing.T) {
	const n = 3000
	seen := map[string]bool{}
	mark := func(cond bool, what string) {
		if cond {
			seen[what] = true
		}
	}
	for k := range n {
		p := drawSoakProblem(42, k)
		if again := drawSoakProblem(42, k); !reflect.DeepEqual(p, again) {
			t.Fatalf("case %d drawn twice differs:\n%s\n%s", k, p, again)
		}
		back, err := parseSoakProblem(p.String())
		if err != nil {
			t.Fatalf("case %d: %v", k, err)
		}
		if !reflect.DeepEqual(p, back) {
			t.Fatalf("case %d does not round-trip:\n%+v\n%+v", k, p, back)
		}
		if sp := p.Serve; sp != nil {
			mark(true, "serve "+sp.Kind)
			mark(sp.BF16, "serve bf16 pool")
			mark(sp.VK, "serve [V,K]")
			mark(sp.Ckpt > 0, "serve checkpoints")
			mark(sp.States, "serve token states")
			mark(sp.Fresh > 0, "serve negative slots")
			mark(sp.NegEig, "serve neg eigval")
			mark(sp.Kind == serveMixed && slices.ContainsFunc(sp.Lens, func(l int) bool { return l > ref.MaxDecodeTokens }) &&
				slices.ContainsFunc(sp.Lens, func(l int) bool { return l >= 1 && l <= ref.MaxDecodeTokens }), "serve mixed of both kinds")
			continue
		}
		s := p.shape()
		if err := s.Validate(); err != nil {
			t.Fatalf("case %d: %s: %v", k, p, err)
		}
		if s.Tokens()*p.Hv > soakMaxTokenHeads {
			t.Fatalf("case %d: %d token-heads", k, s.Tokens()*p.Hv)
		}
		for _, se := range s.Seqs() {
			l := se[1] - se[0]
			for _, e := range []int{0, 1, 63, 64, 65, soakMaxT} {
				mark(l == e, "len "+strconv.Itoa(e))
			}
			mark(l > 64 && l%64 == 0, "chunk multiple")
			mark(l > 32768, "long")
		}
		mark(p.Lens == nil && p.B > 1, "B>1")
		mark(p.Lens != nil && p.Seq64, "int64 cu_seqlens")
		mark(p.Lens != nil && !p.Seq64, "int32 cu_seqlens")
		mark(true, "G "+strconv.Itoa(p.Hv/p.Hq))
		mark(true, p.Dtype.String())
		mark(p.H0, "h0")
		mark(!p.H0, "no h0")
		mark(p.Ht, "ht")
		mark(!p.Ht, "no ht")
		mark(p.BetaIn, "beta in input dtype")
		mark(!p.BetaIn, "beta fp32")
		mark(p.ABF16, "A bf16")
		mark(!p.ABF16, "A fp32")
		mark(true, "decay "+p.Decay)
		mark(true, "beta "+p.Beta)
		mark(true, "variant "+p.Variant)
		mark(p.Full, "full")
		mark(!p.Full, "core")
		mark(p.Full && p.L2Norm, "full l2norm")
		mark(p.Full && !p.L2Norm, "full without l2norm")
		mark(p.Full && p.Gate, "full gate")
		mark(p.Full && !p.Gate, "full log-gate")
		mark(p.Full && p.PrepHeads == 4 && (p.Hv/p.Hq)%4 == 0, "full prep heads 4")
		mark(p.Full && p.Segments > 0, "full split")
		v := p.Variant
		if v == variantAuto {
			v = ""
		}
		pl, err := p.plan(132, v)
		mark(p.Full && err == nil && strings.Contains(pl.Variant.Name, "_fused_"), "full fused")
		mark(p.Full && err == nil && !strings.Contains(pl.Variant.Name, "_fused_"), "full preparation kernel")
		if p.Full && p.ABF16 || p.Gate && p.Decay != decayNormal || !p.Full && (p.L2Norm || p.Gate || p.PrepHeads != 0) {
			t.Fatalf("case %d: inconsistent options %s", k, p)
		}
	}
	want := []string{"len 0", "len 1", "len 63", "len 64", "len 65", "len 70000", "chunk multiple", "long", "B>1",
		"int64 cu_seqlens", "int32 cu_seqlens", "G 1", "G 2", "G 3", "G 4", "G 8", "bf16", "fp16", "h0", "no h0",
		"ht", "no ht", "beta in input dtype", "beta fp32", "A bf16", "A fp32", "decay normal", "decay strong",
		"decay none", "beta recipe", "beta 0", "beta 1", "variant auto", "full", "core", "full l2norm",
		"full without l2norm", "full gate", "full log-gate", "full prep heads 4", "full split", "full fused",
		"full preparation kernel", "serve decode", "serve prefill", "serve mixed", "serve mixed of both kinds", "serve bf16 pool", "serve [V,K]", "serve checkpoints",
		"serve token states", "serve negative slots", "serve neg eigval"}
	options := len(want)
	for _, dt := range []gdn.Dtype{gdn.BF16, gdn.FP16} {
		for _, v := range soakVariants(problem.Problem{B: 1, T: 64, Hq: 1, Hv: 1, N: 1, Dtype: dt}) {
			want = append(want, "variant "+v)
		}
	}
	if len(want) < options+2 {
		t.Errorf("soakVariants found %d variants in all, want at least one per dtype", len(want)-options)
	}
	for _, w := range want {
		if !seen[w] {
			t.Errorf("%d problems never drew %s", n, w)
		}
	}
	if reflect.DeepEqual(drawSoakProblem(1, 0), drawSoakProblem(2, 0)) {
		t.Error("seeds 1 and 2 draw the same first problem")
	}
}

func TestParseSoakProblemRejects(t *testing.T) {
	good := "seed=1,Hq=2,Hv=4,B=1,T=65,dtype=bf16,h0=1,ht=1,beta_dtype=fp32,A=fp32,decay=normal,beta=recipe,variant=auto"
	if _, err := parseSoakProblem(good); err != nil {
		t.Fatal(err)
	}
	for bad, want := range map[string]string{
		strings.Replace(good, "Hv=4", "Hv=3", 1):               "multiple",
		strings.Replace(good, ",T=65", "", 1):                  "T is missing",
		strings.Replace(good, "T=65", "T=0", 1):                "T=",
		strings.Replace(good, "decay=normal", "decay=x", 1):    "decay",
		strings.Replace(good, "B=1,T=65", "lens=0+0", 1):       "seqlens",
		strings.Replace(good, "B=1,T=65", "lens=3,B=1,T=3", 1): "not both",
		good + ",seed=2": "twice",
		good + ",x":      "key=value",
		strings.Replace(good, "Hq=2", "Hq=99999999999999999999", 1): "Hq",
		strings.Replace(good, "B=1,T=65", "B=1000,T=1000", 1):       "token-heads",
		good + ",l2norm=1":     "need forward=full",
		good + ",forward=full": "needs l2norm and gate",
		good + ",forward=full,l2norm=1,gate=0,prep_heads=-1":                                       "prep_heads",
		strings.Replace(good, "A=fp32", "A=bf16", 1) + ",forward=full,l2norm=0,gate=0":             "computes A",
		strings.Replace(good, "decay=normal", "decay=strong", 1) + ",forward=full,l2norm=0,gate=1": "decay=normal",
		good + ",forward=both,l2norm=0,gate=0":                                                     "forward",
	} {
		if _, err := parseSoakProblem(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", bad, err, want)
		}
	}
}

func TestParseSoakArgs(t *testing.T) {
	o, err := parseSoakArgs([]string{"--minutes", "0.5", "--seed", "9", "--case", "3"})
	if err != nil || o.one == nil || !reflect.DeepEqual(*o.one, drawSoakProblem(9, 3)) {
		t.Fatalf("--case 3: %+v, %v", o, err)
	}
	if got := o.reproduce(3, *o.one); got != "gdn soak --seed 9 --case 3" {
		t.Errorf("reproduce = %q", got)
	}
	p := drawSoakProblem(9, 3)
	o, err = parseSoakArgs([]string{"--problem", p.String()})
	if err != nil || !reflect.DeepEqual(*o.one, p) {
		t.Fatalf("--problem: %v", err)
	}
	for _, bad := range [][]string{{"--minutes", "0"}, {"--minutes", "NaN"}, {"--count", "-1"}, {"--case", "1", "--problem", p.String()},
		{"--problem", "Hq=1"}, {"--ref-budget", "0"}, {"--o-ratio", "-1"}, {"--case", "-2"}} {
		if _, err := parseSoakArgs(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// gdn soak --list runs on any machine and prints the same problems as the
// generator.
func TestSoakList(t *testing.T) {
	code, out, errOut := runGDN(t, "soak", "--list", "--count", "4", "--seed", "5")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	for k, l := range lines {
		if want := "case " + strconv.Itoa(k) + ": " + drawSoakProblem(5, k).String(); l != want {
			t.Errorf("line %d = %q, want %q", k, l, want)
		}
	}
	if code, out, _ := runGDN(t, "soak", "--list", "--seed", "5", "--case", "2"); code != 0 || strings.TrimSpace(out) != lines[2] {
		t.Errorf("--case 2: exit %d, %q", code, out)
	}
}

// soakCheck against outputs made from the whole-problem reference (an
// independent path to every index): exact outputs pass, each kind of damage
// fails with its own reason.
func TestSoakCheck(t *testing.T) {
	p, err := parseSoakProblem("seed=7,Hq=2,Hv=4,lens=65+0+1+130,seqlens=int32,dtype=bf16,h0=1,ht=1,beta_dtype=input,A=fp32,decay=normal,beta=recipe,variant=auto")
	if err != nil {
		t.Fatal(err)
	}
	in := newSoakInputs(p)
	h := in.args
	s := p.shape()
	whole := ref.Inputs{Shape: s, Q: widen64f(h.Q), K: widen64f(h.K), V: widen64f(h.V), G: widen64f(in.g),
		Beta: widen64f(h.Beta), H0: widen64f(h.H0)}
	o, ht, err := ref.Recurrent(whole)
	if err != nil {
		t.Fatal(err)
	}
	exact := func() *gdn.HostCoreResult { return &gdn.HostCoreResult{O: ref.Float32s(o), Ht: ref.Float32s(ht)} }
	for _, budget := range []int{1 << 20, 70} { // every pair; a sample
		out := soakCheck(p, in, exact(), budget, defaultSoakLimits)
		if out.Err != nil || out.Pairs == 0 || out.O.Ratio > 1e-6 || out.Ht.MaxAbs > 1e-6 {
			t.Errorf("budget %d: exact outputs: %+v", budget, out)
		}
		if budget > 1000 && out.Pairs != s.N()*p.Hv {
			t.Errorf("budget %d checked %d pairs, want all %d", budget, out.Pairs, s.N()*p.Hv)
		}
	}
	damage := map[string]func(r *gdn.HostCoreResult){
		"NaN/Inf": func(r *gdn.HostCoreResult) { r.O[len(r.O)-1] = float32(math.NaN()) },
		"o: ref: error ratio": func(r *gdn.HostCoreResult) {
			for i := range r.O {
				r.O[i] *= 1.01
			}
		},
		"ht: ref: max abs": func(r *gdn.HostCoreResult) { r.Ht[(3*p.Hv+3)*ref.D*ref.D+5] += 0.01 }, // the last pair
		"ht has":           func(r *gdn.HostCoreResult) { r.Ht = nil },
	}
	for want, f := range damage {
		r := exact()
		f(r)
		if out := soakCheck(p, in, r, 1<<20, defaultSoakLimits); out.Err == nil || !strings.Contains(out.Err.Error(), want) {
			t.Errorf("damage %q: %v", want, out.Err)
		}
	}
	// A state that decayed to nothing: only the max-abs line applies.
	p.Decay, p.Beta = decayStrong, "0"
	in = newSoakInputs(p)
	r := exact()
	clear(r.O)
	clear(r.Ht)
	if out := soakCheck(p, in, r, 1<<20, defaultSoakLimits); out.Err == nil {
		t.Error("zero outputs passed while h0 still shows in the first tokens")
	}
	p.H0 = false
	in = newSoakInputs(p)
	if out := soakCheck(p, in, &gdn.HostCoreResult{O: make([]float32, s.VLen()), Ht: make([]float32, s.StateLen())}, 1<<20, defaultSoakLimits); out.Err != nil {
		t.Errorf("beta 0 without h0 gives zeros, which failed: %v", out.Err)
	}
}

// The sample stays within budget except for the forced pairs and always
// checks empty and one-token sequences and the longest chain.
func TestSamplePairs(t *testing.T) {
	p := soakProblem{Seed: 3, Hq: 2, Hv: 8, B: 1, Lens: []int{0, 5000, 1, 300, 64, 0}}
	got := samplePairs(p, 2000)
	has := func(n, h int) bool { return slices.Contains(got, pair{n, h}) }
	for _, pr := range []pair{{0, 0}, {0, 7}, {2, 0}, {2, 7}, {5, 0}, {5, 7}, {1, 7}} {
		if !has(pr.n, pr.h) {
			t.Errorf("sample %v lacks %v", got, pr)
		}
	}
	used := 0
	for _, pr := range got {
		if pr != (pair{1, 7}) {
			used += p.Lens[pr.n]
		}
	}
	if used > 2000 {
		t.Errorf("sample uses %d token-heads beyond the forced chain, budget 2000", used)
	}
	if !slices.Equal(got, samplePairs(p, 2000)) {
		t.Error("sample not deterministic")
	}
}

// The loop runs every case once, in order of hand-out, on all workers; it
// stops at --count, at the deadline, and after soakLostAfter GPU failures
// in a row.
func TestSoakLoop(t *testing.T) {
	var mu sync.Mutex
	ran := map[int]int{}
	workers := map[int]bool{}
	o := soakOptions{minutes: 1, count: 200}
	runSoakLoop(4, o, newSoakStats(), func(w, k int) error {
		mu.Lock()
		ran[k]++
		workers[w] = true
		mu.Unlock()
		time.Sleep(time.Millisecond)
		return nil
	})
	if len(ran) != 200 || len(workers) != 4 {
		t.Errorf("%d distinct cases on %d workers, want 200 on 4", len(ran), len(workers))
	}
	for k, n := range ran {
		if n != 1 || k < 0 || k >= 200 {
			t.Errorf("case %d ran %d times", k, n)
		}
	}
	calls := atomic.Int32{}
	var errOut bytes.Buffer
	old := stderr
	stderr = &errOut
	defer func() { stderr = old }()
	runSoakLoop(2, soakOptions{minutes: 1}, newSoakStats(), func(w, k int) error { calls.Add(1); return errors.New("out of memory") })
	if n := calls.Load(); n < soakLostAfter || n > soakLostAfter+2 {
		t.Errorf("%d calls with every GPU call failing, want to stop after %d (+ those in flight)", n, soakLostAfter)
	}
	// The stop names the last error: out of memory is not a lost context.
	if !strings.Contains(errOut.String(), "calls in a row failed, stopping; the last: out of memory") {
		t.Errorf("stop message %q", errOut.String())
	}
	start := time.Now()
	runSoakLoop(3, soakOptions{minutes: 0.01}, newSoakStats(), func(w, k int) error { time.Sleep(5 * time.Millisecond); return nil })
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("a 0.6 s soak took %v", el)
	}
}

// --minutes beyond what a time.Duration holds (about 292 years: a way of
// saying "no time limit" next to --count) runs the problems asked for; it
// must not overflow into a deadline already past, which ran none and
// reported "0 passed, 0 failed" with exit status 0.
func TestSoakLoopHugeMinutes(t *testing.T) {
	for _, minutes := range []float64{1.6e8, 1e300} {
		var calls atomic.Int32
		runSoakLoop(2, soakOptions{minutes: minutes, count: 3}, newSoakStats(), func(w, k int) error { calls.Add(1); return nil })
		if n := calls.Load(); n != 3 {
			t.Errorf("--minutes %g --count 3: %d problems ran", minutes, n)
		}
	}
}

// The full forward's check: the sampled reference of each pair (q and k
// normalised, the gate from its raw input, then the recurrence) agrees
// with ref.Full on the whole problem, whose outputs pass; damaged ones fail.
func TestSoakCheckFull(t *testing.T) {
	p, err := parseSoakProblem("seed=11,Hq=1,Hv=4,lens=70+1+0+129,seqlens=int64,dtype=fp16,h0=1,ht=1,beta_dtype=input,A=fp32," +
		"decay=normal,beta=recipe,variant=auto,segments=1,forward=full,l2norm=1,gate=1,prep_heads=4")
	if err != nil {
		t.Fatal(err)
	}
	in := newSoakInputs(p)
	f := in.full
	if f == nil || in.args != nil || !f.L2Norm || !f.GateInKernel || len(f.ALog) != p.Hv || f.BetaDtype != gdn.FP16 || f.SeqlensDtype != gdn.Int64 {
		t.Fatalf("full arguments %+v", f)
	}
	if norm(f.Q[:ref.D]) < 3.9 || norm(f.Q[:ref.D]) > 4.1 {
		t.Fatalf("q's first row has norm %v, want 4 (normalised inside)", norm(f.Q[:ref.D]))
	}
	s := p.shape()
	whole := ref.Inputs{Shape: s, Q: widen64f(f.Q), K: widen64f(f.K), V: widen64f(f.V), G: widen64f(f.G),
		Beta: widen64f(f.Beta), H0: widen64f(f.H0)}
	o, ht, err := ref.Full(whole, ref.FullOptions{L2Norm: true, ALog: widen64f(f.ALog), DtBias: widen64f(f.DtBias)})
	if err != nil {
		t.Fatal(err)
	}
	exact := func() *gdn.HostCoreResult { return &gdn.HostCoreResult{O: ref.Float32s(o), Ht: ref.Float32s(ht)} }
	out := soakCheck(p, in, exact(), 1<<20, defaultSoakLimits)
	if out.Err != nil || out.Pairs != s.N()*p.Hv || out.O.Ratio > 1e-6 || out.Ht.MaxAbs > 1e-6 {
		t.Errorf("exact outputs: %+v", out)
	}
	// Without the normalisation the reference differs by far more than the
	// line: the check does apply it.
	r := exact()
	plain, _, err := ref.Recurrent(ref.Inputs{Shape: s, Q: whole.Q, K: whole.K, V: whole.V, H0: whole.H0, Beta: whole.Beta,
		G: mustGate(t, whole.G, f.ALog, f.DtBias)})
	if err != nil {
		t.Fatal(err)
	}
	r.O = ref.Float32s(plain)
	if out := soakCheck(p, in, r, 1<<20, defaultSoakLimits); out.Err == nil || !strings.Contains(out.Err.Error(), "o: ") {
		t.Errorf("o without the L2 norm passed: %v", out.Err)
	}
	r = exact()
	r.Ht[5] += 0.05
	if out := soakCheck(p, in, r, 1<<20, defaultSoakLimits); out.Err == nil || !strings.Contains(out.Err.Error(), "ht: ") {
		t.Errorf("damaged ht passed: %v", out.Err)
	}
}

// norm is the Euclidean norm of x.
func norm(x []float32) float64 {
	s := 0.0
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s)
}

// mustGate is ref.GateFromRaw on float32 per-head parameters.
func mustGate(t *testing.T, a []float64, aLog, dtBias []float32) []float64 {
	t.Helper()
	g, err := ref.GateFromRaw(a, widen64f(aLog), widen64f(dtBias))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// An fp16 o among fp16's subnormals: the exact values rounded to fp16 miss
// the ratio line by far, and pass once the line counts fp16's spacing
// there; an error of a few spacings still fails, and bf16 gets no slack.
func TestSoakWithinSubnormalFP16(t *testing.T) {
	want := make([]float64, 256)
	got := make([]float64, len(want))
	for i := range want {
		want[i] = 2e-6 * math.Sin(float64(i)+0.5)
		got[i] = float64(dtype.FP16ToFloat32(dtype.RoundFP16(float32(want[i]))))
	}
	tol := ref.PassO
	if err := within(ref.Compare64(got, want), want, tol, 1e-6, 0); err == nil {
		t.Fatal("fp16's rounding of values near 2e-6 passed the plain ratio line: the case shows nothing")
	}
	if err := within(ref.Compare64(got, want), want, tol, 1e-6, outputQuantum(gdn.FP16)); err != nil {
		t.Errorf("exact but for fp16's subnormal spacing: %v", err)
	}
	for i := range got {
		got[i] += 4 * math.Ldexp(1, -24)
	}
	if err := within(ref.Compare64(got, want), want, tol, 1e-6, outputQuantum(gdn.FP16)); err == nil {
		t.Error("an error of four fp16 spacings passed")
	}
	if q := outputQuantum(gdn.BF16); q != 0 {
		t.Errorf("bf16's quantum %g, want 0", q)
	}
}

// A progress line says how much of the device's memory is in use when the
// soak can ask, and nothing of it when it cannot.
func TestSoakProgressMemory(t *testing.T) {
	st := newSoakStats()
	var b bytes.Buffer
	st.progress(&b)
	if strings.Contains(b.String(), "memory") {
		t.Errorf("without memInfo: %q", b.String())
	}
	st.memInfo = func() (uint64, uint64, error) { return 20e9, 80e9, nil }
	b.Reset()
	st.progress(&b)
	if !strings.HasSuffix(b.String(), "; device memory 60.0 of 80.0 GB in use\n") {
		t.Errorf("with memInfo: %q", b.String())
	}
	st.memInfo = func() (uint64, uint64, error) { return 0, 0, errors.New("lost") }
	b.Reset()
	st.progress(&b)
	if strings.Contains(b.String(), "memory") {
		t.Errorf("with a failing memInfo: %q", b.String())
	}
}
