package targets

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"
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
//	    options: "COMMENT='engine trial, week 2'"
//
// Each entry becomes a Target as it is: an option's value may hold commas.
type File struct {
	Targets []FileTarget `yaml:"targets"`
}

// FileTarget is one entry of a targets file.
type FileTarget struct {
	Name     string `yaml:"name"`
	DSN      string `yaml:"dsn"`
	Engine   string `yaml:"engine"`
	Options  string `yaml:"options"`
	Baseline bool   `yaml:"baseline"`
}

// Load reads a targets file; unknown keys are errors.
func Load(path string) ([]Target, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("targets: %w", err)
	}
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadSpec, path, err)
	}
	if len(f.Targets) == 0 {
		return nil, fmt.Errorf("%w: %s has no targets: list; see 'tandem replay --help'", ErrBadSpec, path)
	}
	var out []Target
	for i, ft := range f.Targets {
		if ft.Name == "" || ft.DSN == "" {
			return nil, fmt.Errorf("%w: %s: target %d needs a name and a dsn", ErrBadSpec, path, i+1)
		}
		t := Target{Name: ft.Name, DSN: ft.DSN, Engine: "InnoDB", Options: ft.Options, Baseline: ft.Baseline}
		if ft.Engine != "" {
			t.Engine = CanonicalEngine(ft.Engine)
		}
		if err := t.validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, t)
	}
	return out, nil
}
