package hostpath

import (
	"errors"
	"testing"

	"github.com/gdnjit/gdn/driver"
)

// Without a context the staging cache cannot allocate, and says why
// (ErrNoCUDA without the cuda tag).
func TestStagingWithoutContext(t *testing.T) {
	var s staging
	set, err := s.take(nil, 100)
	if set != nil || err == nil || (!cudaBuilt && !errors.Is(err, driver.ErrNoCUDA)) {
		t.Errorf("take without a context: %v, %v", set, err)
	}
	s.free(nil) // nothing kept: must not fail
	if s.idle != nil {
		t.Error("free left a set")
	}
}
