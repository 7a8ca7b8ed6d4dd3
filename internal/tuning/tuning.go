// Package tuning is how the tests and the benchmark tool reach inside a
// Runtime where users do not: the knobs that override the planner's and
// the full forward's choices (Set, before Open), and the Runtime's driver
// context (Context), on which the tools make streams, capture graphs and
// time. Package gdn registers the hooks when it initialises: it imports
// this package, so this one cannot import it.
package tuning

import (
	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/plan"
)

// Knobs are the overrides a Runtime runs with (plan.Knobs documents each);
// the zero value is what users get.
type Knobs = plan.Knobs

// Hooks are package gdn's side of this package.
type Hooks struct {
	// Set stores k in *opts, a *gdn.Options, for gdn.Open to apply.
	Set func(opts any, k Knobs)
	// Context returns the driver context of rt, a *gdn.Runtime.
	Context func(rt any) *driver.Context
}

var hooks Hooks

// Register installs package gdn's hooks (its init calls it).
func Register(h Hooks) { hooks = h }

// Set attaches knobs to opts, a *gdn.Options: a Runtime opened with it
// runs with them. gdn.Open refuses knobs out of range (plan.Knobs.Check).
func Set(opts any, k Knobs) { hooks.Set(opts, k) }

// Context returns the driver context of rt, a *gdn.Runtime. It belongs to
// the Runtime: do not Close it.
func Context(rt any) *driver.Context { return hooks.Context(rt) }
