//go:build cuda

package driver

/*
#include <stdint.h>
#include <string.h>
#include <cuda.h>

static CUresult gdn_begin_capture(CUstream s) {
	return cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
}

// gdn_capture_state is cuStreamIsCapturing's answer, returned by value (a
// Go pointer passed to C would escape: IsCapturing is on Forward's hot path).
typedef struct {
	CUresult r;
	int capturing;
} gdn_capture_state;

static gdn_capture_state gdn_is_capturing(CUstream s) {
	gdn_capture_state c;
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	c.r = cuStreamIsCapturing(s, &st);
	c.capturing = st != CU_STREAM_CAPTURE_STATUS_NONE;
	return c;
}

static CUresult gdn_instantiate(CUgraphExec* e, CUgraph g) {
	return cuGraphInstantiateWithFlags(e, g, 0);
}

static CUresult gdn_node_type(uintptr_t node, int* t) {
	CUgraphNodeType nt;
	CUresult r = cuGraphNodeGetType((CUgraphNode)node, &nt);
	*t = (int)nt;
	return r;
}

static CUresult gdn_exec_set_kernel(CUgraphExec e, uintptr_t node, CUfunction f,
		unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
		unsigned shmem, void** params) {
	CUDA_KERNEL_NODE_PARAMS p;
	memset(&p, 0, sizeof p);
	p.func = f;
	p.gridDimX = gx; p.gridDimY = gy; p.gridDimZ = gz;
	p.blockDimX = bx; p.blockDimY = by; p.blockDimZ = bz;
	p.sharedMemBytes = shmem;
	p.kernelParams = params;
	return cuGraphExecKernelNodeSetParams(e, (CUgraphNode)node, &p);
}
*/
import "C"

import (
	"errors"
	"sync"
	"sync/atomic"
	"unsafe"
)

var (
	errNilGraph       = errors.New("driver: nil *Graph")
	errDestroyedGraph = errors.New("driver: Graph is destroyed")
	errNilExec        = errors.New("driver: nil *GraphExec")
	errDestroyedExec  = errors.New("driver: GraphExec is destroyed")
)

// BeginCapture starts capturing the work queued on s into a graph
// (cuStreamBeginCapture, CU_STREAM_CAPTURE_MODE_RELAXED: other goroutines
// may keep using the context meanwhile). The legacy default stream cannot be
// captured. Work queued on s until EndCapture is recorded, not run.
func (s *Stream) BeginCapture() error {
	if err := s.usable(); err != nil {
		return err
	}
	h := rawStream(s.cs)
	return s.ctx.do(func() error { return check("cuStreamBeginCapture", C.gdn_begin_capture(h)) })
}

// IsCapturing reports whether s is being captured into a graph
// (cuStreamIsCapturing), by this package or by whoever owns the stream.
func (s *Stream) IsCapturing() (bool, error) {
	if err := s.usable(); err != nil {
		return false, err
	}
	h := rawStream(s.cs)
	capturing := false
	err := s.ctx.do(func() error {
		st := C.gdn_is_capturing(h)
		capturing = st.capturing != 0
		return check("cuStreamIsCapturing", st.r)
	})
	return capturing, err
}

// EndCapture ends the capture begun by BeginCapture and returns the graph
// (cuStreamEndCapture).
func (s *Stream) EndCapture() (*Graph, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	g := &Graph{ctx: s.ctx}
	h := rawStream(s.cs)
	err := s.ctx.do(func() error { return check("cuStreamEndCapture", C.cuStreamEndCapture(h, &g.raw)) })
	if err != nil {
		return nil, err
	}
	return g, nil
}

// Graph is a captured CUDA graph, safe for concurrent use: the driver does
// not synchronise calls on one graph object, so its calls here hold mu.
type Graph struct {
	ctx       *Context
	raw       C.CUgraph
	mu        sync.Mutex
	destroyed atomic.Bool
}

func (g *Graph) usable() error {
	if g == nil {
		return errNilGraph
	}
	if g.ctx == nil {
		return errors.New("driver: Graph not made by Stream.EndCapture")
	}
	if g.destroyed.Load() {
		return errDestroyedGraph
	}
	return nil
}

// Instantiate makes an executable graph (cuGraphInstantiateWithFlags, no
// flags). The Graph may be destroyed afterwards unless its nodes are still
// needed for GraphExec.SetKernelNodeArgs.
func (g *Graph) Instantiate() (*GraphExec, error) {
	if err := g.usable(); err != nil {
		return nil, err
	}
	e := &GraphExec{ctx: g.ctx}
	g.mu.Lock()
	defer g.mu.Unlock()
	err := g.ctx.do(func() error { return check("cuGraphInstantiateWithFlags", C.gdn_instantiate(&e.raw, g.raw)) })
	if err != nil {
		return nil, err
	}
	return e, nil
}

// KernelNodes returns the kernel nodes of g, in the order cuGraphGetNodes
// lists them (for a captured single stream, the order of the launches).
func (g *Graph) KernelNodes() ([]GraphNode, error) {
	if err := g.usable(); err != nil {
		return nil, err
	}
	var out []GraphNode
	g.mu.Lock()
	defer g.mu.Unlock()
	err := g.ctx.do(func() error {
		var n C.size_t
		if err := check("cuGraphGetNodes", C.cuGraphGetNodes(g.raw, nil, &n)); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		nodes := make([]C.CUgraphNode, int(n))
		if err := check("cuGraphGetNodes", C.cuGraphGetNodes(g.raw, &nodes[0], &n)); err != nil {
			return err
		}
		for _, nd := range nodes[:int(n)] {
			h := uintptr(unsafe.Pointer(nd))
			var t C.int
			if err := check("cuGraphNodeGetType", C.gdn_node_type(C.uintptr_t(h), &t)); err != nil {
				return err
			}
			if t == C.CU_GRAPH_NODE_TYPE_KERNEL {
				out = append(out, GraphNode{h: h})
			}
		}
		return nil
	})
	return out, err
}

// Handle returns the raw CUgraph.
func (g *Graph) Handle() uintptr {
	if g == nil {
		return 0
	}
	return uintptr(unsafe.Pointer(g.raw))
}

// Destroy destroys the graph (cuGraphDestroy); execs made from it remain
// valid. A second call does nothing.
func (g *Graph) Destroy() error {
	if g == nil {
		return errNilGraph
	}
	if g.ctx == nil || g.destroyed.Swap(true) {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ctx.do(func() error { return check("cuGraphDestroy", C.cuGraphDestroy(g.raw)) })
}

// GraphExec is an instantiated graph. Launch and SetKernelNodeArgs may be
// called from any goroutine: the driver does not synchronise calls on one
// exec, so they hold mu here (an update still races with a concurrent
// launch in the order the two take it).
type GraphExec struct {
	ctx       *Context
	raw       C.CUgraphExec
	mu        sync.Mutex
	destroyed atomic.Bool
}

func (e *GraphExec) usable() error {
	if e == nil {
		return errNilExec
	}
	if e.ctx == nil {
		return errors.New("driver: GraphExec not made by Graph.Instantiate")
	}
	if e.destroyed.Load() {
		return errDestroyedExec
	}
	return nil
}

// Launch replays the graph on s (nil: the legacy default stream)
// (cuGraphLaunch).
func (e *GraphExec) Launch(s *Stream) error {
	if err := e.usable(); err != nil {
		return err
	}
	st, err := e.ctx.streamOf(s)
	if err != nil {
		return err
	}
	h := rawStream(st)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ctx.do(func() error { return check("cuGraphLaunch", C.cuGraphLaunch(e.raw, h)) })
}

// SetKernelNodeArgs replaces the function, shape, dynamic shared memory and
// arguments of kernel node n (from the Graph e was instantiated from, which
// must not be destroyed) for later launches of e
// (cuGraphExecKernelNodeSetParams). f must belong to the same context.
func (e *GraphExec) SetKernelNodeArgs(n GraphNode, f *Function, grid, block Dim3, sharedBytes int, args *Args) error {
	if err := e.usable(); err != nil {
		return err
	}
	if err := f.usable(); err != nil {
		return err
	}
	if n.h == 0 {
		return errors.New("driver: SetKernelNodeArgs: zero GraphNode")
	}
	if f.mod.ctx.raw != e.ctx.raw {
		return errors.New("driver: SetKernelNodeArgs: Function belongs to another context")
	}
	if err := checkLaunchShape("SetKernelNodeArgs", grid, block, sharedBytes); err != nil {
		return err
	}
	mem, params, err := cParams(args)
	if err != nil {
		return err
	}
	defer cFree(mem)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ctx.do(func() error {
		return check("cuGraphExecKernelNodeSetParams", C.gdn_exec_set_kernel(e.raw, C.uintptr_t(n.h), f.raw,
			C.uint(grid.X), C.uint(grid.Y), C.uint(grid.Z),
			C.uint(block.X), C.uint(block.Y), C.uint(block.Z),
			C.uint(sharedBytes), params))
	})
}

// Handle returns the raw CUgraphExec.
func (e *GraphExec) Handle() uintptr {
	if e == nil {
		return 0
	}
	return uintptr(unsafe.Pointer(e.raw))
}

// Destroy destroys the exec (cuGraphExecDestroy); a launch still in flight
// completes first (the driver frees it afterwards). A second call does
// nothing.
func (e *GraphExec) Destroy() error {
	if e == nil {
		return errNilExec
	}
	if e.ctx == nil || e.destroyed.Swap(true) {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ctx.do(func() error { return check("cuGraphExecDestroy", C.cuGraphExecDestroy(e.raw)) })
}
