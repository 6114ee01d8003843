package targets

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

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
		dsn, err := expandEnv(ft.DSN)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: target %s: %v", ErrBadSpec, path, ft.Name, err)
		}
		t := Target{Name: ft.Name, DSN: dsn, Engine: "InnoDB", Options: ft.Options, Baseline: ft.Baseline}
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

// expandEnv replaces ${NAME} in a DSN with the environment variable NAME,
// so that a targets file can name credentials without holding them (on
// Kubernetes, from a Secret). An unset variable is an error; "$" alone,
// or $NAME without braces, is left as is (a password may contain "$").
func expandEnv(s string) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		name := s[i+2 : i+j]
		v, ok := os.LookupEnv(name)
		if !ok {
			return "", fmt.Errorf("the dsn names ${%s}, which is not set in the environment", name)
		}
		b.WriteString(s[:i])
		b.WriteString(v)
		s = s[i+j+1:]
	}
}
