package grafana

import "strings"

// sel is the label selector of replay series of the chosen run and targets.
const sel = `run=~"$run",target=~"$target"`

// base is the selector of the baseline target's series.
const base = `run=~"$run",target="$baseline"`

// rate is a rate over the dashboard's rate interval.
func rate(metric, selector string) string {
	return "rate(" + metric + "{" + selector + "}[$__rate_interval])"
}

// quantile is the q-quantile of a histogram's buckets summed by le and by.
func quantile(q, metric, selector, by string) string {
	if by != "" {
		by = ", " + by
	}
	return "histogram_quantile(" + q + ", sum by (le" + by + ") (" + rate(metric+"_bucket", selector) + "))"
}

// layout places panels left to right, rows of 24 columns.
type layout struct {
	id, x, y, h int
	panels      []Panel
}

func (l *layout) row(title string) {
	if l.x > 0 {
		l.x, l.y = 0, l.y+l.h
	}
	l.id++
	collapsed := false
	l.panels = append(l.panels, Panel{ID: l.id, Type: "row", Title: title, GridPos: GridPos{H: 1, W: 24, X: 0, Y: l.y}, Collapsed: &collapsed})
	l.y++
	l.h = 0
}

// add places a panel w columns wide and h high, with one query per expr
// (legend formats in the same order).
func (l *layout) add(kind, title, desc, unit string, w, h int, exprs ...[2]string) {
	if l.x+w > 24 {
		l.x, l.y = 0, l.y+l.h
		l.h = 0
	}
	l.id++
	p := Panel{ID: l.id, Type: kind, Title: title, Description: desc, Datasource: DS,
		GridPos: GridPos{H: h, W: w, X: l.x, Y: l.y}, FieldConfig: &FieldConfig{Defaults: FieldDefaults{Unit: unit}, Override: []any{}}}
	for i, e := range exprs {
		t := Target{RefID: string(rune('A' + i)), Datasource: DS, Expr: e[0], LegendFormat: e[1], Range: true}
		if kind == "table" || kind == "stat" || kind == "bargauge" {
			t.Instant, t.Range = true, false
			if kind == "table" {
				t.Format = "table"
			}
		}
		p.Targets = append(p.Targets, t)
	}
	l.panels = append(l.panels, p)
	l.x += w
	l.h = max(l.h, h)
}

// New returns Tandem's dashboard.
func New() *Dashboard {
	var l layout
	q := func(expr, legend string) [2]string { return [2]string{expr, legend} }

	l.row("Overview: engines side by side")
	l.add("timeseries", "Statements per second", "Statements replayed per second on each target (ok and error; skipped records apart).", "reqps", 12, 8,
		q(`sum by (target) (`+rate("tandem_replay_statements_total", sel+`,outcome!="skipped"`)+`)`, "{{target}}"))
	l.add("timeseries", "Transactions per second", "Transactions completed per second (COMMIT, ROLLBACK or an autocommit statement), as sysbench counts them.", "ops", 12, 8,
		q(`sum by (target) (`+rate("tandem_replay_transactions_total", sel)+`)`, "{{target}}"))
	l.add("timeseries", "p95 latency by target and class", "Service time, 95th percentile, per statement class.", "s", 12, 8,
		q(quantile("0.95", "tandem_replay_statement_duration_seconds", sel, "target, class"), "{{target}} {{class}}"))
	l.add("timeseries", "p99 latency by target and class", "Service time, 99th percentile, per statement class.", "s", 12, 8,
		q(quantile("0.99", "tandem_replay_statement_duration_seconds", sel, "target, class"), "{{target}} {{class}}"))

	l.row("Latency against the baseline")
	l.add("timeseries", "p95 latency ratio to the baseline", "Each target's p95 over the baseline's (1 = as fast; 2 = twice as slow).", "percentunit", 12, 8,
		q(quantile("0.95", "tandem_replay_statement_duration_seconds", sel, "target")+` / on() group_left() `+
			quantile("0.95", "tandem_replay_statement_duration_seconds", base, ""), "{{target}}"))
	l.add("timeseries", "p99 latency ratio to the baseline by class", "Each target's p99 over the baseline's, per statement class.", "percentunit", 12, 8,
		q(quantile("0.99", "tandem_replay_statement_duration_seconds", sel, "target, class")+` / on(class) group_left() `+
			quantile("0.99", "tandem_replay_statement_duration_seconds", base, "class"), "{{target}} {{class}}"))
	l.add("table", "Top digests by p95 ratio to the baseline", "The statement shapes that got slowest against the baseline (the capture's most frequent --metrics-digests digests; the digest's text is in the next table).", "percentunit", 12, 9,
		q(`topk(10, `+quantile("0.95", "tandem_replay_digest_duration_seconds", sel+`,digest!="other"`, "target, digest")+` / on(digest) group_left() `+
			quantile("0.95", "tandem_replay_digest_duration_seconds", base+`,digest!="other"`, "digest")+`)`, "{{target}} {{digest}}"))
	l.add("table", "Digests", "Each digest label's normalized statement text and class.", "none", 12, 9,
		q(`max by (digest, class, text) (tandem_replay_digest_info{run=~"$run"})`, "{{digest}}"))

	l.row("Divergences")
	l.add("bargauge", "Divergence rate from the baseline by class", "Statements whose outcome differs from the baseline's, over those compared (order-ambiguous ones apart). Counted when a replay point ends.", "percentunit", 8, 8,
		q(`sum by (target, class) (tandem_replay_divergences_total{`+sel+`,against="baseline"}) / on(target) group_left() sum by (target) (tandem_replay_compared_total{`+sel+`,against="baseline"})`, "{{target}} {{class}}"))
	l.add("bargauge", "Order-ambiguous rate by reason", "Differences the capture's own order leaves open (commit-overlap), that replay could not order exactly (replay-order), or after a retried deadlock (retried): not verdicts.", "percentunit", 8, 8,
		q(`sum by (target, reason) (tandem_replay_order_ambiguous_total{`+sel+`,against="baseline"}) / on(target) group_left() sum by (target) (tandem_replay_compared_total{`+sel+`,against="baseline"})`, "{{target}} {{reason}}"))
	l.add("bargauge", "Divergence rate from the captured responses", "Statements whose outcome differs from the response the capture holds, by class.", "percentunit", 8, 8,
		q(`sum by (target, class) (tandem_replay_divergences_total{`+sel+`,against="capture"}) / on(target) group_left() sum by (target) (tandem_replay_compared_total{`+sel+`,against="capture"})`, "{{target}} {{class}}"))

	l.row("Errors, deadlocks and retries")
	l.add("timeseries", "Errors per second by code", "Failed statements and lifecycle commands by server error code (the 10 most frequent; the rest as other).", "ops", 8, 8,
		q(`sum by (target, code) (`+rate("tandem_replay_errors_total", sel)+`)`, "{{target}} {{code}}"))
	l.add("timeseries", "Deadlocks and lock wait timeouts per second", "1213 and 1205 the target gave: engine behaviour (MyRocks' snapshot conflicts show here).", "ops", 8, 8,
		q(`sum by (target) (`+rate("tandem_replay_deadlocks_total", sel)+`)`, "{{target}}"))
	l.add("timeseries", "Retries and failed transactions per second", "Transactions retried after a deadlock or lock wait timeout the capture did not have, by result; and those that failed for good (rolled back on the target, never committed in part: the engine's verdict).", "ops", 8, 8,
		q(`sum by (target, result) (`+rate("tandem_replay_retries_total", sel)+`)`, "{{target}} retry {{result}}"),
		q(`sum by (target) (`+rate("tandem_replay_failed_transactions_total", sel)+`)`, "{{target}} failed for good"))

	l.row("Replay progress")
	l.add("timeseries", "Progress", "Records handled over the records of one pass (above 100 % with --loop or --duration).", "percentunit", 8, 8,
		q(`sum by (target) (tandem_replay_records_done_total{`+sel+`}) / on() group_left() max(tandem_replay_records{run=~"$run"})`, "{{target}}"))
	l.add("timeseries", "Lag behind the schedule, p95", "How late statements went out against the capture's pacing (paced replays, --speed > 0).", "s", 8, 8,
		q(quantile("0.95", "tandem_replay_lag_seconds", sel, "target"), "{{target}}"))
	l.add("stat", "Targets up", "1 while a target replays or replayed to the end; 0 once it failed.", "none", 4, 8,
		q(`max by (target) (tandem_replay_target_up{`+sel+`})`, "{{target}}"))
	l.add("timeseries", "Order waits per second", "Records that waited for earlier ones (wait), transactions run again to let a blocked statement through (rerun), records released early (released).", "ops", 4, 8,
		q(`sum by (target, event) (`+rate("tandem_replay_order_total", sel)+`)`, "{{target}} {{event}}"))

	l.row("Shadows: live traffic on other engines")
	sh := `shadow=~"$shadow"`
	l.add("timeseries", "p95 latency: primary and shadows by class", "The same statements on the primary (as the proxy captured them) and on each shadow, 95th percentile per statement class.", "s", 12, 8,
		q(quantile("0.95", "tandem_shadow_statement_duration_seconds", sh, "shadow, side, class"), "{{shadow}} {{side}} {{class}}"))
	l.add("timeseries", "p95 latency ratio to the primary by class", "Each shadow's p95 over the primary's on the statements it compared (1 = as fast; 2 = twice as slow).", "percentunit", 12, 8,
		q(quantile("0.95", "tandem_shadow_statement_duration_seconds", sh+`,side="shadow"`, "shadow, class")+` / on(shadow, class) `+
			quantile("0.95", "tandem_shadow_statement_duration_seconds", sh+`,side="primary"`, "shadow, class"), "{{shadow}} {{class}}"))
	l.add("timeseries", "Divergences from the primary per second by class", "Statements whose outcome on the shadow differs from the primary's captured response.", "ops", 8, 8,
		q(`sum by (shadow, class) (`+rate("tandem_shadow_divergent_total", sh)+`)`, "{{shadow}} {{class}}"))
	l.add("timeseries", "Counted apart per second by reason", "Differences that are not verdicts: the capture's order left open (commit-overlap), replay's order (replay-order), a retried deadlock (retried), after a write the shadow skipped (not-replayed).", "ops", 8, 8,
		q(`sum by (shadow, reason) (`+rate("tandem_shadow_ambiguous_total", sh)+`)`, "{{shadow}} {{reason}}"))
	l.add("timeseries", "Statements compared per second", "Statements each shadow compared with the primary.", "ops", 8, 8,
		q(`sum by (shadow) (`+rate("tandem_shadow_compared_total", sh)+`)`, "{{shadow}}"))
	l.add("timeseries", "Lag behind the primary", "How far behind the capture the record each shadow dispatched last is.", "s", 8, 8,
		q(`max by (shadow) (tandem_shadow_lag_seconds{`+sh+`})`, "{{shadow}}"))
	l.add("timeseries", "Records not yet replayed", "Records committed to the capture that each shadow has not dispatched.", "short", 8, 8,
		q(`max by (shadow) (tandem_shadow_lag_records{`+sh+`})`, "{{shadow}}"))
	l.add("stat", "Shadows up", "1 while a shadow's server answers; 0 while it is down (its feed waits, retries with backoff, then catches up).", "none", 4, 8,
		q(`max by (shadow) (tandem_shadow_up{`+sh+`})`, "{{shadow}}"))
	l.add("timeseries", "Skipped and unavailable per second", "Skipped: left out past --shadow-max-lag or, in read-only mode, writes. Unavailable: statements a shadow could not run (down, connection lost).", "ops", 4, 8,
		q(`sum by (shadow) (`+rate("tandem_shadow_skipped_total", sh)+`)`, "{{shadow}} skipped"),
		q(`sum by (shadow) (`+rate("tandem_shadow_unavailable_total", sh)+`)`, "{{shadow}} unavailable"))

	l.row("Proxy health")
	px := `instance=~"$proxy"`
	l.add("timeseries", "Client connections", "Connections being relayed.", "short", 6, 8,
		q(`sum by (instance) (tandem_proxy_connections_active{`+px+`})`, "{{instance}}"))
	l.add("timeseries", "Commands per second by kind", "Commands relayed to the backend.", "reqps", 6, 8,
		q(`sum by (kind) (`+rate("tandem_proxy_commands_total", px)+`)`, "{{kind}}"))
	l.add("timeseries", "Backend round trip p95 by kind", "From a command's arrival to the last byte of the backend's reply relayed.", "s", 6, 8,
		q(quantile("0.95", "tandem_proxy_backend_duration_seconds", px, "kind"), "{{kind}}"))
	l.add("timeseries", "Connection failures per second", "Connections that ended in failure, by reason.", "ops", 6, 8,
		q(`sum by (reason) (`+rate("tandem_proxy_connection_failures_total", px)+`)`, "{{reason}}"))
	l.add("timeseries", "Capture queue", "Records accepted and not yet committed.", "short", 6, 8,
		q(`sum by (instance) (tandem_capture_queue_records{`+px+`})`, "{{instance}}"))
	l.add("timeseries", "Capture bytes pending", "Encoded bytes waiting for the next commit (past the budget the writer drops).", "bytes", 6, 8,
		q(`sum by (instance) (tandem_capture_pending_bytes{`+px+`})`, "{{instance}}"))
	l.add("timeseries", "Records captured and dropped per second", "Dropped: the capture writer was behind and the proxy went on relaying.", "ops", 6, 8,
		q(`sum by (instance) (`+rate("tandem_store_records_appended_total", px)+`)`, "{{instance}} captured"),
		q(`sum by (instance) (`+rate("tandem_store_records_dropped_total", px)+`)`, "{{instance}} dropped"))
	l.add("timeseries", "Capture commit p99", "Time to commit and sync one batch of records.", "s", 6, 8,
		q(quantile("0.99", "tandem_store_commit_duration_seconds", px, "instance"), "{{instance}}"))
	l.add("table", "Capture state", "recording; stopped (its budget or free-space floor: the reason says why); failed (the store could not write: a full disk, its directory removed); closed. Relaying goes on in every state.", "none", 8, 6,
		q(`max by (instance, state, reason) (tandem_capture_state{`+px+`})`, "{{state}}"))
	l.add("timeseries", "Capture store disk usage", "Pebble: tables, WAL and manifests of the capture.", "bytes", 8, 6,
		q(`sum by (instance) (tandem_pebble_disk_usage_bytes{`+px+`})`, "{{instance}}"))
	l.add("timeseries", "Capture store compactions and flushes per second", "Pebble's background work.", "ops", 8, 6,
		q(`sum by (instance) (`+rate("tandem_pebble_compactions_total", px)+`)`, "{{instance}} compactions"),
		q(`sum by (instance) (`+rate("tandem_pebble_flushes_total", px)+`)`, "{{instance}} flushes"))
	l.add("timeseries", "Capturing", "1 while a capture records the relayed traffic, 0 while the proxy only relays (captures start and stop at runtime: tandem capture start|stop).", "none", 8, 6,
		q(`max by (instance) (tandem_proxy_capture_active{`+px+`})`, "{{instance}}"))
	l.add("timeseries", "Captures stopped by reason", "Why each capture ended: requested (tandem capture stop), duration, max-bytes, disk (nearly full, or failed), shutdown.", "short", 8, 6,
		q(`sum by (reason) (increase(tandem_proxy_capture_stops_total{`+px+`}[$__rate_interval]))`, "{{reason}}"))
	l.add("timeseries", "Sessions entering captures per second", "open-at-start: open when the capture started, entered with their state at a command boundary; connected: logged in during it.", "ops", 8, 6,
		q(`sum by (how) (`+rate("tandem_proxy_capture_sessions_total", px)+`)`, "{{how}}"))

	promDS := &Datasource{Type: "prometheus", UID: "${datasource}"}
	all := Current{Text: []string{"All"}, Value: []string{"$__all"}}
	return &Dashboard{
		UID:           "tandem-replay",
		Title:         "Tandem: engines compared",
		Description:   "Tandem replays captured MySQL traffic against several engines at once: throughput, latency against the baseline, divergences, errors, progress; the proxy's live shadows on other engines; and the capture proxy's health.",
		Tags:          []string{"tandem", "mysql", "mariadb"},
		SchemaVersion: 39,
		Version:       1,
		Editable:      true,
		Refresh:       "10s",
		Time:          TimeRange{From: "now-30m", To: "now"},
		Timezone:      "browser",
		Templating: Templating{List: []Variable{
			{Name: "datasource", Label: "Prometheus", Type: "datasource", Query: "prometheus", Current: Current{Text: "default", Value: "default"}},
			{Name: "run", Label: "Run", Type: "query", Datasource: promDS, Refresh: 2, Sort: 2, Multi: true, IncludeAll: true, AllValue: ".*",
				Query: map[string]any{"query": `label_values(tandem_replay_records, run)`, "refId": "run"}, Current: all},
			{Name: "target", Label: "Target", Type: "query", Datasource: promDS, Refresh: 2, Sort: 1, Multi: true, IncludeAll: true, AllValue: ".*",
				Query: map[string]any{"query": `label_values(tandem_replay_target_info{run=~"$run"}, target)`, "refId": "target"}, Current: all},
			{Name: "baseline", Label: "Baseline", Type: "query", Datasource: promDS, Refresh: 2, Sort: 1,
				Query: map[string]any{"query": `label_values(tandem_replay_target_info{run=~"$run",baseline="true"}, target)`, "refId": "baseline"}, Current: Current{Text: "", Value: ""}},
			{Name: "proxy", Label: "Proxy", Type: "query", Datasource: promDS, Refresh: 2, Sort: 1, Multi: true, IncludeAll: true, AllValue: ".*",
				Query: map[string]any{"query": `label_values(tandem_proxy_connections_total, instance)`, "refId": "proxy"}, Current: all},
			{Name: "shadow", Label: "Shadow", Type: "query", Datasource: promDS, Refresh: 2, Sort: 1, Multi: true, IncludeAll: true, AllValue: ".*",
				Query: map[string]any{"query": `label_values(tandem_shadow_up, shadow)`, "refId": "shadow"}, Current: all},
		}},
		Panels: l.panels,
	}
}

// Substitute replaces the dashboard's variables in expr as Grafana would
// with the given values (a regex for multi-value ones) and rateInterval
// for $__rate_interval.
func Substitute(expr string, vars map[string]string, rateInterval string) string {
	r := []string{"$__rate_interval", rateInterval}
	for k, v := range vars {
		r = append(r, "$"+k, v)
	}
	return strings.NewReplacer(r...).Replace(expr)
}
