package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
)

// benchRow is one case of a benchmark run as `gdn bench --csv` writes it:
// what the chart (--plot) and the comparison (--compare) need. Both work
// from these rows, so they run the same on a live run and on a saved CSV,
// with or without a GPU.
type benchRow struct {
	Case, Lens   string
	Hq, Hv       int
	Forward      string // "core" or "full" (ForwardFull); "core" in CSVs from before --full
	L2Norm       string // full rows: "true" (q and k normalised inside) or "false"; "" for core rows
	MedianMs     float64
	FloorMs      float64
	FLACoreMs    float64 // 0: no anchor row
	FLAFullMs    float64 // full forward, measured; 0: no anchor row
	FlashQLAMs   float64 // full forward, 0: no anchor row
	FlashInferMs float64 // full forward, 0: no anchor row
	TargetMs     float64 // the target (0.8 x the faster of FlashQLA and FlashInfer), full-forward rows only; 0: none
	Device       string  // the GPU gdn ran on; "" in CSVs from before the column
}

// benchRowsOf turns results into rows through the CSV writer, so that a
// live run and a saved CSV give the same rows.
func benchRowsOf(results []benchResult) ([]benchRow, error) {
	var b bytes.Buffer
	if err := writeBenchCSV(&b, results); err != nil {
		return nil, err
	}
	return readBenchCSV(&b, "this run")
}

// readBenchCSVFile reads the rows of a CSV that `gdn bench --csv` wrote.
func readBenchCSVFile(path string) ([]benchRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readBenchCSV(f, path)
}

// readBenchCSV reads rows by column name (so columns may move between
// versions of the tool); name labels errors. Empty anchor cells read as 0.
func readBenchCSV(r io.Reader, name string) ([]benchRow, error) {
	cr := csv.NewReader(r)
	head, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: empty file, want a CSV from gdn bench --csv", name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	for _, c := range []string{"case", "hq", "hv", "lens", "median_ms", "floor_ms"} {
		if _, ok := col[c]; !ok {
			return nil, fmt.Errorf("%s: no column %q (is it a CSV from gdn bench --csv?)", name, c)
		}
	}
	var rows []benchRow
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		line, _ := cr.FieldPos(0)
		cell := func(c string) string {
			if i, ok := col[c]; ok && i < len(rec) {
				return rec[i]
			}
			return ""
		}
		var bad error
		num := func(c string, required bool) float64 {
			s := cell(c)
			if s == "" && !required {
				return 0
			}
			x, err := strconv.ParseFloat(s, 64)
			// NaN and the infinities parse; a time or anchor that is one is
			// a broken file, not a number to divide by.
			if err == nil && (math.IsNaN(x) || math.IsInf(x, 0) || x < 0 || (required && x == 0)) {
				err = errors.New("want a positive number")
			}
			if err != nil && bad == nil {
				bad = fmt.Errorf("%s line %d: %s %q: %w", name, line, c, s, err)
			}
			return x
		}
		integer := func(c string) int {
			n, err := strconv.Atoi(cell(c))
			if (err != nil || n < 1) && bad == nil {
				bad = fmt.Errorf("%s line %d: %s %q: want a positive integer", name, line, c, cell(c))
			}
			return n
		}
		row := benchRow{
			Case: cell("case"), Lens: cell("lens"), Hq: integer("hq"), Hv: integer("hv"), Forward: cell("forward"), L2Norm: cell("l2norm"),
			MedianMs: num("median_ms", true), FloorMs: num("floor_ms", true),
			FLACoreMs: num("fla_core_ms", false), FLAFullMs: num("fla_full_ms", false), FlashQLAMs: num("flashqla_fwd_ms", false),
			FlashInferMs: num("flashinfer_fwd_ms", false), TargetMs: num("target_ms", false), Device: cell("device"),
		}
		if bad != nil {
			return nil, bad
		}
		switch row.Forward {
		case "":
			row.Forward = "core" // written before gdn bench had --full
		case "core", "full":
		default:
			return nil, fmt.Errorf("%s line %d: forward %q: want core or full", name, line, row.Forward)
		}
		if row.Case == "" {
			return nil, fmt.Errorf("%s line %d: empty case name", name, line)
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no rows", name)
	}
	return rows, nil
}
