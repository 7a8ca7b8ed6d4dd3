package gdn

import "testing"

// Download and Free of nil and zero uploads are errors or no-ops, not
// panics.
func TestUploadNilAndZero(t *testing.T) {
	for _, d := range []*DeviceCoreArgs{nil, {}} {
		if _, err := d.Download(); err == nil {
			t.Errorf("Download of %v: no error", d)
		}
		if err := d.Free(); err != nil {
			t.Errorf("Free of %v: %v", d, err)
		}
	}
	for _, d := range []*DeviceFullArgs{nil, {}} {
		if _, err := d.Download(); err == nil {
			t.Errorf("Download of %v: no error", d)
		}
		if err := d.Free(); err != nil {
			t.Errorf("Free of %v: %v", d, err)
		}
	}
}
