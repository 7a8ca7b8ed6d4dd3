package plan

import (
	"sync"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/problem"
)

// cacheKey is a shape class: the fields of a Problem that Tile reads
// (TestPlanDependsOnShapeClass checks that nothing else changes a plan, so
// a planner that starts reading another field fails there rather than
// being served stale plans).
type cacheKey struct {
	dtype, qkDtype dtype.Dtype
	qkNorm, fused  bool
	n, hq, hv      int
	longest, total int // ChainChunks: the cost model weighs the chains
}

// cacheLimit bounds a Cache; a full cache is emptied (shape classes are
// few in practice; the bound only stops a caller that sweeps shapes from
// growing it without end).
const cacheLimit = 1024

// Cache remembers the unsplit plans (Tile) of one device (its SM count)
// and one forced variant, per shape class: planning builds the variant's
// name and defines with fmt, which allocates, and Forward must not on a
// repeated call. Safe for concurrent use.
type Cache struct {
	sms     int    // of the device
	variant string // Knobs.Variant: "" lets the cost model choose

	mu    sync.Mutex
	plans map[cacheKey]Plan
}

// NewCache returns an empty cache for a device of sms SMs and a forced
// variant ("" for none).
func NewCache(sms int, variant string) *Cache {
	return &Cache{sms: sms, variant: variant, plans: map[cacheKey]Plan{}}
}

// Tile returns the unsplit plan of p, computing it on the first call of its
// shape class. Errors are not cached. The Plan shares its Variant's Defines
// with the cache: callers must not modify them.
func (c *Cache) Tile(p problem.Problem) (Plan, error) {
	longest, total := ChainChunks(p)
	key := cacheKey{dtype: p.Dtype, qkDtype: p.QKDtype, qkNorm: p.QKNorm, fused: p.Fused, n: p.N, hq: p.Hq, hv: p.Hv, longest: longest, total: total}
	c.mu.Lock()
	pl, ok := c.plans[key]
	c.mu.Unlock()
	if ok {
		return pl, nil
	}
	// The tile of an unsplit call; the caller decides on a split (whose
	// tables depend on the exact boundaries, not the class).
	pl, err := Tile(p, c.sms, c.variant)
	if err != nil {
		return Plan{}, err
	}
	c.mu.Lock()
	if len(c.plans) >= cacheLimit {
		clear(c.plans)
	}
	c.plans[key] = pl
	c.mu.Unlock()
	return pl, nil
}
