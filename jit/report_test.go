package jit

import (
	"strings"
	"testing"
)

// sampleLog is an NVRTC 12.4 ptxas -v log with a spilling template kernel,
// a kernel with shared and constant memory, and a non-inlined device
// function whose properties follow its caller's.
const sampleLog = `ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z2tkILi300EEvPf' for 'sm_90a'
ptxas info    : Function properties for _Z2tkILi300EEvPf
ptxas         .     1200 bytes stack frame, 24 bytes spill stores, 16 bytes spill loads
ptxas info    : Used 255 registers, 1200 bytes cumulative stack size
ptxas info    : Compiling entry function 'dk' for 'sm_90a'
ptxas info    : Function properties for dk
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, 2 barriers, 1024 bytes smem, 380 bytes cmem[0], 8 bytes cmem[2]
ptxas info    : Function properties for _Z3devf
ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to the presence of Extern calls in the function 'dk'.
`

func TestParseReport(t *testing.T) {
	r := ParseReport(sampleLog)
	if len(r.Functions) != 3 {
		t.Fatalf("parsed %d functions:\n%s", len(r.Functions), r)
	}
	tk, _ := r.Function("_Z2tkILi300EEvPf")
	if want := (FunctionReport{Name: "_Z2tkILi300EEvPf", Entry: true, Arch: "sm_90a", Registers: 255,
		SpillStores: 24, SpillLoads: 16, StackFrame: 1200}); tk != want {
		t.Errorf("tk = %+v\nwant %+v", tk, want)
	}
	dk, _ := r.Function("dk")
	if want := (FunctionReport{Name: "dk", Entry: true, Arch: "sm_90a", Registers: 12, SharedBytes: 1024,
		ConstBytes: 380, ConstOthers: 8, Barriers: 2}); dk != want {
		t.Errorf("dk = %+v\nwant %+v", dk, want)
	}
	dev, _ := r.Function("_Z3devf")
	if dev.Entry || dev.SpillBytes() != 8 || dev.StackFrame != 8 || dev.Registers != 0 {
		t.Errorf("device function = %+v", dev)
	}
	if !r.Spills() || r.SpillBytes() != 48 {
		t.Errorf("Spills() = %v, SpillBytes() = %d; want true, 48", r.Spills(), r.SpillBytes())
	}
	if k := r.Kernels(); len(k) != 2 {
		t.Errorf("Kernels() = %v", k)
	}
	if len(r.Warnings) != 1 || !r.Serialized() {
		t.Errorf("Warnings = %q, Serialized() = %v; want the C7515 line, true", r.Warnings, r.Serialized())
	}
	clean := ParseReport("ptxas info    : Compiling entry function 'k' for 'sm_80'\nptxas info    : Function properties for k\n    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\nptxas info    : Used 8 registers\n")
	if clean.Spills() || clean.Serialized() || len(clean.Functions) != 1 || clean.Functions[0].Registers != 8 {
		t.Errorf("clean report = %+v", clean)
	}
	if empty := ParseReport(""); len(empty.Functions) != 0 || empty.Spills() {
		t.Errorf("empty report = %+v", empty)
	}
}

// A report read from the cubin (no ptxas log) has no spill counts: its
// stack frames stand for them, so a frame fails a spill check and none
// passes it; a ptxas report's frame alone (a local array) does not.
func TestReportFromCubinSpills(t *testing.T) {
	frame := Report{FromCubin: true, Functions: []FunctionReport{{Name: "k", Entry: true, Registers: 128, StackFrame: 8}}}
	clean := Report{FromCubin: true, Functions: []FunctionReport{{Name: "k", Entry: true, Registers: 128}}}
	local := Report{Functions: []FunctionReport{{Name: "k", Entry: true, Registers: 128, StackFrame: 8}}}
	if !frame.Spills() || clean.Spills() || local.Spills() {
		t.Errorf("Spills: cubin with a frame %v, cubin without %v, ptxas frame without spills %v; want true, false, false",
			frame.Spills(), clean.Spills(), local.Spills())
	}
	if s := frame.String(); !strings.Contains(s, "read from the cubin") {
		t.Errorf("String() = %q does not say where the report came from", s)
	}
}
