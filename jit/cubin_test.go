package jit

import (
	"strings"
	"testing"
)

// cubinSpillSource needs far more registers than -maxrregcount=16 gives:
// ptxas spills, into a stack frame.
const cubinSpillSource = `extern "C" __global__ void spill(const float* x, float* y) {
  float v[48];
#pragma unroll
  for (int i = 0; i < 48; i++) v[i] = x[threadIdx.x * 48 + i];
  float s = 0;
#pragma unroll
  for (int j = 0; j < 48; j++)
#pragma unroll
    for (int i = 0; i < 48; i++) s += v[i] * v[(i + j) % 48];
  y[threadIdx.x] = s;
}
`

// The cubin's own account of a kernel (CubinReport) agrees with ptxas's
// report: the same registers, the same stack frame; a spilling kernel's
// frame makes the cubin-read report spill, a clean kernel's does not.
func TestCubinReportMatchesPtxas(t *testing.T) {
	needNVRTC(t)
	c := NewCompiler(nil)
	spill := Request{Name: "spill", Source: cubinSpillSource, Entries: []string{"spill"}, Options: []string{"-maxrregcount=16"}, Target: sm90a}
	for _, req := range []Request{axpyRequest(t), spill} {
		a, err := c.Compile(req)
		if err != nil {
			t.Fatal(err)
		}
		cr, err := CubinReport(a.Image)
		if err != nil {
			t.Fatal(err)
		}
		entry := a.Symbol(req.Entries[0])
		cf, ok := cr.Function(entry)
		if !ok || !cf.Entry || !cr.FromCubin {
			t.Fatalf("%s: cubin report %+v lacks the kernel %s", req.Name, cr, entry)
		}
		if wantSpill := req.Name == "spill"; cr.Spills() != wantSpill || (cf.StackFrame > 0) != wantSpill {
			t.Errorf("%s: cubin report spills %v (frame %d), want %v", req.Name, cr.Spills(), cf.StackFrame, wantSpill)
		}
		if a.Report.FromCubin || strings.TrimSpace(a.Log) == "" {
			continue // this NVRTC gave no ptxas report to compare with
		}
		pf, _ := a.Report.Function(entry)
		if cf.Registers != pf.Registers || cf.StackFrame != pf.StackFrame || a.Report.Spills() != cr.Spills() {
			t.Errorf("%s: cubin says %d registers, frame %d; ptxas %d, frame %d", req.Name, cf.Registers, cf.StackFrame, pf.Registers, pf.StackFrame)
		}
		// Without the log (as NVRTC 13 returns some cubins), the compile's
		// report is the cubin's.
		if r := reportOf("", a.Image); !r.FromCubin || r.Spills() != cr.Spills() || len(r.Functions) != len(cr.Functions) {
			t.Errorf("%s: report without a log = %+v", req.Name, r)
		}
		if r := reportOf(a.Log, a.Image); r.FromCubin {
			t.Errorf("%s: a log with a report was not used", req.Name)
		}
	}
}

func TestCubinReportRejectsNonCubins(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("not an ELF"), []byte("\x7fELF\x02\x01\x01")} {
		if _, err := CubinReport(b); err == nil {
			t.Errorf("CubinReport(%q) succeeded", b)
		}
	}
	if r := reportOf("", []byte("junk")); r.FromCubin || len(r.Functions) != 0 {
		t.Errorf("report of junk = %+v, want empty", r)
	}
}
