package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/kernsrc"
	"github.com/gdnjit/gdn/ref"
)

// shapeSyntax documents what --shapes and --shapes-file accept.
const shapeSyntax = `a shape is a benchmark case name (e.g. tp8_32k) or key=value pairs joined
by commas: Hq and Hv (head counts), then T (tokens per sequence) with
optional B (sequences, default 1), or lens (packed sequences: 4096x8, or
7000+33+1). --shapes takes shapes separated by ';', --shapes-file one per
line ('#' starts a comment).`

// parseShape reads one shape into a validated-size problem (no buffers).
func parseShape(s string) (problem.Problem, error) {
	s = strings.TrimSpace(s)
	if c, ok := ref.CaseByName(s); ok {
		sh := c.Shape()
		return problem.Problem{B: sh.B, T: sh.T, Hq: sh.Hq, Hv: sh.Hv, N: sh.N(), Seqs: sh.CuSeqlens}, nil
	}
	p := problem.Problem{B: 1}
	var lens []int
	for _, kv := range strings.Split(s, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return p, fmt.Errorf("shape %q: %q is not key=value (%s)", s, kv, "or a case name")
		}
		key = strings.TrimSpace(key)
		val = strings.TrimSpace(val)
		if key == "lens" {
			var err error
			if lens, err = parseLens(val); err != nil {
				return p, fmt.Errorf("shape %q: %w", s, err)
			}
			continue
		}
		n, err := strconv.Atoi(val)
		if err != nil || n < 1 {
			return p, fmt.Errorf("shape %q: %s=%q is not a positive integer", s, key, val)
		}
		switch key {
		case "B":
			p.B = n
		case "T":
			p.T = n
		case "Hq":
			p.Hq = n
		case "Hv":
			p.Hv = n
		default:
			return p, fmt.Errorf("shape %q: unknown key %q (want B, T, Hq, Hv or lens)", s, key)
		}
	}
	switch {
	case p.Hq == 0 || p.Hv == 0:
		return p, fmt.Errorf("shape %q: Hq and Hv are required", s)
	case p.Hv%p.Hq != 0:
		return p, fmt.Errorf("shape %q: Hv = %d is not a multiple of Hq = %d", s, p.Hv, p.Hq)
	case lens != nil && (p.T != 0 || p.B != 1):
		return p, fmt.Errorf("shape %q: give lens or T (and B), not both", s)
	case lens == nil && p.T == 0:
		return p, fmt.Errorf("shape %q: T or lens is required", s)
	}
	p.N = p.B
	if lens != nil {
		cu := []int{0}
		for _, l := range lens {
			cu = append(cu, cu[len(cu)-1]+l)
		}
		p.T, p.N, p.Seqs = cu[len(cu)-1], len(lens), cu
	}
	return p, nil
}

// maxLensSeqs is the most sequences one call runs (gdn's grid y limit);
// bounding the count also keeps "1x99999999999" from asking for memory.
const maxLensSeqs = 65535

// parseLens reads "4096x8" (8 sequences of 4096) or "7000+33+1": at most
// 65535 sequences, each of 0 to 2^31-1 tokens.
func parseLens(s string) ([]int, error) {
	if n, count, ok := strings.Cut(s, "x"); ok {
		l, err1 := strconv.Atoi(n)
		c, err2 := strconv.Atoi(count)
		if err1 != nil || err2 != nil || l < 0 || l > math.MaxInt32 || c < 1 || c > maxLensSeqs {
			return nil, fmt.Errorf("lens %q: want LENxCOUNT with LEN from 0 to %d and COUNT from 1 to %d", s, math.MaxInt32, maxLensSeqs)
		}
		out := make([]int, c)
		for i := range out {
			out[i] = l
		}
		return out, nil
	}
	parts := strings.Split(s, "+")
	if len(parts) > maxLensSeqs {
		return nil, fmt.Errorf("lens %q: %d sequences, at most %d", s, len(parts), maxLensSeqs)
	}
	var out []int
	for _, part := range parts {
		l, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || l < 0 || l > math.MaxInt32 {
			return nil, fmt.Errorf("lens %q: %q is not a length (0 to %d)", s, part, math.MaxInt32)
		}
		out = append(out, l)
	}
	return out, nil
}

// readShapes collects the shapes of --shapes and --shapes-file.
func readShapes(list, file string) ([]problem.Problem, error) {
	var texts []string
	for _, s := range strings.Split(list, ";") {
		if strings.TrimSpace(s) != "" {
			texts = append(texts, s)
		}
	}
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("--shapes-file: %w", err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line, _, _ := strings.Cut(sc.Text(), "#")
			if strings.TrimSpace(line) != "" {
				texts = append(texts, line)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("--shapes-file: %w", err)
		}
	}
	var out []problem.Problem
	for _, t := range texts {
		p, err := parseShape(t)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// variantsForShapes returns, without repeats, the variants the runtime would
// run each shape and dtype with on a device with sms multiprocessors
// (plan.Kernels: a split plan's transfer pass and scan too; with full,
// the full forward's kernels as well).
func variantsForShapes(shapes []problem.Problem, dtypes []gdn.Dtype, sms int, full bool) ([]kernsrc.Variant, error) {
	var out []kernsrc.Variant
	seen := map[string]bool{}
	for _, p := range shapes {
		for _, dt := range dtypes {
			p.Dtype = dt
			vs, err := plan.Kernels(p, sms, full)
			if err != nil {
				return nil, err
			}
			for _, v := range vs {
				if !seen[v.Name] {
					seen[v.Name] = true
					out = append(out, v)
				}
			}
		}
	}
	return out, nil
}

// parseDtypes reads a comma-separated list of bf16 and fp16.
func parseDtypes(list string) ([]gdn.Dtype, error) {
	var out []gdn.Dtype
	for _, s := range strings.Split(list, ",") {
		dt, err := parseDataDtype("--dtypes", strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		out = append(out, dt)
	}
	return out, nil
}
