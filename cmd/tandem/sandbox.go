package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/tandemdb/tandem/sandbox"
)

func newSandboxCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Start, show and stop local MariaDB servers (InnoDB, MyRocks) for trying Tandem",
		Long: `A sandbox is a set of local MariaDB servers, one per profile, each with its own
data directory under --dir, listening on a loopback port, root without a
password. Profiles: innodb (default engine InnoDB) and rocksdb (MyRocks plugin
loaded, default engine ROCKSDB); innodb-lower-case (InnoDB, table names that
ignore case: lower_case_table_names=1, as MySQL on Windows and macOS and
some production servers); and the replication topology the production
path needs (--topology replication): primary (InnoDB, binary log, GTIDs,
row-based), replica-innodb, replica-rocksdb, replica-zstd (MyRocks with zstd
column families) and reference (InnoDB, for production's end state), each
with a server id of its own; 'tandem sandbox replicate' seeds the replicas
from the primary and starts replication. Servers keep running after the
command ends; stop them with 'tandem sandbox down'.

A new server's data directory is a copy of a pristine one that
mariadb-install-db made once per server build, kept in ~/.cache/tandem/sandbox;
$` + sandbox.CacheEnv + ` names another directory, or is off to install
every server.`,
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", sandbox.DefaultDir, "sandbox directory (one sub-directory per profile)")
	cmd.AddCommand(newSandboxUpCmd(&dir), newSandboxStatusCmd(&dir), newSandboxDownCmd(&dir), newSandboxEnvCmd(&dir), newSandboxReplicateCmd(&dir))
	// Without a command of its own, cobra answered a mistyped one
	// ("tandem sandbox stop") with the help and exit status 0: a script
	// went on with its servers still running.
	refuseUnknownSubcommands(cmd)
	return cmd
}

func newSandboxUpCmd(dir *string) *cobra.Command {
	cfg := sandbox.Config{}
	var asJSON bool
	var topology string
	cmd := &cobra.Command{
		Use:   "up [PROFILE...]",
		Short: "Start sandboxed servers (default: innodb and rocksdb) and print their DSNs",
		Example: `  tandem sandbox up                      # innodb and rocksdb on free ports
  tandem sandbox up rocksdb --port 3307
  tandem sandbox up --server-option rocksdb:rocksdb-default-cf-options=compression=kZSTD
  tandem sandbox up --topology replication   # primary + replicas (then: tandem sandbox replicate)`,
		RunE: func(c *cobra.Command, args []string) error {
			if cfg.Port < 0 || cfg.Port > 65535 {
				return fmt.Errorf("--port %d is not a TCP port (1-65535; 0: free ports)", cfg.Port)
			}
			if cfg.StartTimeout < 0 {
				return fmt.Errorf("--timeout %v: want how long a server may take to answer, more than 0", cfg.StartTimeout)
			}
			cfg.Dir, cfg.Profiles = *dir, args
			switch topology {
			case "":
			case "replication":
				cfg.Profiles = append(cfg.Profiles, sandbox.ReplicationProfiles...)
			default:
				return fmt.Errorf("--topology %q: the one topology is replication (a primary with replicas: %s)", topology, strings.Join(sandbox.ReplicationProfiles, ", "))
			}
			srvs, err := sandbox.Up(c.Context(), cfg)
			if err != nil {
				return err
			}
			return printServers(c.OutOrStdout(), srvs, asJSON)
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Port, "port", 0, "port of the first profile; the next ones take the following ports (0: free ports)")
	f.StringArrayVar(&cfg.ServerOptions, "server-option", nil, "extra mariadbd option, `[PROFILE:]OPTION`, repeatable")
	f.StringVar(&cfg.Server, "mariadbd", "", "server binary (default: mariadbd or mysqld on PATH)")
	f.DurationVar(&cfg.StartTimeout, "timeout", 0, "how long a server may take to answer (default 60s)")
	f.StringVar(&topology, "topology", "", "replication: also start the primary and its replicas ("+strings.Join(sandbox.ReplicationProfiles, ", ")+")")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newSandboxReplicateCmd(dir *string) *cobra.Command {
	var databases []string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "replicate --databases DB[,DB…] [REPLICA...]",
		Short: "Seed the sandbox's replicas from its primary and start replication (GTIDs)",
		Long: `Dumps the primary's databases once, consistently and with their GTID position
(mariadb-dump --single-transaction --gtid --master-data=1), loads the dump into
each replica with its tables in the replica's engine (ENGINE=InnoDB rewritten to
ROCKSDB on the MyRocks replicas, as a user converting a replica does), then
starts replication from the primary (master_use_gtid=slave_pos) and waits until
each replica has caught up. Replicas: the running replica profiles (or those
named). What a replica held of those databases is replaced.`,
		Example: `  tandem sandbox up --topology replication
  tandem prepare --tables 4 --table-size 20000 --target primary="$TANDEM_PRIMARY_DSN"sbtest
  tandem sandbox replicate --databases sbtest`,
		RunE: func(c *cobra.Command, args []string) error {
			srvs, err := sandbox.Status(c.Context(), *dir)
			if err != nil {
				return err
			}
			var primary *sandbox.Server
			var replicas []sandbox.Server
			want := map[string]bool{}
			for _, a := range args {
				p, err := sandbox.LookupProfile(a)
				if err != nil {
					return err
				}
				if !p.Replica {
					return fmt.Errorf("%s is not a replica profile (replicas: %s)", a, strings.Join(sandbox.ReplicationProfiles[1:], ", "))
				}
				want[p.Name] = true
			}
			for i, s := range srvs {
				p, err := sandbox.LookupProfile(s.Profile)
				switch {
				case err != nil || !s.Running:
				case s.Profile == "primary":
					primary = &srvs[i]
				case p.Replica && (len(want) == 0 || want[s.Profile]):
					replicas = append(replicas, s)
				}
			}
			if primary == nil {
				return fmt.Errorf("%w: the sandbox in %s has no running primary; start it with 'tandem sandbox up --topology replication'", sandbox.ErrNotRunning, *dir)
			}
			if len(replicas) == 0 || len(want) > 0 && len(replicas) != len(want) {
				return fmt.Errorf("%w: no running replica to seed (named: %v); start them with 'tandem sandbox up --topology replication'", sandbox.ErrNotRunning, args)
			}
			reps, err := sandbox.Replicate(c.Context(), *primary, replicas, databases, timeout)
			for _, r := range reps {
				fmt.Fprintf(c.OutOrStdout(), "%s: %d tables in %s, replicating from primary (%s), at %s\n", r.Profile, r.Tables, r.Engine, primary.Addr(), r.Position)
			}
			return err
		},
	}
	cmd.Flags().StringSliceVar(&databases, "databases", nil, "the primary's databases to replicate (required)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long each replica may take to catch up")
	return cmd
}

func newSandboxStatusCmd(dir *string) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "status",
		Short:   "Show the sandbox's servers, running or not",
		Example: `  tandem sandbox status --json`,
		Args:    noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			srvs, err := sandbox.Status(c.Context(), *dir)
			if err != nil {
				return err
			}
			if len(srvs) == 0 && !asJSON {
				fmt.Fprintf(c.OutOrStdout(), "no sandbox in %s; start one with 'tandem sandbox up'\n", *dir)
				return nil
			}
			return printServers(c.OutOrStdout(), srvs, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newSandboxDownCmd(dir *string) *cobra.Command {
	var purge bool
	cmd := &cobra.Command{
		Use:        "down [PROFILE...]",
		SuggestFor: []string{"stop", "halt", "kill"},
		Short:      "Stop sandboxed servers cleanly (all, or the profiles named)",
		Example: `  tandem sandbox down            # stop all, keep their data for the next 'up'
  tandem sandbox down --purge    # stop all and remove their data`,
		RunE: func(c *cobra.Command, args []string) error {
			srvs, err := sandbox.Down(c.Context(), *dir, args, purge)
			out := c.OutOrStdout()
			for _, s := range srvs {
				what := "stopped"
				if purge {
					what = "stopped and purged"
				}
				fmt.Fprintf(out, "%s: %s\n", s.Profile, what)
			}
			if err != nil {
				return err
			}
			// Nothing to stop is no failure (a clean-up may run twice),
			// but it is said: it printed nothing before.
			if len(args) == 0 && len(srvs) == 0 {
				fmt.Fprintf(out, "no sandbox in %s: nothing to stop\n", *dir)
			}
			for _, name := range args {
				if !slices.ContainsFunc(srvs, func(s sandbox.Server) bool { return strings.EqualFold(s.Profile, name) }) {
					fmt.Fprintf(out, "%s: not in the sandbox in %s: nothing to stop\n", name, *dir)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&purge, "purge", false, "also remove the servers' directories and data")
	return cmd
}

func newSandboxEnvCmd(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "env",
		Short: "Print shell variables for the running servers (eval \"$(tandem sandbox env)\")",
		Long: `Prints, for each running profile P, TANDEM_P_PORT, TANDEM_P_DSN (go-sql-driver
form), TANDEM_P_MARIADB (arguments for the mariadb CLI) and TANDEM_P_CA, upper-cased
(a profile's '-' as '_': TANDEM_REPLICA_ROCKSDB_DSN).

Every sandboxed server offers TLS with certificates the sandbox made for it:
TANDEM_P_CA is the CA to verify it with (mariadb --ssl-ca, tandem proxy
--backend-tls --backend-ca); its certificate and key are next to it.`,
		Example: `  eval "$(tandem sandbox env)"
  mariadb $TANDEM_ROCKSDB_MARIADB -e 'SHOW ENGINES'
  mariadb $TANDEM_INNODB_MARIADB --ssl-ca=$TANDEM_INNODB_CA --ssl-verify-server-cert -e "SHOW STATUS LIKE 'Ssl_cipher'"`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			srvs, err := sandbox.Status(c.Context(), *dir)
			if err != nil {
				return err
			}
			n := 0
			for _, s := range srvs {
				if !s.Running {
					continue
				}
				n++
				p := "TANDEM_" + strings.ToUpper(strings.ReplaceAll(s.Profile, "-", "_"))
				fmt.Fprintf(c.OutOrStdout(), "%s_PORT=%d\n%s_DSN='%s'\n%s_MARIADB='-h127.0.0.1 -P%d -uroot'\n%s_CA='%s'\n",
					p, s.Port, p, s.DSN(""), p, s.Port, p, s.CAFile())
			}
			if n == 0 {
				return fmt.Errorf("%w: no server of the sandbox in %s is running; start them with 'tandem sandbox up'", sandbox.ErrNotRunning, *dir)
			}
			return nil
		},
	}
}

func printServers(w io.Writer, srvs []sandbox.Server, asJSON bool) error {
	if asJSON {
		type row struct {
			sandbox.Server
			Running bool   `json:"running"`
			Addr    string `json:"addr"`
			DSN     string `json:"dsn"`
		}
		rows := make([]row, 0, len(srvs))
		for _, s := range srvs {
			rows = append(rows, row{Server: s, Running: s.Running, Addr: s.Addr(), DSN: s.DSN("")})
		}
		return printJSON(w, rows)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROFILE\tENGINE\tSTATE\tADDRESS\tVERSION\tDSN")
	for _, s := range srvs {
		state, addr, dsn := "stopped", "-", "-"
		if s.Running {
			state, addr, dsn = fmt.Sprintf("running (pid %d)", s.PID), s.Addr(), s.DSN("")
		}
		v := s.Version
		if v == "" {
			v = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Profile, s.Engine, state, addr, v, dsn)
	}
	return tw.Flush()
}
