package gdn

import (
	"errors"
	"strings"
	"testing"
)

func TestKernelTarget(t *testing.T) {
	for _, c := range []struct {
		arch, want string
		note       bool
	}{
		{"sm_90a", "sm_90a", false},
		{"90a", "sm_90a", false},
		{"sm_90", "sm_90a", true},
		{"90", "sm_90a", true},
	} {
		tg, note, err := KernelTarget(c.arch)
		if err != nil || tg.String() != c.want || (note != "") != c.note {
			t.Errorf("KernelTarget(%q) = %v, %q, %v; want %s, note %v", c.arch, tg, note, err, c.want, c.note)
		}
		if c.note && (!strings.Contains(note, "wgmma") || strings.Contains(note, "\n")) {
			t.Errorf("KernelTarget(%q) note %q: want one line that names wgmma", c.arch, note)
		}
	}
	for _, arch := range []string{"sm_75", "sm_80", "sm_89", "sm_100a", "compute_90", "compute_90a", "sm_200"} {
		_, _, err := KernelTarget(arch)
		if !errors.Is(err, ErrUnsupportedGPU) {
			t.Errorf("KernelTarget(%q): err %v, want ErrUnsupportedGPU", arch, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, arch) || !strings.Contains(msg, "need sm_90a") || strings.ContainsAny(msg, "\n\x00") {
			t.Errorf("KernelTarget(%q): %q, want one line naming %s and sm_90a", arch, msg, arch)
		}
	}
	if _, _, err := KernelTarget("hopper"); err == nil || !strings.Contains(err.Error(), "hopper") {
		t.Errorf("KernelTarget(hopper): %v", err)
	}
}

func TestCheckDevice(t *testing.T) {
	if err := CheckDevice(DeviceInfo{Name: "NVIDIA H200", Major: 9}); err != nil {
		t.Errorf("H200: %v", err)
	}
	for _, d := range []DeviceInfo{
		{Ordinal: 1, Name: "NVIDIA A100-SXM4-80GB", Major: 8},
		{Name: "NVIDIA GeForce RTX 4090", Major: 8, Minor: 9},
		{Name: "NVIDIA B200", Major: 10},
	} {
		err := CheckDevice(d)
		if !errors.Is(err, ErrUnsupportedGPU) || !strings.Contains(err.Error(), d.Name) ||
			!strings.Contains(err.Error(), "need sm_90a") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line wrapping ErrUnsupportedGPU", d.Name, err)
		}
	}
}
