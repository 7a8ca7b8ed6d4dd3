package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/kernsrc"
	"github.com/gdnjit/gdn/ref"
)

// The random problems of `gdn soak`. Problem k of a seed is drawn from its
// own PCG stream (seed, k), so any one problem can be drawn again alone
// (--case k) and the sequence does not depend on how long the soak ran.
// A problem also prints as a spec string (--problem) that holds every
// choice, the input seed included.

// soakProblem is one problem: shape, dtypes, options, inputs and plan.
type soakProblem struct {
	Seed   uint64 // of the inputs
	Hq, Hv int
	B, T   int   // without Lens: B sequences of T tokens
	Lens   []int // packed sequences (B = 1, T their sum), nil otherwise
	Dtype  gdn.Dtype
	H0, Ht bool
	BetaIn bool   // beta in the input dtype instead of fp32
	ABF16  bool   // A in bf16 instead of fp32
	Seq64  bool   // cu_seqlens travels as int64 (varlen only)
	Decay  string // decayNormal, decayStrong or decayNone
	Beta   string // betaRecipe, "0" or "1"
	// Variant is the kernel variant forced (the tuning knob Variant), or
	// variantAuto for the planner's own choice.
	Variant string
	// Segments is the tuning knob SegmentChunks: 0 lets the planner decide
	// whether to split sequences across SMs, > 0 forces segments of that
	// many chunks (optional in a spec; absent means 0).
	Segments int
	// SMs is gdn.Options.SMs: 0 the whole GPU, else a green-context slice
	// of that many SMs (optional in a spec; absent means 0).
	SMs int
	// Full runs the full forward (ForwardFullHost: g's chunk sums and A
	// computed inside) instead of the core forward, which takes them
	// given; A's dtype does not apply (ABF16 is false). Spec key
	// forward=full; absent means the core.
	Full bool
	// With Full: L2Norm gives q and k at 4x their norm, normalised inside;
	// Gate gives g as the gate's raw input a with per-head A_log and
	// dt_bias (soakGateParams; the decay is then normal); PrepHeads is
	// the tuning knob PrepHeads (optional in a spec; absent means 0).
	L2Norm, Gate bool
	PrepHeads    int
	// Serve, when set, makes this a serving problem (soakserve.go): every
	// other field is unused.
	Serve *serveProblem
}

// Decay modes (SPEC: the recipe, g = -5 per token, and g = 0).
const (
	decayNormal = "normal"
	decayStrong = "strong"
	decayNone   = "none"
)

// betaRecipe draws beta from the recipe; "0" and "1" set every beta.
const betaRecipe = "recipe"

// variantAuto leaves the choice of kernel to the planner.
const variantAuto = "auto"

// Size limits of drawn problems: the host keeps float32 copies of every
// input and the soak must run many problems a minute. Tokens x value heads
// of most problems stay within soakTokenHeads; one in soakLongEvery is a
// single long sequence (32,768 to 70,000 tokens) with up to soakMaxTokenHeads.
const (
	soakMaxT          = 70000   // longest sequence a soak draws
	soakTokenHeads    = 1 << 17 // tokens * Hv of an ordinary problem
	soakMaxTokenHeads = 1 << 20 // tokens * Hv of a long one (v is 128 times that)
	soakMaxSeqs       = 12      // packed sequences
	soakLongEvery     = 40      // one problem in this many is long
)

// shape returns the problem's ref.Shape (cu_seqlens from Lens).
func (p soakProblem) shape() ref.Shape {
	if p.Serve != nil {
		return p.Serve.shape()
	}
	if p.Lens == nil {
		return ref.Shape{B: p.B, T: p.T, Hq: p.Hq, Hv: p.Hv}
	}
	cu := []int{0}
	for _, l := range p.Lens {
		cu = append(cu, cu[len(cu)-1]+l)
	}
	return ref.Shape{B: 1, T: cu[len(cu)-1], Hq: p.Hq, Hv: p.Hv, CuSeqlens: cu}
}

// problem returns the problem.Problem the planner sees.
func (p soakProblem) problem() problem.Problem {
	s := p.shape()
	return problem.Problem{B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, N: s.N(), Seqs: s.CuSeqlens, Dtype: p.Dtype}
}

// plan is the plan a Runtime with the problem's options (variant: "" for
// the planner's own) on sms SMs runs it with: the core forward's, or the
// full forward's core (plan.Full: the fused preparation where it
// applies).
func (p soakProblem) plan(sms int, variant string) (plan.Plan, error) {
	k := plan.Knobs{Variant: variant, SegmentChunks: p.Segments}
	if p.Full {
		return plan.Full(p.problem(), sms, k, p.L2Norm)
	}
	return plan.Core(p.problem(), sms, k)
}

// String is the spec string: key=value pairs that parseSoakProblem reads back.
func (p soakProblem) String() string {
	if p.Serve != nil {
		return p.Serve.String()
	}
	b := func(x bool) string {
		if x {
			return "1"
		}
		return "0"
	}
	kv := []string{"seed=" + strconv.FormatUint(p.Seed, 10), fmt.Sprintf("Hq=%d", p.Hq), fmt.Sprintf("Hv=%d", p.Hv)}
	if p.Lens != nil {
		ls := make([]string, len(p.Lens))
		for i, l := range p.Lens {
			ls[i] = strconv.Itoa(l)
		}
		kv = append(kv, "lens="+strings.Join(ls, "+"))
		if p.Seq64 {
			kv = append(kv, "seqlens=int64")
		} else {
			kv = append(kv, "seqlens=int32")
		}
	} else {
		kv = append(kv, fmt.Sprintf("B=%d", p.B), fmt.Sprintf("T=%d", p.T))
	}
	betaDt, aDt := "fp32", "fp32"
	if p.BetaIn {
		betaDt = "input"
	}
	if p.ABF16 {
		aDt = "bf16"
	}
	kv = append(kv, "dtype="+p.Dtype.String(), "h0="+b(p.H0), "ht="+b(p.Ht), "beta_dtype="+betaDt, "A="+aDt,
		"decay="+p.Decay, "beta="+p.Beta, "variant="+p.Variant)
	if p.Segments != 0 {
		kv = append(kv, fmt.Sprintf("segments=%d", p.Segments))
	}
	if p.SMs != 0 {
		kv = append(kv, fmt.Sprintf("sms=%d", p.SMs))
	}
	if p.Full {
		kv = append(kv, "forward=full", "l2norm="+b(p.L2Norm), "gate="+b(p.Gate))
		if p.PrepHeads != 0 {
			kv = append(kv, fmt.Sprintf("prep_heads=%d", p.PrepHeads))
		}
	}
	return strings.Join(kv, ",")
}

// parseSoakProblem reads a spec string (soakProblem.String). Every key is
// required except those of the other sequence layout; errors name the key.
func parseSoakProblem(s string) (soakProblem, error) {
	if strings.HasPrefix(strings.TrimSpace(s), "serve=") {
		sp, err := parseServeProblem(strings.TrimSpace(s))
		return soakProblem{Serve: &sp}, err
	}
	var p soakProblem
	seen, err := parseSpec(s, func(key, val string) (err error) {
		switch key {
		case "seed":
			p.Seed, err = strconv.ParseUint(val, 10, 64)
		case "Hq":
			p.Hq, err = positive(val, maxSoakHeads)
		case "Hv":
			p.Hv, err = positive(val, maxSoakHeads)
		case "B":
			p.B, err = positive(val, soakMaxTokenHeads)
		case "T":
			p.T, err = positive(val, soakMaxTokenHeads)
		case "lens":
			p.Lens, err = parseLens(val)
		case "seqlens":
			p.Seq64, err = choice(val, "int32", "int64")
		case "dtype":
			p.Dtype, err = parseDataDtype("dtype", val)
		case "h0":
			p.H0, err = choice(val, "0", "1")
		case "ht":
			p.Ht, err = choice(val, "0", "1")
		case "beta_dtype":
			p.BetaIn, err = choice(val, "fp32", "input")
		case "A":
			p.ABF16, err = choice(val, "fp32", "bf16")
		case "decay":
			if !slices.Contains([]string{decayNormal, decayStrong, decayNone}, val) {
				err = fmt.Errorf("want %s, %s or %s", decayNormal, decayStrong, decayNone)
			}
			p.Decay = val
		case "beta":
			if !slices.Contains([]string{betaRecipe, "0", "1"}, val) {
				err = fmt.Errorf("want %s, 0 or 1", betaRecipe)
			}
			p.Beta = val
		case "variant":
			if val == "" {
				err = fmt.Errorf("want a variant name or %s", variantAuto)
			}
			p.Variant = val
		case "sms":
			p.SMs, err = strconv.Atoi(val)
			if err == nil && (p.SMs < 0 || p.SMs > 4096) {
				err = fmt.Errorf("want 0 (the whole GPU) or an SM count up to 4096")
			}
		case "forward":
			p.Full, err = choice(val, "core", "full")
		case "l2norm":
			p.L2Norm, err = choice(val, "0", "1")
		case "gate":
			p.Gate, err = choice(val, "0", "1")
		case "prep_heads":
			p.PrepHeads, err = strconv.Atoi(val)
			if err == nil && (p.PrepHeads < 0 || p.PrepHeads > maxSoakHeads) {
				err = fmt.Errorf("want 0 (chosen by shape) or a cap up to %d", maxSoakHeads)
			}
		case "segments":
			p.Segments, err = strconv.Atoi(val)
			if err == nil && (p.Segments < -1 || p.Segments > 1<<20) {
				err = fmt.Errorf("want -1 (never split), 0 (the planner's choice) or a chunk count up to %d", 1<<20)
			}
		default:
			err = fmt.Errorf("unknown key")
		}
		return err
	})
	if err != nil {
		return p, err
	}
	required := []string{"seed", "Hq", "Hv", "dtype", "h0", "ht", "beta_dtype", "A", "decay", "beta", "variant"}
	if seen["lens"] {
		p.B = 1 // packed sequences share one batch row
		required = append(required, "seqlens")
		if seen["B"] || seen["T"] {
			return p, fmt.Errorf("problem %q: give lens or B and T, not both", s)
		}
	} else {
		required = append(required, "B", "T")
		if seen["seqlens"] {
			return p, fmt.Errorf("problem %q: seqlens needs lens", s)
		}
	}
	for _, k := range required {
		if !seen[k] {
			return p, fmt.Errorf("problem %q: %s is missing", s, k)
		}
	}
	if p.Hv%p.Hq != 0 {
		return p, fmt.Errorf("problem %q: Hv = %d is not a multiple of Hq = %d", s, p.Hv, p.Hq)
	}
	switch {
	case !p.Full && (seen["l2norm"] || seen["gate"] || seen["prep_heads"]):
		return p, fmt.Errorf("problem %q: l2norm, gate and prep_heads need forward=full", s)
	case p.Full && !(seen["l2norm"] && seen["gate"]):
		return p, fmt.Errorf("problem %q: forward=full needs l2norm and gate", s)
	case p.Full && p.ABF16:
		return p, fmt.Errorf("problem %q: A=bf16: the full forward computes A itself (want A=fp32)", s)
	case p.Gate && p.Decay != decayNormal:
		return p, fmt.Errorf("problem %q: gate=1 draws its own decay (want decay=normal)", s)
	}
	if p.Lens != nil {
		if len(p.Lens) > soakMaxSeqs*100 {
			return p, fmt.Errorf("problem %q: %d sequences, at most %d", s, len(p.Lens), soakMaxSeqs*100)
		}
		total := 0
		for _, l := range p.Lens {
			if l > soakMaxTokenHeads {
				return p, fmt.Errorf("problem %q: sequence of %d tokens, at most %d", s, l, soakMaxTokenHeads)
			}
			total += l
		}
		if total < 1 {
			return p, fmt.Errorf("problem %q: lens hold no token (want at least 1)", s)
		}
	}
	if tok := p.shape().Tokens(); tok > soakMaxTokenHeads/p.Hv {
		return p, fmt.Errorf("problem %q: %d tokens x %d value heads, at most %d token-heads", s, tok, p.Hv, soakMaxTokenHeads)
	}
	return p, nil
}

// parseSpec reads a spec string's comma-separated key=value pairs in
// order, handing each to set, and returns the keys seen; an error names
// the spec and the pair (a pair not of that form, a key given twice, or
// set's refusal).
func parseSpec(s string, set func(key, val string) error) (map[string]bool, error) {
	seen := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return seen, fmt.Errorf("problem %q: %q is not key=value", s, kv)
		}
		if seen[key] {
			return seen, fmt.Errorf("problem %q: %s given twice", s, key)
		}
		seen[key] = true
		if err := set(key, val); err != nil {
			return seen, fmt.Errorf("problem %q: %s=%q: %v", s, key, val, err)
		}
	}
	return seen, nil
}

// maxSoakHeads bounds the head counts a spec may give.
const maxSoakHeads = 1024

// positive parses an integer in [1, most].
func positive(s string, most int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > most {
		return 0, fmt.Errorf("want an integer from 1 to %d", most)
	}
	return n, nil
}

// choice parses one of two words: false for no, true for yes.
func choice(s, no, yes string) (bool, error) {
	switch s {
	case no:
		return false, nil
	case yes:
		return true, nil
	}
	return false, fmt.Errorf("want %s or %s", no, yes)
}

// drawSoakProblem draws problem k of a soak seed. Sizes lean small (many
// problems per minute) with a long tail to 70,000 tokens; every edge the
// kernels have (1, 63, 64, 65 tokens, chunk multiples, empty and one-token
// packed sequences) comes up often.
func drawSoakProblem(seed uint64, k int) soakProblem {
	r := rand.New(rand.NewPCG(seed, uint64(k)))
	p := soakProblem{Seed: r.Uint64()}
	g := []int{1, 2, 3, 4, 8}[r.IntN(5)]
	p.Hq = []int{1, 1, 2, 2, 4, 8, 16}[r.IntN(7)]
	p.Hv = g * p.Hq

	budget := soakTokenHeads
	switch x := r.Float64(); {
	case x < 1.0/soakLongEvery:
		budget = soakMaxTokenHeads
		p.Hq, p.Hv = 1, g
		p.B, p.T = 1, 32768+r.IntN(soakMaxT-32768+1)
		if r.IntN(4) == 0 {
			p.T = seqEdges[len(seqEdges)-1-r.IntN(4)] // 65535, 65536, 65537 or 70000
		}
	case x < 0.40:
		p.B, p.T = 1, drawSeqLen(r)
	case x < 0.60:
		p.B, p.T = 2+r.IntN(4), drawSeqLen(r)
	default:
		n := 1 + r.IntN(soakMaxSeqs)
		p.Lens = make([]int, n)
		for i := range p.Lens {
			switch y := r.Float64(); {
			case y < 0.15:
				p.Lens[i] = 0
			case y < 0.30:
				p.Lens[i] = 1
			default:
				p.Lens[i] = drawSeqLen(r)
			}
		}
		if slices.Max(p.Lens) == 0 {
			p.Lens[r.IntN(n)] = 1 // B*T must be at least 1
		}
		p.B, p.Seq64 = 1, r.IntN(2) == 1
	}
	// Keep tokens x value heads within budget: fewer heads first, then
	// shorter sequences.
	for p.shape().Tokens()*p.Hv > budget {
		switch {
		case p.Hq > 1:
			p.Hq /= 2
			p.Hv = g * p.Hq
		case p.Lens != nil:
			i := slices.Index(p.Lens, slices.Max(p.Lens))
			p.Lens[i] /= 2
		case p.B > 1:
			p.B--
		default:
			p.T /= 2
		}
	}

	p.Dtype = gdn.BF16
	if r.IntN(2) == 1 {
		p.Dtype = gdn.FP16
	}
	p.H0 = r.Float64() < 0.7
	p.Ht = r.Float64() < 0.75
	p.BetaIn = r.Float64() < 0.25
	p.ABF16 = r.Float64() < 0.25
	p.Decay = decayNormal
	switch x := r.Float64(); {
	case x < 0.15:
		p.Decay = decayStrong
	case x < 0.30:
		p.Decay = decayNone
	}
	p.Beta = betaRecipe
	switch x := r.Float64(); {
	case x < 0.08:
		p.Beta = "0"
	case x < 0.16:
		p.Beta = "1"
	}
	p.Variant = variantAuto
	if vs := soakVariants(p.problem()); len(vs) > 0 && r.IntN(3) > 0 {
		p.Variant = vs[r.IntN(len(vs))]
	}
	// A third of the problems force a split plan with short segments, so
	// that segment boundaries fall everywhere (the planner itself splits
	// only long sequences with few heads).
	if r.IntN(3) == 0 {
		p.Segments = []int{1, 2, 3, 5, 8, 16}[r.IntN(6)]
	}
	// One in eight runs on a green-context slice, where the planner sizes
	// grids and splits for fewer SMs.
	if r.IntN(8) == 0 {
		p.SMs = []int{16, 32}[r.IntN(2)]
	}
	// One in three runs the full forward (drawn last, so that the choices
	// above stay what they were for a seed and case), half of those with
	// the L2 norm inside, half with the gate from its raw input, half with
	// preparation blocks of four value heads wherever four divide G (a
	// soak's grids are mostly too small for the shape to choose them).
	if r.IntN(3) == 0 {
		p.Full, p.ABF16 = true, false
		p.L2Norm = r.IntN(2) == 0
		p.Gate = p.Decay == decayNormal && r.IntN(2) == 0
		if r.IntN(2) == 0 {
			p.PrepHeads = 4
		}
	}
	// One in four is a serving problem instead (drawn last, as above).
	if r.IntN(4) == 0 {
		sp := drawServeProblem(r)
		return soakProblem{Serve: &sp}
	}
	return p
}

// soakVariants lists the catalogue's kernel variants that can run p
// (plan.Variant accepts them): the plans a soak covers besides the
// planner's own choice.
func soakVariants(p problem.Problem) []string {
	var out []string
	for _, v := range kernsrc.Catalogue() {
		if _, err := plan.Variant(p, v.Name); err == nil {
			out = append(out, v.Name)
		}
	}
	return out
}

// seqEdges are the sequence lengths where chunking has its edges.
var seqEdges = []int{1, 2, 63, 64, 65, 127, 128, 129, 191, 192, 193, 4095, 4096, 4097, 65535, 65536, 65537, soakMaxT}

// drawSeqLen draws the length of one sequence of an ordinary problem:
// mostly short, sometimes up to 16,384 tokens.
func drawSeqLen(r *rand.Rand) int {
	switch x := r.Float64(); {
	case x < 0.30:
		return seqEdges[r.IntN(14)] // 1 to 4097
	case x < 0.60:
		return 1 + r.IntN(512)
	case x < 0.80:
		return max(1, ref.C*(1+r.IntN(64))+r.IntN(3)-1) // chunk multiples and their neighbours
	case x < 0.96:
		return 512 + r.IntN(4096)
	default:
		return 4096 + r.IntN(12289)
	}
}
