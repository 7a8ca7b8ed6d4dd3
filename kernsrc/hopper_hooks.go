package kernsrc

import (
	"fmt"
	"strings"
)

// HopperHooks are the test switches of the Hopper core forward
// (hopper_hooks.cu): builds for the GPU tests, never the library's.
type HopperHooks struct {
	// WalkToEnd builds the transfer pass without its early exit: every
	// segment walked to its end, the values the exit must leave unchanged.
	WalkToEnd bool
	// DelayEarlyPass makes the CTAs of an early pass (HopperFlagEarlyPass)
	// wait about a millisecond before their work.
	DelayEarlyPass bool
}

// HopperHooked returns v built with the hooks' switches turned, named
// apart; v itself when it is not a Hopper variant or no hook is set.
func HopperHooked(v Variant, h HopperHooks) Variant {
	cfg, ok := strings.CutPrefix(v.Kernel, HopperKernel+"<")
	if !ok || v.File != "gdn_hopper.cu" || h == (HopperHooks{}) {
		return v
	}
	cfg = strings.TrimSuffix(cfg, ">")
	name := v.Name
	if h.WalkToEnd {
		cfg, name = "WalkToEnd<"+cfg+">", name+"_walk"
	}
	if h.DelayEarlyPass {
		cfg, name = "DelayEarlyPass<"+cfg+">", name+"_delayed"
	}
	v.Name, v.File, v.Kernel = name, "hopper_hooks.cu", fmt.Sprintf("%s<%s>", HopperKernel, cfg)
	v.Defines = append([]string(nil), v.Defines...)
	return v
}
