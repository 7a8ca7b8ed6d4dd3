package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/dtype"
)

func init() {
	register("run", "run the core or the full forward on arrays from an .npz file, write o and ht to another", runRun)
}

// runSynopsis is the command line of `gdn run`.
const runSynopsis = "--in in.npz --out out.npz [--full [--l2norm] [--gate-in-kernel] [--beta-logits [--neg-eigval]]] [--dtype bf16|fp16] [--device N]"

// runHelp describes the files `gdn run` reads and writes.
const runHelp = `The core forward (default): in.npz holds float32 arrays q [B,T,Hq,128],
k [B,T,Hq,128], v [B,T,Hv,128], g (the chunk-local g_cumsum) [B,T,Hv],
beta [B,T,Hv], A [B,T,Hv,64].

The full forward (--full, FLA's chunk_gated_delta_rule): the same without A,
and g is the raw per-token log-gate [B,T,Hv] (natural log, <= 0; not its
cumulative sum): gdn computes g_cumsum and A itself. --l2norm normalises q
and k inside (x / sqrt(sum(x^2) + 1e-6) per 128-vector, FLA's
use_qk_l2norm_in_kernel). --gate-in-kernel takes g as the gate's raw input a
and computes g = -exp(A_log) * softplus(a + dt_bias) from two more float32
arrays, A_log [Hv] and dt_bias [Hv] (FLA's use_gate_in_kernel).
--beta-logits takes beta as logits b and uses sigmoid(b); with --neg-eigval
as well, 2 * sigmoid(b), in (0, 2) (FLA's allow_neg_eigval).

Both take optionally h0 [N,Hv,128,128], cu_seqlens (int32 or int64, [N+1],
needs B = 1) and scale (0-d float32 or float64). q, k and v are rounded to
--dtype; the other arrays are used in fp32. out.npz gets o [B,T,Hv,128] and
ht [N,Hv,128,128], float32.`

// runOptions are the parsed flags of `gdn run`.
type runOptions struct {
	in, out               string
	dtype                 gdn.Dtype
	device                int
	full, l2norm, gateIn  bool
	betaLogits, negEigval bool
}

// parseRunArgs reads the command line of `gdn run`.
func parseRunArgs(args []string) (runOptions, error) {
	fs := newFlags("run", runSynopsis+"\n\n"+runHelp)
	in := fs.String("in", "", "input .npz (required)")
	out := fs.String("out", "", "output .npz (required)")
	dtypeName := fs.String("dtype", "bf16", "dtype q, k, v and o travel in on the GPU: bf16 or fp16")
	device := fs.Int("device", 0, "CUDA device ordinal")
	full := fs.Bool("full", false, "run the full forward from raw per-token gates: no A in the file, g not cumulated (see below)")
	l2norm := fs.Bool("l2norm", false, "with --full: L2-normalise q and k inside")
	gateIn := fs.Bool("gate-in-kernel", false, "with --full: g is the gate's raw input a; A_log and dt_bias [Hv] give g = -exp(A_log) softplus(a + dt_bias)")
	betaLogits := fs.Bool("beta-logits", false, "with --full: beta holds logits b; the forward uses sigmoid(b)")
	negEigval := fs.Bool("neg-eigval", false, "with --full --beta-logits: the forward uses 2 sigmoid(b), in (0, 2)")
	if err := parseFlags(fs, args); err != nil {
		return runOptions{}, err
	}
	o := runOptions{in: *in, out: *out, device: *device, full: *full, l2norm: *l2norm, gateIn: *gateIn,
		betaLogits: *betaLogits, negEigval: *negEigval}
	var err error
	if o.dtype, err = parseDataDtype("--dtype", *dtypeName); err != nil {
		return o, err
	}
	switch {
	case o.in == "":
		return o, errors.New("--in is required (the input .npz)")
	case o.out == "":
		return o, errors.New("--out is required (where o and ht go)")
	case !o.full && o.l2norm:
		return o, errors.New("--l2norm is a step of the full forward: add --full (the core forward takes q and k as they are)")
	case !o.full && o.gateIn:
		return o, errors.New("--gate-in-kernel is a step of the full forward: add --full (the core forward takes g_cumsum)")
	case !o.full && (o.betaLogits || o.negEigval):
		return o, errors.New("--beta-logits and --neg-eigval are steps of the full forward: add --full (the core forward takes beta as it is)")
	case o.negEigval && !o.betaLogits:
		return o, errors.New("--neg-eigval applies to beta given as logits: add --beta-logits (beta as it is may lie in (0, 2) already)")
	}
	return o, nil
}

// runCall is one `gdn run` call read from its file: its sizes, for the
// messages and the output shapes, and the host call that runs it.
type runCall struct {
	B, T, Hq, Hv, N int
	HasH0           bool
	forward         func(rt *gdn.Runtime) (*gdn.HostCoreResult, error)
}

// runCallOf reads the call of o's mode from the arrays of its input file.
func runCallOf(arrays map[string]*npyArray, o runOptions) (*runCall, error) {
	if o.full {
		h, err := hostFullArgsFromNpz(arrays, o.dtype, o.l2norm, o.gateIn)
		if err != nil {
			return nil, err
		}
		h.BetaLogits, h.NegEigval = o.betaLogits, o.negEigval
		return &runCall{B: h.B, T: h.T, Hq: h.Hq, Hv: h.Hv, N: numSeqs(h.CuSeqlens, h.B), HasH0: h.H0 != nil,
			forward: func(rt *gdn.Runtime) (*gdn.HostCoreResult, error) { return rt.ForwardFullHost(h) }}, nil
	}
	h, err := hostArgsFromNpz(arrays, o.dtype)
	if err != nil {
		return nil, err
	}
	return &runCall{B: h.B, T: h.T, Hq: h.Hq, Hv: h.Hv, N: numSeqs(h.CuSeqlens, h.B), HasH0: h.H0 != nil,
		forward: func(rt *gdn.Runtime) (*gdn.HostCoreResult, error) { return rt.ForwardHost(h) }}, nil
}

// mode describes the forward o runs, for the progress line.
func (o runOptions) mode() string {
	if !o.full {
		return "core forward"
	}
	m := "full forward"
	if o.l2norm {
		m += ", L2 norm of q and k inside"
	}
	if o.gateIn {
		m += ", gate from A_log and dt_bias"
	}
	switch {
	case o.negEigval:
		m += ", beta = 2 sigmoid(logits)"
	case o.betaLogits:
		m += ", beta = sigmoid(logits)"
	}
	return m
}

func runRun(args []string) error {
	o, err := parseRunArgs(args)
	if err != nil {
		return err
	}
	arrays, err := readNpzFile(o.in)
	if err != nil {
		return err
	}
	c, err := runCallOf(arrays, o)
	if err != nil {
		return fmt.Errorf("%s: %w", o.in, err)
	}
	fmt.Fprintf(stderr, "run: %s: B=%d T=%d Hq=%d Hv=%d N=%d, %v, h0 %v; %s\n",
		o.in, c.B, c.T, c.Hq, c.Hv, c.N, o.dtype, c.HasH0, o.mode())

	rt, err := openRuntime(gdn.Options{Device: o.device})
	if err != nil {
		return err
	}
	defer rt.Close()
	start := time.Now()
	res, err := c.forward(rt)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "run: forward on %s in %.1f ms (wall, with upload, compile on first use and download)\n",
		rt.Device().Name, float64(time.Since(start).Microseconds())/1e3)

	out := &npyArray{Shape: []int{c.B, c.T, c.Hv, gdn.HeadDim}, Data: res.O}
	ht := &npyArray{Shape: []int{c.N, c.Hv, gdn.HeadDim, gdn.HeadDim}, Data: res.Ht}
	if err := writeNpzFile(o.out, []namedArray{{"o", out}, {"ht", ht}}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: o %v, ht %v (float32)\n", o.out, out.Shape, ht.Shape)
	return nil
}

// openRuntime opens a gdn Runtime and turns the missing-GPU case into one
// clear sentence.
func openRuntime(opts gdn.Options) (*gdn.Runtime, error) {
	rt, err := gdn.Open(opts)
	if errors.Is(err, gdn.ErrNoCUDA) {
		return nil, fmt.Errorf("no GPU: this gdn binary was built without -tags cuda, or no CUDA driver was found (%w)", err)
	}
	return rt, err
}

// parseDataDtype reads the dtype of q, k, v and o: bf16 or fp16.
func parseDataDtype(flagName, s string) (gdn.Dtype, error) {
	d, err := dtype.Parse(s)
	if err != nil || (d != gdn.BF16 && d != gdn.FP16) {
		return gdn.DtypeInvalid, fmt.Errorf("%s %q: want bf16 or fp16", flagName, s)
	}
	return d, nil
}

// numSeqs is N: the number of sequences (and of states in h0 and ht).
func numSeqs(cuSeqlens []int, b int) int {
	if cuSeqlens != nil {
		return len(cuSeqlens) - 1
	}
	return b
}

// npzCall holds the arrays both forwards read from a `gdn run` input, as
// the host call takes them.
type npzCall struct {
	B, T, Hq, Hv         int
	Q, K, V, G, Beta, H0 []float32
	CuSeqlens            []int
	SeqlensDtype         gdn.Dtype
	Scale                float32
}

// npzCommon checks and gathers the arrays both forwards take: q, k, v, g,
// beta and the optional cu_seqlens, scale and h0. Errors name the array
// and say what was expected.
func npzCommon(arrays map[string]*npyArray) (*npzCall, error) {
	q, err := npzFloat32(arrays, "q", 4)
	if err != nil {
		return nil, err
	}
	B, T, Hq := q.Shape[0], q.Shape[1], q.Shape[2]
	if q.Shape[3] != gdn.HeadDim {
		return nil, fmt.Errorf("array q: shape %v: head dimension %d, want %d", q.Shape, q.Shape[3], gdn.HeadDim)
	}
	v, err := npzFloat32(arrays, "v", 4)
	if err != nil {
		return nil, err
	}
	Hv := v.Shape[2]
	c := &npzCall{B: B, T: T, Hq: Hq, Hv: Hv, Q: q.Data.([]float32), V: v.Data.([]float32)}
	if err := npzShape("v", v, []int{B, T, Hv, gdn.HeadDim}, "[B, T, Hv, 128] with B, T from q"); err != nil {
		return nil, err
	}
	need := []struct {
		name, layout string
		shape        []int
		dst          *[]float32
	}{
		{"k", "[B, T, Hq, 128] like q", []int{B, T, Hq, gdn.HeadDim}, &c.K},
		{"g", "[B, T, Hv]", []int{B, T, Hv}, &c.G},
		{"beta", "[B, T, Hv]", []int{B, T, Hv}, &c.Beta},
	}
	for _, n := range need {
		if err := npzInto(arrays, n.name, n.shape, n.layout, n.dst); err != nil {
			return nil, err
		}
	}
	if c.CuSeqlens, c.SeqlensDtype, err = npzCuSeqlens(arrays); err != nil {
		return nil, err
	}
	if c.Scale, err = npzScale(arrays); err != nil {
		return nil, err
	}
	if _, ok := arrays["h0"]; ok {
		if err := npzInto(arrays, "h0", []int{numSeqs(c.CuSeqlens, B), Hv, gdn.HeadDim, gdn.HeadDim}, "[N, Hv, 128, 128]", &c.H0); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// npzInto checks the float32 array called name against shape and stores
// its values in dst.
func npzInto(arrays map[string]*npyArray, name string, shape []int, layout string, dst *[]float32) error {
	a, err := npzFloat32(arrays, name, len(shape))
	if err != nil {
		return err
	}
	if err := npzShape(name, a, shape, layout); err != nil {
		return err
	}
	*dst = a.Data.([]float32)
	return nil
}

// hostArgsFromNpz checks the arrays of a core-forward `gdn run` input and
// gathers them into the arguments of Runtime.ForwardHost (FinalState set).
// Errors name the array and say what was expected; a file made for the full
// forward (no A, or the gate's parameters) is told to use --full.
func hostArgsFromNpz(arrays map[string]*npyArray, dt gdn.Dtype) (*gdn.HostCoreArgs, error) {
	c, err := npzCommon(arrays)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"A_log", "dt_bias"} {
		if _, ok := arrays[name]; ok {
			return nil, fmt.Errorf("array %s is an input of the full forward's gate: run with --full --gate-in-kernel", name)
		}
	}
	h := &gdn.HostCoreArgs{B: c.B, T: c.T, Hq: c.Hq, Hv: c.Hv, CuSeqlens: c.CuSeqlens, SeqlensDtype: c.SeqlensDtype,
		Dtype: dt, Q: c.Q, K: c.K, V: c.V, G: c.G, Beta: c.Beta, H0: c.H0, Scale: c.Scale, FinalState: true}
	if _, ok := arrays["A"]; !ok {
		return nil, errors.New("array A is missing (want float32 [B, T, Hv, 64]); for raw per-token gates without A, run with --full")
	}
	if err := npzInto(arrays, "A", []int{c.B, c.T, c.Hv, gdn.ChunkLen}, "[B, T, Hv, 64]", &h.A); err != nil {
		return nil, err
	}
	return h, nil
}

// hostFullArgsFromNpz checks the arrays of a full-forward `gdn run` input
// (--full) and gathers them into the arguments of Runtime.ForwardFullHost
// (FinalState set): g is the raw per-token log-gate, or with gateIn the
// gate's raw input a, with A_log and dt_bias [Hv]. A is refused (the full
// forward computes it; a file with one was made for the core forward), and
// so are A_log and dt_bias without gateIn (they would be ignored).
func hostFullArgsFromNpz(arrays map[string]*npyArray, dt gdn.Dtype, l2norm, gateIn bool) (*gdn.HostFullArgs, error) {
	c, err := npzCommon(arrays)
	if err != nil {
		return nil, err
	}
	if _, ok := arrays["A"]; ok {
		return nil, errors.New("array A: the full forward computes A itself (and takes the raw per-token g); remove it, or run without --full for the core forward")
	}
	h := &gdn.HostFullArgs{B: c.B, T: c.T, Hq: c.Hq, Hv: c.Hv, CuSeqlens: c.CuSeqlens, SeqlensDtype: c.SeqlensDtype,
		Dtype: dt, Q: c.Q, K: c.K, V: c.V, G: c.G, Beta: c.Beta, H0: c.H0, Scale: c.Scale, FinalState: true,
		L2Norm: l2norm, GateInKernel: gateIn}
	for _, p := range []struct {
		name string
		dst  *[]float32
	}{{"A_log", &h.ALog}, {"dt_bias", &h.DtBias}} {
		_, ok := arrays[p.name]
		switch {
		case gateIn && !ok:
			return nil, fmt.Errorf("array %s is missing (want float32 [Hv] = [%d]: --gate-in-kernel computes g from it)", p.name, c.Hv)
		case !gateIn && ok:
			return nil, fmt.Errorf("array %s is given but --gate-in-kernel is not: add it to compute g from the gate's input a (without it, g is taken as the log-gate itself)", p.name)
		case ok:
			if err := npzInto(arrays, p.name, []int{c.Hv}, "[Hv], one per value head", p.dst); err != nil {
				return nil, err
			}
		}
	}
	return h, nil
}

// npzFloat32 returns the float32 array called name with the given rank.
func npzFloat32(arrays map[string]*npyArray, name string, rank int) (*npyArray, error) {
	a, ok := arrays[name]
	if !ok {
		return nil, fmt.Errorf("array %s is missing (want float32, rank %d)", name, rank)
	}
	if _, ok := a.Data.([]float32); !ok {
		return nil, fmt.Errorf("array %s: dtype %s, want float32 (<f4)", name, a.descr())
	}
	if len(a.Shape) != rank {
		return nil, fmt.Errorf("array %s: rank %d (shape %v), want %d", name, len(a.Shape), a.Shape, rank)
	}
	return a, nil
}

// npzShape checks a's shape against want; layout says where want comes from.
func npzShape(name string, a *npyArray, want []int, layout string) error {
	if !slices.Equal(a.Shape, want) {
		return fmt.Errorf("array %s: shape %v, want %v (%s)", name, a.Shape, want, layout)
	}
	return nil
}

// npzCuSeqlens returns the optional cu_seqlens as ints and the dtype it
// came in (so that it travels to the GPU the same way); its values are
// checked by ForwardHost.
func npzCuSeqlens(arrays map[string]*npyArray) ([]int, gdn.Dtype, error) {
	a, ok := arrays["cu_seqlens"]
	if !ok {
		return nil, gdn.DtypeInvalid, nil
	}
	if len(a.Shape) != 1 || a.Shape[0] < 2 {
		return nil, 0, fmt.Errorf("array cu_seqlens: shape %v, want [N+1] with N >= 1 sequences", a.Shape)
	}
	switch d := a.Data.(type) {
	case []int32:
		cu := make([]int, len(d))
		for i, x := range d {
			cu[i] = int(x)
		}
		return cu, gdn.Int32, nil
	case []int64:
		cu := make([]int, len(d))
		for i, x := range d {
			if x < math.MinInt32 || x > math.MaxInt32 {
				return nil, 0, fmt.Errorf("array cu_seqlens: entry %d = %d is out of range", i, x)
			}
			cu[i] = int(x)
		}
		return cu, gdn.Int64, nil
	}
	return nil, 0, fmt.Errorf("array cu_seqlens: dtype %s, want int32 (<i4) or int64 (<i8)", a.descr())
}

// npzScale returns the optional scale, 0 (the default, 128^-0.5) when absent.
func npzScale(arrays map[string]*npyArray) (float32, error) {
	a, ok := arrays["scale"]
	if !ok {
		return 0, nil
	}
	if len(a.Shape) != 0 {
		return 0, fmt.Errorf("array scale: shape %v, want a 0-d array (a scalar)", a.Shape)
	}
	switch d := a.Data.(type) {
	case []float32:
		return d[0], nil
	case []float64:
		return float32(d[0]), nil
	}
	return 0, fmt.Errorf("array scale: dtype %s, want float32 (<f4) or float64 (<f8)", a.descr())
}
