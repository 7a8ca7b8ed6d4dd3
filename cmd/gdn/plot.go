package main

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The chart of `gdn bench --plot`: one group of bars per case (gdn, then
// each anchor that has a row for the case), with the roofline floor (and,
// for the full forward, the target: 0.8 x the faster of FlashQLA and
// FlashInfer) drawn across the group, on a
// logarithmic time axis: the cases span two orders of magnitude, and a
// ratio reads the same everywhere on a log axis.

// plotSeries is one kind of bar: a label for the legend, a colour, and
// the time it takes from a row (0: no bar).
type plotSeries struct {
	label string
	color color.Color
	ms    func(benchRow) float64
}

// plotSeriesAll lists the bars of a group of a core-forward run, left to
// right. Colours are distinguishable for the common colour-vision
// deficiencies (Okabe-Ito).
var plotSeriesAll = []plotSeries{
	{"gdn (core forward)", color.RGBA{0, 114, 178, 255}, func(r benchRow) float64 { return r.MedianMs }},
	{"FLA core (same work)", color.RGBA{230, 159, 0, 255}, func(r benchRow) float64 { return r.FLACoreMs }},
	{"FlashQLA (full forward)", color.RGBA{0, 158, 115, 255}, func(r benchRow) float64 { return r.FlashQLAMs }},
	{"FlashInfer (full forward)", color.RGBA{204, 121, 167, 255}, func(r benchRow) float64 { return r.FlashInferMs }},
}

// plotSeriesFull lists the bars of a full-forward run: every anchor does
// the same work as gdn there.
var plotSeriesFull = []plotSeries{
	{"gdn (full forward)", color.RGBA{0, 114, 178, 255}, func(r benchRow) float64 { return r.MedianMs }},
	{"FLA full (same work)", color.RGBA{230, 159, 0, 255}, func(r benchRow) float64 { return r.FLAFullMs }},
	{"FlashQLA (full forward)", color.RGBA{0, 158, 115, 255}, func(r benchRow) float64 { return r.FlashQLAMs }},
	{"FlashInfer (full forward)", color.RGBA{204, 121, 167, 255}, func(r benchRow) float64 { return r.FlashInferMs }},
}

// floorColor draws the roofline floor, targetColor the full forward's target.
var (
	floorColor  = color.Black
	targetColor = color.RGBA{213, 94, 0, 255}
)

// writeBenchPlot renders rows as a chart into path; the extension picks
// the format (.svg or .png).
func writeBenchPlot(path string, rows []benchRow) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".svg" && ext != ".png" {
		return fmt.Errorf("--plot %s: want a .svg or .png file name", path)
	}
	p, w, h, err := benchPlot(rows)
	if err != nil {
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	if err := p.Save(w, h, path); err != nil {
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	return nil
}

// benchPlot builds the chart of rows and its size.
func benchPlot(rows []benchRow) (*plot.Plot, vg.Length, vg.Length, error) {
	if len(rows) == 0 {
		return nil, 0, 0, errors.New("no cases to plot")
	}
	full := rows[0].Forward == "full"
	for _, r := range rows {
		if (r.Forward == "full") != full {
			return nil, 0, 0, errors.New("rows of both the core and the full forward: plot one run at a time")
		}
	}
	series, title := plotSeriesAll, "Gated DeltaNet chunked prefill: time per call (lower is better)"
	if full {
		series, title = plotSeriesFull, "Gated DeltaNet full forward (from raw gates): time per call (lower is better)"
	}
	title += "\n" + plotCards(rows)
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(14)
	p.Y.Label.Text = "milliseconds (log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks125{}
	p.Y.Tick.Label.Font.Size = vg.Points(10)
	p.Add(plotGrid{})

	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.Case + "\n" + shortLensText(r.Lens)
	}
	p.NominalX(names...)
	// Horizontal two-line labels: rotated ones ran into the axis in some
	// SVG renderers.
	p.X.Tick.Label.Font.Size = vg.Points(9)

	const groupWidth = 0.8 // of one category's width
	barWidth := groupWidth / float64(len(series))
	for i, s := range series {
		b := &logBars{
			rows:   rows,
			ms:     s.ms,
			color:  s.color,
			offset: -groupWidth/2 + barWidth*(float64(i)+0.5),
			width:  barWidth * 0.9,
		}
		p.Add(b)
		p.Legend.Add(s.label, b)
	}
	fl := &levelMarks{rows: rows, width: groupWidth, ms: func(r benchRow) float64 { return r.FloorMs },
		style: draw.LineStyle{Color: floorColor, Width: vg.Points(2.5)}}
	p.Add(fl)
	p.Legend.Add("roofline floor (790 TFLOP/s, 4.3 TB/s)", fl)
	if full {
		tg := &levelMarks{rows: rows, width: groupWidth, ms: func(r benchRow) float64 { return r.TargetMs },
			style: draw.LineStyle{Color: targetColor, Width: vg.Points(2), Dashes: []vg.Length{vg.Points(5), vg.Points(3)}}}
		p.Add(tg)
		p.Legend.Add("target (0.8 x the faster of FlashQLA and FlashInfer)", tg)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	p.Legend.Padding = vg.Points(2)

	lo, hi := math.Inf(1), 0.0
	for _, r := range rows {
		xs := []float64{r.FloorMs, r.TargetMs}
		for _, s := range series {
			xs = append(xs, s.ms(r))
		}
		for _, x := range xs {
			if x > 0 {
				lo, hi = min(lo, x), max(hi, x)
			}
		}
	}
	// Bars start at the bottom of the axis: put it a little under the
	// smallest value, and leave room above the tallest for the legend.
	p.Y.Min = math.Pow(10, math.Floor(math.Log10(lo/1.5)*4)/4)
	p.Y.Max = hi * 8
	p.X.Min, p.X.Max = -0.6, float64(len(rows))-0.4

	w := vg.Length(max(9, 1.1*float64(len(rows))+1.5)) * vg.Inch
	return p, w, 6 * vg.Inch, nil
}

// shortLensText cuts a lens column ("7000+33+1+...") that would not fit
// under a group to its sequence count and total length.
func shortLensText(lens string) string {
	if len(lens) <= 16 {
		return lens
	}
	total, n := 0, 0
	for _, part := range strings.Split(lens, "+") {
		l, count, _ := strings.Cut(part, "x")
		k, err1 := strconv.Atoi(l)
		c, err2 := strconv.Atoi(count)
		if count == "" {
			c, err2 = 1, nil
		}
		if err1 != nil || err2 != nil {
			return lens[:13] + "..."
		}
		total += k * c
		n += c
	}
	return fmt.Sprintf("%d seqs, %d", n, total)
}

// logBars draws one bar per row from the bottom of the axis up to the
// row's time. gonum's BarChart starts bars at zero, which a log axis
// cannot show.
type logBars struct {
	rows          []benchRow
	ms            func(benchRow) float64
	color         color.Color
	offset, width float64 // in category units
}

// Plot implements plot.Plotter.
func (b *logBars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for i, r := range b.rows {
		v := b.ms(r)
		if v <= 0 {
			continue
		}
		x0 := trX(float64(i) + b.offset - b.width/2)
		x1 := trX(float64(i) + b.offset + b.width/2)
		y0, y1 := trY(p.Y.Min), trY(min(v, p.Y.Max))
		c.FillPolygon(b.color, c.ClipPolygonY([]vg.Point{{X: x0, Y: y0}, {X: x0, Y: y1}, {X: x1, Y: y1}, {X: x1, Y: y0}}))
	}
}

// DataRange implements plot.DataRanger.
func (b *logBars) DataRange() (xmin, xmax, ymin, ymax float64) { return rowsRange(b.rows, b.ms) }

// rowsRange is the data range of one value per row (group i at x = i): the
// positive values' span on y (1 when there is none, for the log scale).
func rowsRange(rows []benchRow, ms func(benchRow) float64) (xmin, xmax, ymin, ymax float64) {
	ymin, ymax = math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		if v := ms(r); v > 0 {
			ymin, ymax = min(ymin, v), max(ymax, v)
		}
	}
	if math.IsInf(ymin, 1) {
		ymin, ymax = 1, 1
	}
	return -0.5, float64(len(rows)) - 0.5, ymin, ymax
}

// Thumbnail implements plot.Thumbnailer (the legend's swatch).
func (b *logBars) Thumbnail(c *draw.Canvas) {
	r := c.Rectangle
	c.FillPolygon(b.color, []vg.Point{r.Min, {X: r.Min.X, Y: r.Max.Y}, r.Max, {X: r.Max.X, Y: r.Min.Y}})
}

// levelMarks draws one time per row (the roofline floor, the target)
// as a line across its group; rows without one (0) get none.
type levelMarks struct {
	rows  []benchRow
	width float64
	ms    func(benchRow) float64
	style draw.LineStyle
}

// Plot implements plot.Plotter.
func (f *levelMarks) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for i, r := range f.rows {
		v := f.ms(r)
		if v <= 0 {
			continue
		}
		y := trY(v)
		c.StrokeLine2(f.style, trX(float64(i)-f.width/2), y, trX(float64(i)+f.width/2), y)
	}
}

// DataRange implements plot.DataRanger.
func (f *levelMarks) DataRange() (xmin, xmax, ymin, ymax float64) { return rowsRange(f.rows, f.ms) }

// Thumbnail implements plot.Thumbnailer.
func (f *levelMarks) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(f.style, c.Min.X, y, c.Max.X, y)
}

// plotGrid draws light horizontal lines at the labelled ticks of the time
// axis, so that a bar can be read against them.
type plotGrid struct{}

// Plot implements plot.Plotter.
func (plotGrid) Plot(c draw.Canvas, p *plot.Plot) {
	_, trY := p.Transforms(&c)
	sty := draw.LineStyle{Color: color.Gray{Y: 215}, Width: vg.Points(0.5)}
	for _, t := range p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max) {
		if t.Label != "" {
			y := trY(t.Value)
			c.StrokeLine2(sty, c.Min.X, y, c.Max.X, y)
		}
	}
}

// logTicks125 labels a log axis at 1, 2 and 5 times each power of ten, with
// unlabelled minor ticks between: pure powers of ten leave too few labels
// over the one or two decades a benchmark spans.
type logTicks125 struct{}

// Ticks implements plot.Ticker.
func (logTicks125) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		base := math.Pow(10, e)
		for m := 1; m < 10; m++ {
			v := base * float64(m)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', 3, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// plotCards says where a chart's bars were timed: gdn's on the GPU its
// run recorded (the CSV's device column), the anchors on the H200
// (docs/BENCH.md), so that a run on another card does not read as an
// H200's.
func plotCards(rows []benchRow) string {
	dev := runDevice(rows)
	if dev == "" {
		dev = "a GPU the results do not name"
	}
	return "gdn on " + dev + "; FLA, FlashQLA and FlashInfer on the H200"
}

// runDevice is the GPU rows were timed on: "" when they do not say (a CSV
// from before the column), "several GPUs" when they differ.
func runDevice(rows []benchRow) string {
	dev := rows[0].Device
	for _, r := range rows[1:] {
		if r.Device != dev {
			return "several GPUs"
		}
	}
	return dev
}
