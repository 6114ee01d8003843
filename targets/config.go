package targets

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
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
// tandem proxy's --config has a shadows: list of the same entries instead
// (without baseline: the primary is the baseline).
type File struct {
	Targets []FileTarget `yaml:"targets"`
	Shadows []FileTarget `yaml:"shadows"`
}

// FileTarget is one entry of a targets file.
type FileTarget struct {
	Name     string `yaml:"name"`
	DSN      string `yaml:"dsn"`
	Engine   string `yaml:"engine"`
	Options  string `yaml:"options"`
	CA       string `yaml:"ca"`
	Baseline bool   `yaml:"baseline"`
}

// Load reads a targets file's targets: list; unknown keys are errors.
func Load(path string) ([]Target, error) {
	f, err := load(path)
	if err != nil {
		return nil, err
	}
	if len(f.Targets) == 0 {
		return nil, fmt.Errorf("%w: %s has no targets: list; see 'tandem replay --help'", ErrBadSpec, path)
	}
	return convert(path, "target", f.Targets)
}

// LoadShadows reads a file's shadows: list (tandem proxy --config).
func LoadShadows(path string) ([]Target, error) {
	f, err := load(path)
	if err != nil {
		return nil, err
	}
	if len(f.Shadows) == 0 {
		return nil, fmt.Errorf("%w: %s has no shadows: list; see 'tandem proxy --help'", ErrBadSpec, path)
	}
	for _, s := range f.Shadows {
		if s.Baseline {
			return nil, fmt.Errorf("%w: %s: shadow %s: a shadow cannot be the baseline (the primary is)", ErrBadSpec, path, s.Name)
		}
	}
	return convert(path, "shadow", f.Shadows)
}

func load(path string) (File, error) {
	var f File
	b, err := os.ReadFile(path)
	if err != nil {
		return f, fmt.Errorf("targets: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return f, fmt.Errorf("%w: %s: %s", ErrBadSpec, path, yamlErr(err))
	}
	return f, nil
}

var unknownField = regexp.MustCompile(`line (\d+): field (\S+) not found in type \S+`)

// yamlErr says what is wrong with a targets file in its own terms: the
// key and its line, not the Go type the decoder fills.
func yamlErr(err error) string {
	var lines []string
	for _, l := range strings.Split(err.Error(), "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(l, "yaml: unmarshal errors:"))
		if l == "" {
			continue
		}
		if m := unknownField.FindStringSubmatch(l); m != nil {
			l = fmt.Sprintf("line %s: unknown key %q (a target has name, dsn, engine, options, ca, baseline; the file has targets: and shadows: lists)", m[1], m[2])
		}
		lines = append(lines, strings.TrimPrefix(l, "yaml: "))
	}
	return strings.Join(lines, "; ")
}

func convert(path, what string, fts []FileTarget) ([]Target, error) {
	var out []Target
	for i, ft := range fts {
		if ft.Name == "" || ft.DSN == "" {
			return nil, fmt.Errorf("%w: %s: %s %d needs a name and a dsn", ErrBadSpec, path, what, i+1)
		}
		dsn, err := expandEnv(ft.DSN)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %s %s: %v", ErrBadSpec, path, what, ft.Name, err)
		}
		t := Target{Name: ft.Name, DSN: dsn, Engine: "InnoDB", Options: ft.Options, CA: ft.CA, Baseline: ft.Baseline}
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
