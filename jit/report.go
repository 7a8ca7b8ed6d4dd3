package jit

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Report is what ptxas said about a cubin (--ptxas-options=-v): one entry per
// function it compiled, in log order. A PTX compilation has an empty report.
type Report struct {
	Functions []FunctionReport `json:"functions,omitempty"` // kernels and non-inlined device functions
	// Warnings are ptxas's warning and performance-advice lines, e.g. the
	// notice that wgmma instructions were serialized.
	Warnings []string `json:"warnings,omitempty"`
	// FromCubin says the report was read from the cubin (CubinReport), the
	// compile's log having none: registers and stack frames only.
	FromCubin bool `json:"from_cubin,omitempty"`
}

// FunctionReport is ptxas's resource usage of one function.
type FunctionReport struct {
	Name        string `json:"name"`                 // as ptxas names it (mangled unless extern "C")
	Entry       bool   `json:"entry"`                // a __global__ kernel, not a device function
	Arch        string `json:"arch,omitempty"`       // e.g. sm_90a
	Registers   int    `json:"registers"`            // per thread
	SpillStores int    `json:"spill_stores"`         // bytes
	SpillLoads  int    `json:"spill_loads"`          // bytes
	StackFrame  int    `json:"stack_frame"`          // bytes of local memory per thread
	SharedBytes int    `json:"smem"`                 // static shared memory, bytes
	ConstBytes  int    `json:"cmem"`                 // constant bank 0, bytes
	Barriers    int    `json:"barriers,omitempty"`   // named barriers used
	ConstOthers int    `json:"cmem_other,omitempty"` // constant banks other than 0, bytes
}

// Spills reports whether the function spills registers to local memory.
func (f FunctionReport) Spills() bool { return f.SpillStores > 0 || f.SpillLoads > 0 }

// SpillBytes is spill stores plus spill loads, in bytes.
func (f FunctionReport) SpillBytes() int { return f.SpillStores + f.SpillLoads }

// Spills reports whether any function of the module spills: for a report
// read from the cubin (FromCubin), which has no spill counts, whether any
// uses a stack frame of local memory.
func (r Report) Spills() bool {
	for _, f := range r.Functions {
		if f.Spills() || (r.FromCubin && f.StackFrame > 0) {
			return true
		}
	}
	return false
}

// SpillBytes sums the spill stores and loads of every function.
func (r Report) SpillBytes() int {
	n := 0
	for _, f := range r.Functions {
		n += f.SpillBytes()
	}
	return n
}

// Serialized reports whether ptxas serialized wgmma instructions (its
// "Potential Performance Loss: wgmma.mma_async instructions are serialized"
// advice, C7510-C7515): every product then waits for the one before it,
// which silently costs a Hopper kernel much of its speed. Reasons ptxas
// gives include too few registers for the products in flight and
// non-wgmma instructions touching an accumulator while a product runs.
func (r Report) Serialized() bool {
	for _, w := range r.Warnings {
		if strings.Contains(w, "wgmma.mma_async instructions are serialized") {
			return true
		}
	}
	return false
}

// Function returns the report of the named function (a kernel entry point's
// name as ptxas prints it: the lowered name for C++ kernels).
func (r Report) Function(name string) (FunctionReport, bool) {
	for _, f := range r.Functions {
		if f.Name == name {
			return f, true
		}
	}
	return FunctionReport{}, false
}

// Kernels returns the entry functions only.
func (r Report) Kernels() []FunctionReport {
	var out []FunctionReport
	for _, f := range r.Functions {
		if f.Entry {
			out = append(out, f)
		}
	}
	return out
}

// String is one line per function, e.g.
// "gdn_test_axpy: 8 registers, 0+0 B spill, 0 B stack, 0 B smem, 376 B cmem".
func (r Report) String() string {
	var b strings.Builder
	for i, f := range r.Functions {
		if i > 0 {
			b.WriteByte('\n')
		}
		kind := ""
		if !f.Entry {
			kind = " (device function)"
		}
		fmt.Fprintf(&b, "%s%s: %d registers, %d+%d B spill, %d B stack, %d B smem, %d B cmem",
			f.Name, kind, f.Registers, f.SpillStores, f.SpillLoads, f.StackFrame, f.SharedBytes, f.ConstBytes)
	}
	if r.FromCubin {
		b.WriteString("\n(no ptxas report: registers and stack frames read from the cubin; a stack frame counts as a spill)")
	}
	for _, w := range r.Warnings {
		b.WriteString("\n" + w)
	}
	return b.String()
}

var (
	reEntry    = regexp.MustCompile(`Compiling entry function '([^']+)' for '([^']+)'`)
	reProps    = regexp.MustCompile(`Function properties for (\S+)`)
	reFrame    = regexp.MustCompile(`(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads`)
	reUsed     = regexp.MustCompile(`Used (\d+) registers`)
	reBarriers = regexp.MustCompile(`(\d+) barriers`)
	reSmem     = regexp.MustCompile(`(\d+) bytes smem`)
	reCmem     = regexp.MustCompile(`(\d+) bytes cmem\[(\d+)\]`)
)

// ParseReport reads the ptxas -v lines of an NVRTC log. ptxas prints, per
// function, "Compiling entry function 'f' for 'sm_90a'" (kernels only), then
// "Function properties for f" followed by the stack/spill line, then, for
// kernels, "Used N registers, ... smem, ... cmem[0]".
func ParseReport(log string) Report {
	var r Report
	index := map[string]int{}
	get := func(name string) *FunctionReport {
		i, ok := index[name]
		if !ok {
			i = len(r.Functions)
			index[name] = i
			r.Functions = append(r.Functions, FunctionReport{Name: name})
		}
		return &r.Functions[i]
	}
	atoi := func(s string) int { v, _ := strconv.Atoi(s); return v }
	var entry, props string // the kernel being compiled; the function whose properties follow
	for _, line := range strings.Split(log, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case strings.Contains(line, "ptxas warning") || strings.Contains(line, "Potential Performance Loss") ||
			strings.Contains(line, "ptxas error"):
			r.Warnings = append(r.Warnings, line)
		case reEntry.MatchString(line):
			m := reEntry.FindStringSubmatch(line)
			entry = m[1]
			f := get(entry)
			f.Entry, f.Arch = true, m[2]
		case reProps.MatchString(line):
			props = reProps.FindStringSubmatch(line)[1]
			get(props)
		case reFrame.MatchString(line):
			if props == "" {
				continue
			}
			m := reFrame.FindStringSubmatch(line)
			f := get(props)
			f.StackFrame, f.SpillStores, f.SpillLoads = atoi(m[1]), atoi(m[2]), atoi(m[3])
		case reUsed.MatchString(line):
			if entry == "" {
				continue
			}
			f := get(entry)
			f.Registers = atoi(reUsed.FindStringSubmatch(line)[1])
			if m := reBarriers.FindStringSubmatch(line); m != nil {
				f.Barriers = atoi(m[1])
			}
			if m := reSmem.FindStringSubmatch(line); m != nil {
				f.SharedBytes = atoi(m[1])
			}
			for _, m := range reCmem.FindAllStringSubmatch(line, -1) {
				if m[2] == "0" {
					f.ConstBytes += atoi(m[1])
				} else {
					f.ConstOthers += atoi(m[1])
				}
			}
		}
	}
	return r
}
