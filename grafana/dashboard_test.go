package grafana

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The committed file is what the generator writes: edit tandem.go and run
// go generate ./grafana.
func TestCommittedDashboardIsGenerated(t *testing.T) {
	want, err := JSON(New())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("tandem-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("tandem-dashboard.json differs from the generator's output: run go generate ./grafana")
	}
}

// The committed JSON, read as Grafana reads it, has what an importable
// dashboard needs: uid, title, schemaVersion; every panel a unique id, the
// datasource variable, a query and a unit; percentiles only from
// histogram_quantile over sum by (le, …), never averaged.
func TestDashboardStructure(t *testing.T) {
	raw, err := os.ReadFile("tandem-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID           string `json:"uid"`
		Title         string `json:"title"`
		SchemaVersion int    `json:"schemaVersion"`
		Templating    struct {
			List []struct{ Name, Type string } `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource *struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr       string `json:"expr"`
				Datasource *struct {
					UID string `json:"uid"`
				} `json:"datasource"`
			} `json:"targets"`
			FieldConfig *struct {
				Defaults struct {
					Unit string `json:"unit"`
				} `json:"defaults"`
			} `json:"fieldConfig"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID != "tandem-replay" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("uid %q title %q schemaVersion %d", d.UID, d.Title, d.SchemaVersion)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	for name, typ := range map[string]string{"datasource": "datasource", "run": "query", "target": "query", "baseline": "query", "proxy": "query"} {
		if vars[name] != typ {
			t.Errorf("variable %s: type %q, want %q", name, vars[name], typ)
		}
	}
	ids := map[int]bool{}
	quantile := regexp.MustCompile(`histogram_quantile\(0\.\d+, sum by \(le[,)]`)
	rows, panels := 0, 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			rows++
			continue
		}
		panels++
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		if p.FieldConfig == nil || p.FieldConfig.Defaults.Unit == "" {
			t.Errorf("panel %q has no unit", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if q.Expr == "" || q.Datasource == nil || q.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: query %q, datasource %+v", p.Title, q.Expr, q.Datasource)
			}
			if strings.Contains(q.Expr, "avg") || strings.Contains(q.Expr, "quantile_over_time") {
				t.Errorf("panel %q averages: %s", p.Title, q.Expr)
			}
			if n := strings.Count(q.Expr, "histogram_quantile("); n != len(quantile.FindAllString(q.Expr, -1)) {
				t.Errorf("panel %q: a histogram_quantile not over sum by (le, …): %s", p.Title, q.Expr)
			}
			if strings.Contains(q.Expr, "tandem_replay_") && !strings.Contains(q.Expr, `run=~"$run"`) {
				t.Errorf("panel %q: replay query without the run variable: %s", p.Title, q.Expr)
			}
			if strings.Contains(q.Expr, "tandem_shadow_") && !strings.Contains(q.Expr, `shadow=~"$shadow"`) {
				t.Errorf("panel %q: shadow query without the shadow variable: %s", p.Title, q.Expr)
			}
		}
	}
	if rows != 7 || panels != 41 {
		t.Errorf("%d rows and %d panels, want 7 and 41", rows, panels)
	}
}

func TestSubstitute(t *testing.T) {
	got := Substitute(`rate(x{run=~"$run",target="$baseline"}[$__rate_interval])`, map[string]string{"run": ".*", "baseline": "a"}, "10s")
	if want := `rate(x{run=~".*",target="a"}[10s])`; got != want {
		t.Errorf("Substitute = %s, want %s", got, want)
	}
}
