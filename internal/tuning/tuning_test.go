package tuning

import (
	"testing"

	"github.com/gdnjit/gdn/driver"
)

// Set and Context reach whatever package gdn registered.
func TestHooks(t *testing.T) {
	type options struct{ knobs Knobs }
	var ctx driver.Context
	Register(Hooks{
		Set:     func(o any, k Knobs) { o.(*options).knobs = k },
		Context: func(any) *driver.Context { return &ctx },
	})
	var o options
	Set(&o, Knobs{Variant: "v", SegmentChunks: -1})
	if o.knobs.Variant != "v" || o.knobs.SegmentChunks != -1 {
		t.Errorf("Set: %+v", o.knobs)
	}
	if Context(nil) != &ctx {
		t.Error("Context: not the registered one")
	}
}
