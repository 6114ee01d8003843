package target

import (
	"bytes"
	"fmt"
	"os"

	"gopkg.in/yaml.v3"
)

// File is a targets file:
//
//	targets:
//	  - name: innodb
//	    dsn: root@tcp(127.0.0.1:3306)/sbtest
//	    engine: innodb
//	    baseline: true
//	  - name: myrocks
//	    dsn: root@tcp(127.0.0.1:3307)/sbtest
//	    engine: rocksdb
//	    options: ""
type File struct {
	Targets []struct {
		Name     string `yaml:"name"`
		DSN      string `yaml:"dsn"`
		Engine   string `yaml:"engine"`
		Options  string `yaml:"options"`
		Baseline bool   `yaml:"baseline"`
	} `yaml:"targets"`
}

// Load reads a targets file; unknown keys are errors.
func Load(path string) ([]Target, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadSpec, path, err)
	}
	var out []Target
	for i, t := range f.Targets {
		if t.Name == "" || t.DSN == "" {
			return nil, fmt.Errorf("%w: %s: target %d needs a name and a dsn", ErrBadSpec, path, i+1)
		}
		spec := t.Name + "=" + t.DSN
		if t.Engine != "" {
			spec += ",engine=" + t.Engine
		}
		if t.Options != "" {
			spec += ",options=" + t.Options
		}
		p, err := Parse(spec)
		if err != nil {
			return nil, err
		}
		p.Baseline = t.Baseline
		out = append(out, p)
	}
	return out, nil
}
