package jit

import (
	"fmt"
	"strconv"
	"strings"
)

// Target is the GPU architecture a compilation is for.
type Target struct {
	Major, Minor int // compute capability, e.g. 9, 0
	// ArchSpecific adds the 'a' suffix (sm_90a): it unlocks Hopper's
	// wgmma and setmaxnreg instructions, and the code then runs only on
	// exactly this compute capability.
	ArchSpecific bool
	// PTX asks for PTX (compute_XY) that the driver compiles at load time,
	// for a GPU newer than NVRTC knows; otherwise NVRTC emits a cubin.
	PTX bool
}

// String returns the -arch value: sm_90a, sm_80, compute_90, ...
func (t Target) String() string {
	prefix := "sm_"
	if t.PTX {
		prefix = "compute_"
	}
	s := fmt.Sprintf("%s%d%d", prefix, t.Major, t.Minor)
	if t.ArchSpecific {
		s += "a"
	}
	return s
}

// CC returns the compute capability as 10*Major+Minor, e.g. 90.
func (t Target) CC() int { return 10*t.Major + t.Minor }

// ParseTarget reads an -arch value: sm_90a, sm_90, compute_90, or the bare
// forms 90a and 90.
func ParseTarget(s string) (Target, error) {
	var t Target
	rest := s
	switch {
	case strings.HasPrefix(rest, "sm_"):
		rest = rest[3:]
	case strings.HasPrefix(rest, "compute_"):
		rest = rest[8:]
		t.PTX = true
	}
	if strings.HasSuffix(rest, "a") {
		t.ArchSpecific = true
		rest = rest[:len(rest)-1]
	}
	cc, err := strconv.Atoi(rest)
	if err != nil || cc < 10 || len(rest) < 2 {
		return Target{}, fmt.Errorf("jit: bad architecture %q (want e.g. sm_90a, sm_80 or compute_90)", s)
	}
	t.Major, t.Minor = cc/10, cc%10
	return t, nil
}

// archSpecificFrom is the first NVRTC that knows sm_90a.
const archSpecificFrom = 12

// TargetFor picks the target for a GPU of compute capability major.minor:
//   - 9.0 with an NVRTC that knows sm_90a: sm_90a (the Hopper kernels need it);
//   - an architecture NVRTC lists: a cubin for it;
//   - one NVRTC does not list but of a major it knows (e.g. 8.7 when 8.6 is
//     known): a cubin for the newest listed minor below it, which the GPU runs;
//   - a GPU newer than every listed architecture: PTX (compute_XY) of the
//     newest one, which the driver compiles for the GPU at load time.
//
// It fails for a GPU older than every architecture NVRTC lists.
func TargetFor(major, minor int, n *NVRTC) (Target, error) {
	cc := 10*major + minor
	archs := n.SupportedArchs()
	if len(archs) == 0 || n.Supports(cc) {
		return Target{Major: major, Minor: minor, ArchSpecific: cc == 90 && n.major >= archSpecificFrom}, nil
	}
	best := -1
	for _, a := range archs {
		if a/10 == major && a <= cc {
			best = a
		}
	}
	if best >= 0 {
		return Target{Major: best / 10, Minor: best % 10}, nil
	}
	newest := archs[len(archs)-1]
	if cc > newest {
		return Target{Major: newest / 10, Minor: newest % 10, PTX: true}, nil
	}
	return Target{}, fmt.Errorf("jit: %s knows architectures %v; compute capability %d.%d is too old", n, archs, major, minor)
}
