package target

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/gdnerr"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		arch, want string
		note       bool
	}{
		{"sm_90a", "sm_90a", false},
		{"90a", "sm_90a", false},
		{"sm_90", "sm_90a", true},
		{"90", "sm_90a", true},
	} {
		tg, note, err := Parse(c.arch)
		if err != nil || tg.String() != c.want || (note != "") != c.note {
			t.Errorf("Parse(%q) = %v, %q, %v; want %s, note %v", c.arch, tg, note, err, c.want, c.note)
		}
		if c.note && (!strings.Contains(note, "wgmma") || strings.Contains(note, "\n")) {
			t.Errorf("Parse(%q) note %q: want one line that names wgmma", c.arch, note)
		}
	}
	for _, arch := range []string{"sm_75", "sm_80", "sm_89", "sm_100a", "compute_90", "compute_90a", "sm_200"} {
		_, _, err := Parse(arch)
		if !errors.Is(err, gdnerr.ErrUnsupportedGPU) {
			t.Errorf("Parse(%q): err %v, want gdnerr.ErrUnsupportedGPU", arch, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, arch) || !strings.Contains(msg, "need sm_90a") || strings.ContainsAny(msg, "\n\x00") {
			t.Errorf("Parse(%q): %q, want one line naming %s and sm_90a", arch, msg, arch)
		}
	}
	if _, _, err := Parse("hopper"); err == nil || !strings.Contains(err.Error(), "hopper") {
		t.Errorf("Parse(hopper): %v", err)
	}
}

func TestCheckDevice(t *testing.T) {
	if err := CheckDevice(driver.DeviceInfo{Name: "NVIDIA H200", Major: 9}); err != nil {
		t.Errorf("H200: %v", err)
	}
	for _, d := range []driver.DeviceInfo{
		{Ordinal: 1, Name: "NVIDIA A100-SXM4-80GB", Major: 8},
		{Name: "NVIDIA GeForce RTX 4090", Major: 8, Minor: 9},
		{Name: "NVIDIA B200", Major: 10},
	} {
		err := CheckDevice(d)
		if !errors.Is(err, gdnerr.ErrUnsupportedGPU) || !strings.Contains(err.Error(), d.Name) ||
			!strings.Contains(err.Error(), "need sm_90a") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line wrapping gdnerr.ErrUnsupportedGPU", d.Name, err)
		}
	}
}

// The kernels are written for sm_90a (Hopper): Parse reads a target as a
// command line gives it, and refuses any other in one line.
func ExampleParse() {
	t, note, _ := Parse("sm_90")
	fmt.Println(t, "-", note)
	_, _, err := Parse("sm_80")
	fmt.Println(err)
	// Output:
	// sm_90a - sm_90 taken as sm_90a: the kernels use wgmma and TMA instructions, which only arch-specific sm_90a code contains
	// gdn: sm_80: unsupported GPU: the kernels need sm_90a (compute capability 9.0: H100, H200, H20, GH200 or a MIG slice of one)
}
