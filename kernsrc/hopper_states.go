package kernsrc

import "fmt"

// The states variants of the Hopper core forward: each core-forward
// variant has a twin (HopperCfg.States) that also reads and writes the
// caller's states in the serving layer's formats (a pool through its slot
// table, [V,K], a bf16 pool: HopperStateFlags) and keeps checkpoints (but
// the fused ones, whose consumers have no registers to spare for them). The
// launch layer runs a call's twin only where the call needs it, so calls
// without those arguments run kernels with none of that code.

// HopperStatesVariant returns the states variant (HopperCfg.States) of a
// core-forward Hopper variant: the same kernel, launched the same way,
// that also reads and writes the caller's states in the serving layer's
// formats. A states variant is its own.
func HopperStatesVariant(v Variant) (Variant, error) {
	c, ok := HopperCfgOfVariant(v)
	if !ok || c.Transfer {
		return Variant{}, fmt.Errorf("kernsrc: %s is not a core-forward Hopper variant", v.Name)
	}
	if c.States {
		return v, nil
	}
	c.States = true
	return c.Variant(v.Name + "_states"), nil
}

// HopperStatesVariants lists the states variant of every core-forward
// Hopper variant.
func HopperStatesVariants() []Variant {
	var out []Variant
	for _, v := range HopperVariants() {
		if sv, err := HopperStatesVariant(v); err == nil {
			out = append(out, sv)
		}
	}
	return out
}
