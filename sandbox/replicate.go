package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Replicated is one replica Replicate set up.
type Replicated struct {
	Server
	// Position is the replica's GTID position once it caught up.
	Position string `json:"gtid_position"`
	// Tables is how many tables the dump created on it, in Engine.
	Tables int `json:"tables"`
}

// Replicate seeds each replica with the primary's databases from one
// consistent dump that carries its GTID position (mariadb-dump
// --single-transaction --gtid --master-data=1), the tables created in the
// replica profile's engine (ENGINE=InnoDB rewritten, as a user converting
// a replica does), then starts replication from the primary with GTIDs
// (master_use_gtid=slave_pos) and waits until each has caught up with the
// primary's position at that moment. What the replica held of those
// databases is replaced.
func Replicate(ctx context.Context, primary Server, replicas []Server, databases []string, timeout time.Duration) ([]Replicated, error) {
	if len(databases) == 0 {
		return nil, errors.New("sandbox: replicate which databases? name them (--databases)")
	}
	dump, err := findTool("mariadb-dump", "mysqldump")
	if err != nil {
		return nil, err
	}
	client, err := findTool("mariadb", "mysql")
	if err != nil {
		return nil, err
	}
	file := filepath.Join(primary.Dir, "replicate-dump.sql")
	f, err := os.Create(file)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	defer os.Remove(file)
	args := append([]string{"--no-defaults", "-h127.0.0.1", "-P" + strconv.Itoa(primary.Port), "-uroot",
		"--single-transaction", "--gtid", "--master-data=1", "--databases"}, databases...)
	cmd := exec.CommandContext(ctx, dump, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = f, &stderr
	err = cmd.Run()
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %s of %s on %s: %v: %s", filepath.Base(dump), strings.Join(databases, ", "), primary.Profile, err, strings.TrimSpace(stderr.String()))
	}
	var out []Replicated
	for _, r := range replicas {
		p, err := LookupProfile(r.Profile)
		if err != nil {
			return out, err
		}
		rep, err := seed(ctx, client, file, primary, r, p.Engine, timeout)
		if err != nil {
			return out, fmt.Errorf("sandbox: replica %s: %w", r.Profile, err)
		}
		out = append(out, rep)
	}
	return out, nil
}

var engineClause = regexp.MustCompile(`(?i)^(\).*\bENGINE=)InnoDB\b`)

func seed(ctx context.Context, client, file string, primary, r Server, engine string, timeout time.Duration) (Replicated, error) {
	rep := Replicated{Server: r}
	db, err := sql.Open("mysql", r.DSN(""))
	if err != nil {
		return rep, err
	}
	defer db.Close()
	// The mark of an earlier replay onto it (gtid.MarkerDB) goes with its old rows.
	for _, q := range []string{"STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL gtid_slave_pos=''", "DROP DATABASE IF EXISTS `tandem`"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return rep, fmt.Errorf("%s: %w", q, err)
		}
	}
	in, err := os.Open(file)
	if err != nil {
		return rep, err
	}
	defer in.Close()
	pr, pw := io.Pipe()
	tables := make(chan int, 1)
	go func() {
		n := 0
		defer func() { tables <- n }()
		// Rewrite each CREATE TABLE's engine for the replica's.
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 1<<20), 1<<30)
		w := bufio.NewWriter(pw)
		for sc.Scan() {
			line := sc.Text()
			if !strings.EqualFold(engine, "InnoDB") && engineClause.MatchString(line) {
				line = engineClause.ReplaceAllString(line, "${1}"+engine)
				n++
			} else if engineClause.MatchString(line) {
				n++
			}
			w.WriteString(line)
			w.WriteByte('\n')
		}
		if err := sc.Err(); err != nil {
			pw.CloseWithError(err)
			return
		}
		pw.CloseWithError(w.Flush())
	}()
	cmd := exec.CommandContext(ctx, client, "--no-defaults", "-h127.0.0.1", "-P"+strconv.Itoa(r.Port), "-uroot")
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stderr = pr, &stderr
	err = cmd.Run()
	pr.Close()
	rep.Tables = <-tables
	if err != nil {
		return rep, fmt.Errorf("loading the dump: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	change := fmt.Sprintf("CHANGE MASTER TO master_host='127.0.0.1', master_port=%d, master_user='root', master_use_gtid=slave_pos", primary.Port)
	for _, q := range []string{change, "START SLAVE"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return rep, fmt.Errorf("%s: %w", q, err)
		}
	}
	// Caught up with the primary as it is now.
	pdb, err := sql.Open("mysql", primary.DSN(""))
	if err != nil {
		return rep, err
	}
	defer pdb.Close()
	var pos string
	if err := pdb.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		return rep, fmt.Errorf("reading the primary's position: %w", err)
	}
	var got sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, ?)", pos, timeout.Seconds()).Scan(&got); err != nil {
		return rep, fmt.Errorf("waiting for the replica to reach %s: %w", pos, err)
	}
	if !got.Valid || got.Int64 != 0 {
		return rep, fmt.Errorf("it did not reach the primary's position %s within %s; see SHOW SLAVE STATUS on it", pos, timeout)
	}
	if err := db.QueryRowContext(ctx, "SELECT @@gtid_current_pos").Scan(&rep.Position); err != nil {
		return rep, err
	}
	return rep, nil
}

func findTool(names ...string) (string, error) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: none of %s is on PATH; install the Debian package mariadb-client", ErrNoServer, strings.Join(names, ", "))
}
