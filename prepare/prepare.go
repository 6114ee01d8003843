// Package prepare creates and loads sysbench's sbtest tables on targets,
// each with its own engine and create options, and reports their size.
package prepare

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/tandemdb/tandem/capture/synth"
	"github.com/tandemdb/tandem/targets"
)

// ErrTableExists: a table to create is already there.
var ErrTableExists = errors.New("prepare: table exists")

// Config says what to create where.
type Config struct {
	Targets   []targets.Target
	Tables    int
	TableSize int
	// Threads loading each target at once.
	Threads int
	AutoInc bool
	// Secondary makes id a plain KEY instead of the PRIMARY KEY (sysbench --secondary).
	Secondary bool
	// CreateSecondary adds the k_N index after loading (sysbench default).
	CreateSecondary bool
	Dist            synth.Dist
	Seed            uint64
	// BatchRows is how many rows one INSERT carries.
	BatchRows int
	// Cleanup drops the tables instead of creating them.
	Cleanup bool
	// Progress, if set, is called about five times a second while rows
	// load with the rows loaded on every target and their total, and once
	// more at the end.
	Progress func(done, total int64)
	// rows counts the rows loaded on every target (for Progress).
	rows *atomic.Int64
}

// TableReport is one loaded table.
type TableReport struct {
	Table      string `json:"table"`
	Rows       int64  `json:"rows"`
	DataBytes  int64  `json:"data_bytes"`
	IndexBytes int64  `json:"index_bytes"`
}

// TargetReport is what happened on one target.
type TargetReport struct {
	Target   string        `json:"target"`
	Version  string        `json:"version"`
	Engine   string        `json:"engine"`
	Options  string        `json:"options,omitempty"`
	Database string        `json:"database"`
	Tables   []TableReport `json:"tables"`
	Elapsed  time.Duration `json:"elapsed_ns"`
}

func (c *Config) check() error {
	switch {
	case len(c.Targets) == 0:
		return errors.New("prepare: no targets; give --target name=DSN,engine=X")
	case c.Tables < 1:
		return errors.New("prepare: --tables must be at least 1")
	case c.TableSize < 1:
		return fmt.Errorf("prepare: --table-size %d: want at least 1 row per table", c.TableSize)
	}
	if c.Threads < 1 {
		c.Threads = 1
	}
	if c.BatchRows <= 0 {
		c.BatchRows = 2000
	}
	if c.Dist.Kind == "" {
		c.Dist = synth.DefaultDist()
	}
	seen := map[string]bool{}
	for _, t := range c.Targets {
		if seen[t.Name] {
			return fmt.Errorf("prepare: two targets named %q", t.Name)
		}
		seen[t.Name] = true
		if t.Database() == "" {
			return fmt.Errorf("prepare: target %s: the DSN names no database (…/sbtest)", t.Name)
		}
	}
	return c.Dist.Validate()
}

// Run checks every target first — reachable, engine present, tables absent
// — so that nothing is created anywhere unless everything can be; then
// loads all targets at once.
func Run(ctx context.Context, cfg Config) ([]TargetReport, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	dbs := make([]*sql.DB, len(cfg.Targets))
	defer func() {
		for _, db := range dbs {
			if db != nil {
				db.Close()
			}
		}
	}()
	reports := make([]TargetReport, len(cfg.Targets))
	for i, t := range cfg.Targets {
		db, err := t.Open()
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(cfg.Threads + 1)
		dbs[i] = db
		info, err := t.Check(ctx, db)
		if err != nil && !(cfg.Cleanup && errors.Is(err, targets.ErrEngineMissing)) {
			return nil, err
		}
		reports[i] = TargetReport{Target: t.Name, Version: info.Version, Engine: t.Engine, Options: t.Options, Database: t.Database()}
		if cfg.Cleanup {
			continue
		}
		for n := 1; n <= cfg.Tables; n++ {
			var one int
			err := db.QueryRowContext(ctx, "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA=? AND TABLE_NAME=?", t.Database(), table(n)).Scan(&one)
			if err == nil {
				return nil, fmt.Errorf("%w: target %s: %s.%s already exists; drop it with 'tandem prepare --cleanup' first", ErrTableExists, t.Name, t.Database(), table(n))
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return nil, fmt.Errorf("target %s: %w", t.Name, err)
			}
		}
	}
	cfg.rows = new(atomic.Int64)
	if cfg.Progress != nil && !cfg.Cleanup {
		total := int64(cfg.Tables) * int64(cfg.TableSize) * int64(len(cfg.Targets))
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					cfg.Progress(cfg.rows.Load(), total)
					return
				case <-t.C:
					cfg.Progress(cfg.rows.Load(), total)
				}
			}
		}()
		defer func() { close(stop); <-done }()
	}
	var wg sync.WaitGroup
	errs := make([]error, len(cfg.Targets))
	for i := range cfg.Targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			if cfg.Cleanup {
				errs[i] = cleanup(ctx, dbs[i], cfg, reports[i].Database)
			} else {
				reports[i].Tables, errs[i] = load(ctx, dbs[i], cfg, cfg.Targets[i])
			}
			reports[i].Elapsed = time.Since(start)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("target %s: %w", cfg.Targets[i].Name, errs[i])
			}
		}()
	}
	wg.Wait()
	return reports, errors.Join(errs...)
}

func table(n int) string { return "sbtest" + strconv.Itoa(n) }

func cleanup(ctx context.Context, db *sql.DB, cfg Config, schema string) error {
	for n := 1; n <= cfg.Tables; n++ {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS `"+schema+"`."+table(n)); err != nil {
			return err
		}
	}
	return nil
}

// createSQL is sysbench 1.0's CREATE TABLE, with the target's engine and options.
func createSQL(cfg Config, t targets.Target, n int) string {
	idDef, key := "INTEGER NOT NULL", "PRIMARY KEY"
	if cfg.AutoInc {
		idDef += " AUTO_INCREMENT"
	}
	if cfg.Secondary {
		key = "KEY xid"
	}
	return fmt.Sprintf("CREATE TABLE `%s`.%s(\n  id %s,\n  k INTEGER DEFAULT '0' NOT NULL,\n  c CHAR(120) DEFAULT '' NOT NULL,\n  pad CHAR(60) DEFAULT '' NOT NULL,\n  %s (id)\n) ENGINE = %s %s",
		t.Database(), table(n), idDef, key, t.Engine, t.Options)
}

type chunk struct{ table, from, to int }

// load creates and fills every table of one target with cfg.Threads
// connections: a table's rows are cut into chunks loaded in parallel (ids
// are explicit, so chunks never collide), and its k index is built once
// its chunks are in.
func load(ctx context.Context, db *sql.DB, cfg Config, t targets.Target) ([]TableReport, error) {
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+t.Database()+"`"); err != nil {
		return nil, err
	}
	for n := 1; n <= cfg.Tables; n++ {
		if _, err := db.ExecContext(ctx, createSQL(cfg, t, n)); err != nil {
			return nil, fmt.Errorf("create %s: %w", table(n), err)
		}
	}
	per := max(1, (cfg.TableSize+cfg.Threads-1)/cfg.Threads)
	if cfg.Tables >= cfg.Threads {
		per = max(cfg.TableSize, 1)
	}
	work := make(chan chunk)
	left := make([]int, cfg.Tables+1) // chunks still loading per table
	var chunks []chunk
	for n := 1; n <= cfg.Tables; n++ {
		for from := 1; from <= cfg.TableSize; from += per {
			chunks = append(chunks, chunk{n, from, min(from+per-1, cfg.TableSize)})
			left[n]++
		}
	}
	loaded := make([]atomic.Int64, cfg.Tables+1) // rows inserted per table
	var mu sync.Mutex
	var firstErr error
	setErr := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for w := 0; w < cfg.Threads; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				if err := insertChunk(ctx, db, cfg, t, c, &loaded[c.table]); err != nil {
					setErr(err)
					continue
				}
				mu.Lock()
				left[c.table]--
				done := left[c.table] == 0
				mu.Unlock()
				if done && cfg.CreateSecondary {
					q := fmt.Sprintf("CREATE INDEX k_%d ON `%s`.%s(k)", c.table, t.Database(), table(c.table))
					if _, err := db.ExecContext(ctx, q); err != nil {
						setErr(fmt.Errorf("index on %s: %w", table(c.table), err))
					}
				}
			}
		}()
	}
	for _, c := range chunks {
		work <- c
	}
	close(work)
	wg.Wait()
	if cfg.CreateSecondary && cfg.TableSize == 0 {
		for n := 1; n <= cfg.Tables; n++ {
			if _, err := db.ExecContext(ctx, fmt.Sprintf("CREATE INDEX k_%d ON `%s`.%s(k)", n, t.Database(), table(n))); err != nil {
				setErr(err)
			}
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return sizes(ctx, db, cfg, t, loaded)
}

func insertChunk(ctx context.Context, db *sql.DB, cfg Config, t targets.Target, c chunk, rows *atomic.Int64) error {
	g := synth.NewRand(cfg.Dist, cfg.Seed, uint64(c.table)<<32|uint64(c.from))
	prefix := fmt.Sprintf("INSERT INTO `%s`.%s (id, k, c, pad) VALUES ", t.Database(), table(c.table))
	b := make([]byte, 0, cfg.BatchRows*200)
	for from := c.from; from <= c.to; from += cfg.BatchRows {
		b = append(b[:0], prefix...)
		for id := from; id <= min(from+cfg.BatchRows-1, c.to); id++ {
			if id > from {
				b = append(b, ',')
			}
			b = append(b, '(')
			b = strconv.AppendInt(b, int64(id), 10)
			b = append(b, ',')
			b = strconv.AppendUint(b, uint64(g.Default(1, uint32(cfg.TableSize))), 10)
			b = append(b, ",'"...)
			b = g.String(b, synth.CTemplate)
			b = append(b, "','"...)
			b = g.String(b, synth.PadTemplate)
			b = append(b, "')"...)
		}
		res, err := db.ExecContext(ctx, string(b))
		if err != nil {
			return fmt.Errorf("load %s rows %d..: %w", table(c.table), from, err)
		}
		n, _ := res.RowsAffected()
		rows.Add(n)
		if cfg.rows != nil {
			cfg.rows.Add(n)
		}
	}
	return nil
}

// sizes reports rows (as inserted) and bytes per table, analyzing the
// tables concurrently. MyRocks keeps fresh rows in its memtable, which
// information_schema does not count: it is flushed first.
func sizes(ctx context.Context, db *sql.DB, cfg Config, t targets.Target, loaded []atomic.Int64) ([]TableReport, error) {
	if t.Engine == "ROCKSDB" {
		if _, err := db.ExecContext(ctx, "SET GLOBAL rocksdb_force_flush_memtable_now = 1"); err != nil {
			return nil, fmt.Errorf("flush MyRocks memtable for sizes: %w", err)
		}
	}
	out := make([]TableReport, cfg.Tables)
	errs := make([]error, cfg.Tables)
	var wg sync.WaitGroup
	for n := 1; n <= cfg.Tables; n++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &out[n-1]
			*tr = TableReport{Table: table(n), Rows: loaded[n].Load()}
			rows, err := db.QueryContext(ctx, fmt.Sprintf("ANALYZE TABLE `%s`.%s", t.Database(), table(n)))
			if err != nil {
				errs[n-1] = err
				return
			}
			rows.Close()
			errs[n-1] = db.QueryRowContext(ctx, "SELECT COALESCE(DATA_LENGTH,0), COALESCE(INDEX_LENGTH,0) FROM information_schema.TABLES WHERE TABLE_SCHEMA=? AND TABLE_NAME=?",
				t.Database(), table(n)).Scan(&tr.DataBytes, &tr.IndexBytes)
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// WriteText prints the reports side by side, a line per table.
func WriteText(w io.Writer, reps []TargetReport, cleanup bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if cleanup {
		for _, r := range reps {
			fmt.Fprintf(tw, "%s\tdropped sbtest tables in %s\t\n", r.Target, r.Database)
		}
		return tw.Flush()
	}
	fmt.Fprintln(tw, "TARGET\tENGINE\tTABLE\tROWS\tDATA MiB\tINDEX MiB\tTOTAL MiB\t")
	for _, r := range reps {
		var rows, data, idx int64
		for _, t := range r.Tables {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.2f\t%.2f\t%.2f\t\n", r.Target, engineLabel(r), t.Table, t.Rows, mib(t.DataBytes), mib(t.IndexBytes), mib(t.DataBytes+t.IndexBytes))
			rows, data, idx = rows+t.Rows, data+t.DataBytes, idx+t.IndexBytes
		}
		fmt.Fprintf(tw, "%s\t%s\tall\t%d\t%.2f\t%.2f\t%.2f\t\n", r.Target, engineLabel(r), rows, mib(data), mib(idx), mib(data+idx))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range reps {
		var rows int64
		for _, t := range r.Tables {
			rows += t.Rows
		}
		fmt.Fprintf(w, "%s: %d rows loaded in %.2fs (%.0f rows/s) on %s\n", r.Target, rows, r.Elapsed.Seconds(), float64(rows)/r.Elapsed.Seconds(), r.Version)
	}
	return nil
}

func engineLabel(r TargetReport) string {
	if r.Options == "" {
		return r.Engine
	}
	return r.Engine + " " + strings.ReplaceAll(r.Options, " ", ",")
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
