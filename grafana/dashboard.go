// Package grafana builds Tandem's Grafana dashboard from typed Go values
// and writes it as the committed tandem-dashboard.json (go generate
// ./grafana; a test fails when the file and the generator disagree).
//
// The dashboard reads Tandem's Prometheus metrics (replay's
// tandem_replay_*, the proxy's tandem_proxy_*, tandem_capture_*,
// tandem_store_* and tandem_pebble_*). Variables: datasource (any
// Prometheus), run, target (several), baseline (the target ratios are
// taken against, by default the run's baseline) and proxy (the scraped
// proxy instances). Percentiles are always histogram_quantile over
// sum by (le, …) of the buckets, never an average of percentiles.
package grafana

//go:generate go run ./gen tandem-dashboard.json

import (
	"bytes"
	"encoding/json"
)

// Dashboard is the part of Grafana's dashboard model Tandem uses.
type Dashboard struct {
	UID           string     `json:"uid"`
	Title         string     `json:"title"`
	Description   string     `json:"description"`
	Tags          []string   `json:"tags"`
	SchemaVersion int        `json:"schemaVersion"`
	Version       int        `json:"version"`
	Editable      bool       `json:"editable"`
	Refresh       string     `json:"refresh"`
	Time          TimeRange  `json:"time"`
	Timezone      string     `json:"timezone"`
	Templating    Templating `json:"templating"`
	Panels        []Panel    `json:"panels"`
}

// TimeRange is the dashboard's default range.
type TimeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Templating holds the variables.
type Templating struct {
	List []Variable `json:"list"`
}

// Variable is a template variable.
type Variable struct {
	Name       string      `json:"name"`
	Label      string      `json:"label"`
	Type       string      `json:"type"`
	Query      any         `json:"query"`
	Datasource *Datasource `json:"datasource,omitempty"`
	Refresh    int         `json:"refresh,omitempty"`
	Multi      bool        `json:"multi"`
	IncludeAll bool        `json:"includeAll"`
	AllValue   string      `json:"allValue,omitempty"`
	Sort       int         `json:"sort,omitempty"`
	Current    Current     `json:"current"`
}

// Current is a variable's initial value.
type Current struct {
	Text  any `json:"text"`
	Value any `json:"value"`
}

// Datasource refers to a datasource.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Panel is a row or a visualization.
type Panel struct {
	ID          int          `json:"id"`
	Type        string       `json:"type"`
	Title       string       `json:"title"`
	Description string       `json:"description,omitempty"`
	GridPos     GridPos      `json:"gridPos"`
	Datasource  *Datasource  `json:"datasource,omitempty"`
	Targets     []Target     `json:"targets,omitempty"`
	FieldConfig *FieldConfig `json:"fieldConfig,omitempty"`
	Options     any          `json:"options,omitempty"`
	Collapsed   *bool        `json:"collapsed,omitempty"`
	Panels      []Panel      `json:"panels,omitempty"`
}

// GridPos places a panel (24 columns).
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Target is a panel's query.
type Target struct {
	RefID        string      `json:"refId"`
	Datasource   *Datasource `json:"datasource"`
	Expr         string      `json:"expr"`
	LegendFormat string      `json:"legendFormat,omitempty"`
	Instant      bool        `json:"instant,omitempty"`
	Range        bool        `json:"range"`
	Format       string      `json:"format,omitempty"`
}

// FieldConfig carries the unit.
type FieldConfig struct {
	Defaults FieldDefaults `json:"defaults"`
	Override []any         `json:"overrides"`
}

// FieldDefaults are the fields' defaults.
type FieldDefaults struct {
	Unit     string `json:"unit"`
	Min      *int   `json:"min,omitempty"`
	Decimals *int   `json:"decimals,omitempty"`
}

// DS is the datasource every panel uses: the variable.
var DS = &Datasource{Type: "prometheus", UID: "${datasource}"}

// JSON renders d as the committed file holds it.
func JSON(d *Dashboard) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Queries returns every query of every panel, rows' nested panels
// included, with its panel's title.
func Queries(d *Dashboard) []Query {
	var qs []Query
	var walk func(ps []Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				qs = append(qs, Query{Panel: p.Title, PanelID: p.ID, Expr: t.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return qs
}

// Query is one panel query.
type Query struct {
	Panel   string
	PanelID int
	Expr    string
}
