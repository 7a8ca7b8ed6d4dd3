package gdn

import "sync"

// planKey is a shape class: the fields of a Problem that PlanCore and
// PlanCoreVariant read (TestPlanDependsOnShapeClass checks that nothing else
// changes a plan, so a planner that starts reading another field fails there
// rather than being served stale plans).
type planKey struct {
	dtype, qkDtype Dtype
	qkNorm, fused  bool
	n, hq, hv      int
	longest, total int // chainChunks: the cost model weighs the chains
}

// planCacheLimit bounds a planCache; a full cache is emptied (shape classes
// are few in practice; the bound only stops a caller that sweeps shapes from
// growing it without end).
const planCacheLimit = 1024

// planCache remembers the plans of one device (its SM count) and one
// variant override, per shape class: planning builds the variant's name and
// defines with fmt, which allocates, and Forward must not on a repeated
// call. Safe for concurrent use.
type planCache struct {
	sms     int    // of the device, for PlanCore
	variant string // Options.Variant: "" lets PlanCore choose

	mu    sync.Mutex
	plans map[planKey]Plan
}

func newPlanCache(sms int, variant string) *planCache {
	return &planCache{sms: sms, variant: variant, plans: map[planKey]Plan{}}
}

// plan returns the plan of p, computing it on the first call of its shape
// class. Errors are not cached. The Plan shares its Variant's Defines with
// the cache: callers must not modify them.
func (c *planCache) plan(p Problem) (Plan, error) {
	longest, total := chainChunks(p)
	key := planKey{dtype: p.Dtype, qkDtype: p.QKDtype, qkNorm: p.QKNorm, fused: p.Fused, n: p.N, hq: p.Hq, hv: p.Hv, longest: longest, total: total}
	c.mu.Lock()
	pl, ok := c.plans[key]
	c.mu.Unlock()
	if ok {
		return pl, nil
	}
	var err error
	if c.variant != "" {
		pl, err = PlanCoreVariant(p, c.variant)
	} else {
		// The tile of an unsplit call; callCache.create decides on a split
		// (whose tables depend on the exact boundaries, not the class).
		pl, err = PlanCoreSplit(p, c.sms, -1)
	}
	if err != nil {
		return Plan{}, err
	}
	c.mu.Lock()
	if len(c.plans) >= planCacheLimit {
		clear(c.plans)
	}
	c.plans[key] = pl
	c.mu.Unlock()
	return pl, nil
}
