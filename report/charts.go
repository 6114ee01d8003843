package report

import (
	"bytes"
	"image/color"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/tandemdb/tandem/store"
)

// Charts are drawn with gonum.org/v1/plot: a maintained pure-Go plotting
// library whose SVG backend writes plain SVG (no script, no web font, no
// network), so a chart goes inline into the HTML report as is, and its
// image backend writes the same chart as PNG for --charts.

// Chart is one drawn chart.
type Chart struct {
	// Name is a file name stem ("qps-over-time"); Title what it shows.
	Name, Title string
	plot        *plot.Plot
}

// Size of every chart.
const (
	chartW = 7.5 * vg.Inch
	chartH = 3.6 * vg.Inch
)

// SVG renders the chart as SVG.
func (c *Chart) SVG() ([]byte, error) { return c.render("svg") }

// PNG renders the chart as PNG.
func (c *Chart) PNG() ([]byte, error) { return c.render("png") }

func (c *Chart) render(format string) ([]byte, error) {
	wt, err := c.plot.WriterTo(chartW, chartH, format)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

// line adds one series, with its own color and dashes, to p.
func line(p *plot.Plot, i int, name string, xys plotter.XYs, points bool) error {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	l.Color = plotutil.Color(i)
	l.Width = vg.Points(1.5)
	l.Dashes = plotutil.Dashes(i)
	p.Add(l)
	p.Legend.Add(name, l)
	if points {
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return err
		}
		s.Color = plotutil.Color(i)
		s.Shape = plotutil.Shape(i)
		p.Add(s)
	}
	return nil
}

// Charts returns the report's charts: for a replay, QPS and p95 over time
// and the latency distribution per target, top digests' p95 ratio to the
// baseline, the footprint; for a sweep, QPS and p95 against threads (log2
// axis) and the footprint of its last point.
func (rep *Report) Charts() ([]*Chart, error) {
	var out []*Chart
	add := func(c *Chart, err error) error {
		if err != nil {
			return err
		}
		if c != nil {
			out = append(out, c)
		}
		return nil
	}
	if rep.Command == "sweep" {
		for _, f := range []func() (*Chart, error){
			func() (*Chart, error) {
				return rep.sweepChart("sweep-qps", "Queries per second against threads", "queries/s", func(t *Target) float64 { return t.QPS })
			},
			func() (*Chart, error) {
				return rep.sweepChart("sweep-p95", "p95 latency against threads", "p95 latency (ms)", func(t *Target) float64 { return t.Latency.P95 })
			},
		} {
			if err := add(f()); err != nil {
				return nil, err
			}
		}
		if len(rep.Points) > 0 {
			if err := add(footprintChart(&rep.Points[len(rep.Points)-1], rep.Baseline)); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if len(rep.Points) == 0 {
		return nil, nil
	}
	pt := &rep.Points[0]
	for _, f := range []func() (*Chart, error){
		func() (*Chart, error) {
			return overTime(pt, "qps-over-time", "Queries per second over time", "queries/s", func(iv Interval) float64 { return iv.QPS })
		},
		func() (*Chart, error) {
			return overTime(pt, "p95-over-time", "p95 latency over time", "p95 latency (ms)", func(iv Interval) float64 { return iv.P95 })
		},
		func() (*Chart, error) { return latencyCDF(pt) },
		func() (*Chart, error) { return digestRatios(pt, rep.Baseline) },
		func() (*Chart, error) { return footprintChart(pt, rep.Baseline) },
	} {
		if err := add(f()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func overTime(pt *Point, name, title, y string, v func(Interval) float64) (*Chart, error) {
	p := newPlot(title, "seconds since the start", y)
	n := 0
	for i, t := range pt.Targets {
		if len(t.Intervals) == 0 {
			continue
		}
		ivs := wholeIntervals(t.Intervals)
		xys := make(plotter.XYs, len(ivs))
		for k, iv := range ivs {
			xys[k] = plotter.XY{X: iv.Start + iv.Length, Y: v(iv)}
		}
		if err := line(p, i, t.Name, xys, false); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, nil
	}
	p.Y.Min = 0
	p.Y.Max *= 1.3 // room above the lines for the legend
	return &Chart{Name: name, Title: title, plot: p}, nil
}

// wholeIntervals leaves out a last interval shorter than half the others
// (the run ended in it): its rate over a sliver of time is noise, drawn as
// a spike off the chart. The run's totals count it.
func wholeIntervals(ivs []Interval) []Interval {
	if len(ivs) < 3 {
		return ivs
	}
	lengths := make([]float64, len(ivs)-1)
	for i, iv := range ivs[:len(ivs)-1] {
		lengths[i] = iv.Length
	}
	slices.Sort(lengths)
	if ivs[len(ivs)-1].Length < lengths[len(lengths)/2]/2 {
		return ivs[:len(ivs)-1]
	}
	return ivs
}

// latencyCDF plots each target's fraction of statements at or under a
// latency (log latency axis), from the stored histograms.
func latencyCDF(pt *Point) (*Chart, error) {
	p := newPlot("Latency distribution", "statement latency (ms, log scale)", "fraction of statements at or under")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	n := 0
	for i := range pt.Targets {
		t := &pt.Targets[i]
		h := t.Histogram(store.SeriesService)
		if h == nil || h.Count() == 0 {
			continue
		}
		var xys plotter.XYs
		for q := 0.0; q <= 1.0; q += 0.005 {
			ms := float64(h.Quantile(q)) / 1e6
			if ms <= 0 {
				continue
			}
			xys = append(xys, plotter.XY{X: ms, Y: q})
		}
		if len(xys) < 2 {
			continue
		}
		if err := line(p, i, t.Name, xys, false); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, nil
	}
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top = false // bottom right: the lines are near 1 there
	return &Chart{Name: "latency-cdf", Title: "Latency distribution", plot: p}, nil
}

// digestRatios draws, for the baseline's top digests, each other target's
// p95 over the baseline's.
func digestRatios(pt *Point, baseline string) (*Chart, error) {
	var base *Target
	var others []*Target
	for i := range pt.Targets {
		if pt.Targets[i].Name == baseline {
			base = &pt.Targets[i]
		} else {
			others = append(others, &pt.Targets[i])
		}
	}
	if base == nil || len(others) == 0 || len(base.TopDigests) == 0 {
		return nil, nil
	}
	top := base.TopDigests[:min(10, len(base.TopDigests))]
	p := newPlot("p95 latency ratio to "+baseline+", top statements by total time", "", "ratio (1 = as fast as "+baseline+")")
	w := vg.Points(float64(40) / float64(len(others)))
	names := make([]string, len(top))
	for k := range top {
		names[k] = "#" + strconv.Itoa(k+1)
	}
	for i, t := range others {
		vals := make(plotter.Values, len(top))
		for k, d := range top {
			if j := slices.IndexFunc(t.TopDigests, func(x DigestLatency) bool { return x.Digest == d.Digest }); j >= 0 {
				vals[k] = t.TopDigests[j].RatioP95
			}
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, err
		}
		b.Color = plotutil.Color(i + 1)
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(float64(i)-float64(len(others)-1)/2)
		p.Add(b)
		p.Legend.Add(t.Name, b)
	}
	p.NominalX(names...)
	padBars(p, len(top))
	one, _ := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 1}, {X: float64(len(top)) - 0.5, Y: 1}})
	one.Color = color.Gray{Y: 80}
	one.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
	p.Add(one)
	return &Chart{Name: "digest-p95-ratio", Title: "p95 ratio to the baseline, top statements (#N as in the table)", plot: p}, nil
}

// footprintChart draws each target's data and index bytes (MiB) after the
// replay, per table, side by side.
func footprintChart(pt *Point, baseline string) (*Chart, error) {
	var tables []string
	for _, t := range pt.Targets {
		for _, f := range t.Footprint {
			if !slices.Contains(tables, f.Table) {
				tables = append(tables, f.Table)
			}
		}
	}
	if len(tables) == 0 {
		return nil, nil
	}
	slices.Sort(tables)
	p := newPlot("Storage footprint after the replay", "", "MiB (data + index)")
	w := vg.Points(float64(48) / float64(len(pt.Targets)))
	for i, t := range pt.Targets {
		vals := make(plotter.Values, len(tables))
		for _, f := range t.Footprint {
			vals[slices.Index(tables, f.Table)] = float64(f.DataBytes+f.IndexBytes) / (1 << 20)
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, err
		}
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(float64(i)-float64(len(pt.Targets)-1)/2)
		p.Add(b)
		label := t.Name
		if t.Name == baseline {
			label += " (baseline)"
		}
		p.Legend.Add(label, b)
	}
	p.NominalX(tables...)
	padBars(p, len(tables))
	return &Chart{Name: "footprint", Title: "Storage footprint after the replay", plot: p}, nil
}

// padBars leaves half a group of room at both ends of n bar groups and
// room above the tallest bar for the legend.
func padBars(p *plot.Plot, n int) {
	p.X.Min, p.X.Max = -0.6, float64(n)-0.4
	p.Y.Min = 0
	p.Y.Max *= 1.25
}

// log2 is a base-2 log axis for thread counts.
type log2 struct{}

func (log2) Normalize(min, max, x float64) float64 {
	lmin, lmax := math.Log2(min), math.Log2(max)
	if lmax == lmin {
		return 0.5
	}
	return (math.Log2(x) - lmin) / (lmax - lmin)
}

// threadTicks marks the thread counts a sweep ran.
type threadTicks []int

func (tt threadTicks) Ticks(min, max float64) []plot.Tick {
	var out []plot.Tick
	for _, n := range tt {
		out = append(out, plot.Tick{Value: float64(n), Label: strconv.Itoa(n)})
	}
	return out
}

// sweepChart draws v against threads, one line per target, log2 threads.
func (rep *Report) sweepChart(name, title, y string, v func(t *Target) float64) (*Chart, error) {
	rows, names := rep.Sweep()
	if len(rows) == 0 {
		return nil, nil
	}
	p := newPlot(title, "threads (log2 scale)", y)
	p.Legend.Left = true // lines rise to the right
	var ticks threadTicks
	for _, r := range rows {
		ticks = append(ticks, r.Threads)
	}
	slices.Sort(ticks)
	p.X.Scale = log2{}
	p.X.Tick.Marker = ticks
	for i, n := range names {
		var xys plotter.XYs
		for _, r := range rows {
			if t := r.Targets[n]; t != nil {
				xys = append(xys, plotter.XY{X: float64(r.Threads), Y: v(t)})
			}
		}
		slices.SortFunc(xys, func(a, b plotter.XY) int { return int(a.X - b.X) })
		if len(xys) == 0 {
			continue
		}
		if err := line(p, i, n, xys, true); err != nil {
			return nil, err
		}
	}
	if len(ticks) == 1 {
		p.X.Min, p.X.Max = float64(ticks[0])/2, float64(ticks[0])*2
	}
	p.Y.Min = 0
	return &Chart{Name: name, Title: title, plot: p}, nil
}
