package jit

import "testing"

func TestTargetString(t *testing.T) {
	for _, tc := range []struct {
		t    Target
		want string
	}{
		{Target{Major: 9, Minor: 0, ArchSpecific: true}, "sm_90a"},
		{Target{Major: 8, Minor: 6}, "sm_86"},
		{Target{Major: 9, Minor: 0, PTX: true}, "compute_90"},
		{Target{Major: 10, Minor: 0}, "sm_100"},
	} {
		if got := tc.t.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.t, got, tc.want)
		}
		back, err := ParseTarget(tc.want)
		if err != nil || back != tc.t {
			t.Errorf("ParseTarget(%q) = %+v, %v; want %+v", tc.want, back, err, tc.t)
		}
	}
	if tg, err := ParseTarget("90a"); err != nil || tg.String() != "sm_90a" {
		t.Errorf("ParseTarget(90a) = %v, %v", tg, err)
	}
	for _, bad := range []string{"", "sm_", "sm_9", "sm_x0", "hopper", "compute_"} {
		if _, err := ParseTarget(bad); err == nil {
			t.Errorf("ParseTarget(%q) succeeded", bad)
		}
	}
}

func TestTargetFor(t *testing.T) {
	n124 := &NVRTC{major: 12, minor: 4, archs: []int{50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90}}
	n118 := &NVRTC{major: 11, minor: 8, archs: []int{35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90}}
	for _, tc := range []struct {
		n            *NVRTC
		major, minor int
		want         string
	}{
		{n124, 9, 0, "sm_90a"},      // H100/H200: Hopper kernels need the 'a'
		{n118, 9, 0, "sm_90"},       // NVRTC 11.8 knows sm_90 but not sm_90a
		{n124, 8, 0, "sm_80"},       // A100
		{n124, 8, 9, "sm_89"},       // L40
		{n124, 10, 0, "compute_90"}, // B200 is newer than NVRTC 12.4: PTX
		{n124, 12, 0, "compute_90"},
		{&NVRTC{major: 12, minor: 4, archs: []int{80, 86, 90}}, 8, 9, "sm_86"}, // same major, older minor runs
	} {
		got, err := TargetFor(tc.major, tc.minor, tc.n)
		if err != nil || got.String() != tc.want {
			t.Errorf("TargetFor(%d.%d, NVRTC %d.%d) = %v, %v; want %s", tc.major, tc.minor, tc.n.major, tc.n.minor, got, err, tc.want)
		}
	}
	if _, err := TargetFor(3, 0, n124); err == nil {
		t.Error("TargetFor(3.0) succeeded with NVRTC 12.4")
	}
}
