package report

import (
	"encoding/csv"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/footprint"
	"github.com/tandemdb/tandem/store"
)

// WriteHTML writes one self-contained HTML file for one or more runs: no
// script, no stylesheet or font fetched, charts inline as SVG, so that it
// opens offline and attached to an email. Several runs (the same capture
// on different days, the shards of a run) come side by side first, then
// each in full.
func WriteHTML(w io.Writer, reps []*Report) error {
	page := htmlPage{Generated: time.Now().UTC().Format(time.RFC3339)}
	for _, rep := range reps {
		hr := htmlRun{Report: rep, Sweep: rep.Command == "sweep"}
		charts, err := rep.Charts()
		if err != nil {
			return fmt.Errorf("report: charts of %s: %w", rep.RunID, err)
		}
		for _, c := range charts {
			svg, err := c.SVG()
			if err != nil {
				return fmt.Errorf("report: chart %s: %w", c.Name, err)
			}
			hr.Charts = append(hr.Charts, htmlChart{Name: c.Name, Title: c.Title, SVG: template.HTML(inlineSVG(svg))})
		}
		if hr.Sweep {
			hr.SweepRows, hr.SweepNames = rep.Sweep()
		}
		page.Runs = append(page.Runs, hr)
	}
	if len(reps) > 1 {
		for _, rep := range reps {
			for _, pt := range rep.Points {
				for _, t := range pt.Targets {
					page.Side = append(page.Side, sideRow{Run: rep.RunID, Point: pt.Label, Target: t.Name, TPS: t.TPS, QPS: t.QPS,
						P95: t.Latency.P95, P99: t.Latency.P99, Divergent: t.VsBaseline.Total(), Errors: t.Errors})
				}
			}
		}
	}
	return pageTmpl.Execute(w, page)
}

// inlineSVG drops the XML declaration so the SVG can sit in HTML.
func inlineSVG(b []byte) string {
	s := string(b)
	if i := strings.Index(s, "<svg"); i > 0 {
		s = s[i:]
	}
	return s
}

type htmlPage struct {
	Generated string
	Runs      []htmlRun
	Side      []sideRow
}

type htmlRun struct {
	*Report
	Sweep      bool
	Charts     []htmlChart
	SweepRows  []SweepRow
	SweepNames []string
}

type htmlChart struct {
	Name, Title string
	SVG         template.HTML
}

type sideRow struct {
	Run, Point, Target string
	TPS, QPS, P95, P99 float64
	Divergent, Errors  int64
}

var funcs = template.FuncMap{
	"bytes": Bytes,
	"ms":    func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) },
	"f1":    func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
	"ratio": func(v float64) string {
		if v == 0 {
			return "-"
		}
		return strconv.FormatFloat(v, 'f', 2, 64) + "×"
	},
	"total": func(d *store.Divergences) int64 { return d.Total() },
	"classes": func(d *store.Divergences) string {
		if d == nil {
			return ""
		}
		var parts []string
		for _, c := range compare.Classes {
			if n := d.ByClass[c]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", c, n))
			}
		}
		return strings.Join(parts, ", ")
	},
	"footprint": func(fs []store.TableFootprint) string {
		if len(fs) == 0 {
			return "-"
		}
		d, x := footprint.Total(fs)
		return Bytes(d) + " + " + Bytes(x)
	},
	"inc":  func(i int) int { return i + 1 },
	"time": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"cell": func(r SweepRow, name string) string {
		t := r.Targets[name]
		if t == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f / %.1f / %.2f / %.2f", t.TPS, t.QPS, t.Latency.P95, t.Latency.P99)
	},
	"samples": func(d *store.Divergences) []store.Sample {
		if d == nil {
			return nil
		}
		return d.Samples[:min(len(d.Samples), 20)]
	},
	"endstate": func(es *store.EndState, base bool) string {
		switch {
		case es == nil:
			return "-"
		case es.Error != "":
			return "not read: " + es.Error
		case base:
			return fmt.Sprintf("%d tables (baseline)", len(es.Tables))
		case es.Same:
			return "same as baseline"
		}
		var d, by []string
		for _, t := range es.Tables {
			switch {
			case t.Differs && t.Because != "":
				by = append(by, t.Table)
			case t.Differs:
				d = append(d, t.Table)
			}
		}
		var s []string
		if len(d) > 0 {
			s = append(s, "differs: "+strings.Join(d, ", "))
		}
		if len(by) > 0 {
			s = append(s, "differs by what replay could not do as captured (failed transactions, changes out of order; see the text report): "+strings.Join(by, ", "))
		}
		return strings.Join(s, "; ")
	},
}

var pageTmpl = template.Must(template.New("page").Funcs(funcs).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tandem report{{range .Runs}} · {{.RunID}}{{end}}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{font-size:1.3em;border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}h3{font-size:1.1em}
table{border-collapse:collapse;margin:.6em 0 1.2em}td,th{border:1px solid #ddd;padding:.25em .6em;text-align:right;vertical-align:top}
th{background:#f4f4f4}td.l,th.l{text-align:left}code,pre{font:12px ui-monospace,monospace}pre{white-space:pre-wrap;margin:0}
figure{margin:1em 0}figcaption{font-weight:600;margin-bottom:.3em}figure svg{max-width:100%;height:auto;border:1px solid #eee}
.note{color:#555}.amb{color:#777}
</style></head><body>
<h1>Tandem report</h1>
<p class="note">Generated {{.Generated}}. Percentiles come from the runs' stored histograms (merged exactly, never averaged).</p>
{{if .Side}}<h2>Runs side by side</h2>
<table><tr><th class="l">run</th><th class="l">point</th><th class="l">target</th><th>tps</th><th>qps</th><th>p95 ms</th><th>p99 ms</th><th>errors</th><th>divergent</th></tr>
{{range .Side}}<tr><td class="l">{{.Run}}</td><td class="l">{{.Point}}</td><td class="l">{{.Target}}</td><td>{{f1 .TPS}}</td><td>{{f1 .QPS}}</td><td>{{ms .P95}}</td><td>{{ms .P99}}</td><td>{{.Errors}}</td><td>{{.Divergent}}</td></tr>
{{end}}</table>{{end}}
{{range $run := .Runs}}
<h2>{{.Command}} {{.RunID}}</h2>
<table>
<tr><th class="l">capture</th><td class="l">{{.Capture}} <span class="note">({{.CaptureSource}})</span></td></tr>
<tr><th class="l">started</th><td class="l">{{time .Started}}, {{f1 .Elapsed}} s{{if not .Finished}} — did not finish{{end}}</td></tr>
<tr><th class="l">baseline</th><td class="l">{{.Baseline}}</td></tr>
<tr><th class="l">settings</th><td class="l">{{range .Settings}}<code>--{{.Name}} {{.Value}}</code> {{end}}</td></tr>
<tr><th class="l">run directories</th><td class="l">{{range .RunDirs}}<code>{{.}}</code> {{end}}</td></tr>
</table>
{{if .Sweep}}<h3>Sweep: tps / qps / p95 ms / p99 ms per thread count</h3>
<table><tr><th>threads</th>{{range .SweepNames}}<th>{{.}}</th>{{end}}</tr>
{{range $r := .SweepRows}}<tr><td>{{$r.Threads}}</td>{{range $run.SweepNames}}<td>{{cell $r .}}</td>{{end}}</tr>
{{end}}</table>{{end}}
{{range .Charts}}<figure id="chart-{{.Name}}"><figcaption>{{.Title}}</figcaption>{{.SVG}}</figure>
{{end}}
{{range $pt := .Points}}
<h3>{{if $run.Sweep}}Point {{inc .Point.Point}}: {{.Label}}{{else}}Targets{{end}} <span class="note">(--order {{.Order}}, --io {{.IO}}, {{f1 .Elapsed}} s)</span></h3>
<table>
<tr><th class="l"></th>{{range .Targets}}<th>{{.Name}}{{if .Baseline}} (baseline){{end}}</th>{{end}}</tr>
<tr><th class="l">engine, options</th>{{range .Targets}}<td>{{.Engine}} {{.Options}}</td>{{end}}</tr>
<tr><th class="l">server</th>{{range .Targets}}<td>{{.Version}} <span class="note">{{.Addr}}</span></td>{{end}}</tr>
<tr><th class="l">connection</th>{{range .Targets}}<td>{{if .TLS}}TLS {{.TLS}}{{else}}in clear{{end}}</td>{{end}}</tr>
<tr><th class="l">transactions/s</th>{{range .Targets}}<td>{{f1 .TPS}}</td>{{end}}</tr>
<tr><th class="l">queries/s</th>{{range .Targets}}<td>{{f1 .QPS}}</td>{{end}}</tr>
<tr><th class="l">queries r/w/o</th>{{range .Targets}}<td>{{.Reads}}/{{.Writes}}/{{.Other}}</td>{{end}}</tr>
<tr><th class="l">errors (deadlocks)</th>{{range .Targets}}<td>{{.Errors}} ({{.Deadlocks}})</td>{{end}}</tr>
<tr><th class="l">retries (succeeded)</th>{{range .Targets}}<td>{{.Retries}} ({{.RetriesSucceeded}})</td>{{end}}</tr>
<tr><th class="l">transactions failed for good</th>{{range .Targets}}<td>{{.FailedTransactions}}</td>{{end}}</tr>
<tr><th class="l">changes sent out of the capture's order</th>{{range .Targets}}<td>{{.Reordered}}</td>{{end}}</tr>
<tr><th class="l">latency ms p50</th>{{range .Targets}}<td>{{ms .Latency.P50}}</td>{{end}}</tr>
<tr><th class="l">latency ms p95</th>{{range .Targets}}<td>{{ms .Latency.P95}}</td>{{end}}</tr>
<tr><th class="l">latency ms p99</th>{{range .Targets}}<td>{{ms .Latency.P99}}</td>{{end}}</tr>
<tr><th class="l">latency ms max</th>{{range .Targets}}<td>{{ms .Latency.Max}}</td>{{end}}</tr>
<tr><th class="l">compared with baseline</th>{{range .Targets}}<td>{{if .VsBaseline}}{{.VsBaseline.Compared}}{{else}}-{{end}}</td>{{end}}</tr>
<tr><th class="l">divergent</th>{{range .Targets}}<td>{{if .VsBaseline}}{{total .VsBaseline}} <span class="note">{{classes .VsBaseline}}</span>{{else}}-{{end}}</td>{{end}}</tr>
<tr><th class="l">order-ambiguous</th>{{range .Targets}}<td>{{if .VsBaseline}}{{.VsBaseline.Ambiguous}}{{else}}-{{end}}</td>{{end}}</tr>
<tr><th class="l">differs from the capture</th>{{range .Targets}}<td>{{if .VsCapture}}{{total .VsCapture}} of {{.VsCapture.Compared}}{{else}}-{{end}}</td>{{end}}</tr>
<tr><th class="l">end state</th>{{range .Targets}}<td>{{endstate .EndState .Baseline}}</td>{{end}}</tr>
<tr><th class="l">storage before</th>{{range .Targets}}<td>{{footprint .FootprintBefore}}</td>{{end}}</tr>
<tr><th class="l">storage after</th>{{range .Targets}}<td>{{footprint .Footprint}}</td>{{end}}</tr>
</table>
{{range .Targets}}{{if .Failed}}<p><b>{{.Name}} failed:</b> {{.Failed}}</p>{{end}}{{end}}
{{range $t := .Targets}}{{if .TopDigests}}<h3>Top statements on {{.Name}} by total time</h3>
<table><tr><th>#</th><th class="l">statement</th><th>class</th><th>count</th><th>total s</th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th><th>p95 ratio to baseline</th></tr>
{{range $i, $d := .TopDigests}}{{if lt $i 10}}<tr><td>{{inc $i}}</td><td class="l"><code>{{$d.Text}}</code></td><td>{{$d.Class}}</td><td>{{$d.Latency.Count}}</td><td>{{ms $d.Total}}</td><td>{{ms $d.Latency.P50}}</td><td>{{ms $d.Latency.P95}}</td><td>{{ms $d.Latency.P99}}</td><td>{{ratio $d.RatioP95}}</td></tr>
{{end}}{{end}}</table>{{end}}{{end}}
{{range $t := .Targets}}{{if samples .VsBaseline}}<h3>Divergences of {{.Name}} from the baseline (samples)</h3>
<table><tr><th class="l">class</th><th>seq</th><th class="l">statement</th><th class="l">baseline</th><th class="l">{{.Name}}</th><th class="l">first differing row / why ambiguous</th></tr>
{{range samples .VsBaseline}}<tr{{if .Ambiguous}} class="amb"{{end}}><td class="l">{{.Class}}</td><td>{{.Seq}}</td><td class="l"><code>{{.Statement}}</code>{{if .Params}}<br><span class="note">params {{range .Params}}{{.}} {{end}}</span>{{end}}</td><td class="l"><pre>{{.Baseline}}</pre></td><td class="l"><pre>{{.Target}}</pre></td><td class="l"><pre>{{.FirstDiff}}{{.Why}}</pre></td></tr>
{{end}}</table>{{end}}{{end}}
{{range $t := .Targets}}{{if .Footprint}}<h3>Storage footprint of {{.Name}} after the replay</h3>
<table><tr><th class="l">table</th><th class="l">engine</th><th>rows (estimate)</th><th>data</th><th>index</th><th class="l">source</th></tr>
{{range .Footprint}}<tr><td class="l">{{or .Measured .Table}}</td><td class="l">{{.Engine}}</td><td>{{.Rows}}</td><td>{{bytes .DataBytes}}</td><td>{{bytes .IndexBytes}}</td><td class="l note">{{.Source}}</td></tr>
{{end}}</table>{{end}}{{end}}
{{end}}
{{range .Notes}}<p class="note">Note: {{.}}</p>{{end}}
{{end}}
</body></html>
`))

// WriteCSV writes one row per point per target of each run.
func WriteCSV(w io.Writer, reps []*Report) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"run_id", "command", "point", "label", "threads", "target", "engine", "options", "baseline",
		"transactions", "reads", "writes", "other", "errors", "deadlocks", "retries", "tps", "qps",
		"p50_ms", "p95_ms", "p99_ms", "max_ms", "compared", "divergent", "order_ambiguous", "data_bytes", "index_bytes"})
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	for _, rep := range reps {
		for _, pt := range rep.Points {
			for _, t := range pt.Targets {
				var compared, amb int64
				if t.VsBaseline != nil {
					compared, amb = t.VsBaseline.Compared, t.VsBaseline.Ambiguous
				}
				d, x := footprint.Total(t.Footprint)
				cw.Write([]string{rep.RunID, rep.Command, strconv.Itoa(pt.Point.Point), pt.Label, strconv.Itoa(pt.Threads), t.Name, t.Engine, t.Options,
					strconv.FormatBool(t.Baseline), i64(t.Transactions), i64(t.Reads), i64(t.Writes), i64(t.Other), i64(t.Errors),
					i64(t.Deadlocks), i64(t.Retries), f(t.TPS), f(t.QPS), f(t.Latency.P50), f(t.Latency.P95), f(t.Latency.P99), f(t.Latency.Max),
					i64(compared), i64(t.VsBaseline.Total()), i64(amb), i64(d), i64(x)})
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
