package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

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
loaded, default engine ROCKSDB). Servers keep running after the command ends;
stop them with 'tandem sandbox down'.`,
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", sandbox.DefaultDir, "sandbox directory (one sub-directory per profile)")
	cmd.AddCommand(newSandboxUpCmd(&dir), newSandboxStatusCmd(&dir), newSandboxDownCmd(&dir), newSandboxEnvCmd(&dir))
	return cmd
}

func newSandboxUpCmd(dir *string) *cobra.Command {
	cfg := sandbox.Config{}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "up [PROFILE...]",
		Short: "Start sandboxed servers (default: innodb and rocksdb) and print their DSNs",
		Example: `  tandem sandbox up                      # innodb and rocksdb on free ports
  tandem sandbox up rocksdb --port 3307
  tandem sandbox up --server-option rocksdb:rocksdb-default-cf-options=compression=kZSTD`,
		RunE: func(c *cobra.Command, args []string) error {
			cfg.Dir, cfg.Profiles = *dir, args
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
	f.BoolVar(&asJSON, "json", false, "print JSON")
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
		Use:   "down [PROFILE...]",
		Short: "Stop sandboxed servers cleanly (all, or the profiles named)",
		Example: `  tandem sandbox down            # stop all, keep their data for the next 'up'
  tandem sandbox down --purge    # stop all and remove their data`,
		RunE: func(c *cobra.Command, args []string) error {
			srvs, err := sandbox.Down(c.Context(), *dir, args, purge)
			for _, s := range srvs {
				what := "stopped"
				if purge {
					what = "stopped and purged"
				}
				fmt.Fprintf(c.OutOrStdout(), "%s: %s\n", s.Profile, what)
			}
			return err
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
form), TANDEM_P_MARIADB (arguments for the mariadb CLI) and TANDEM_P_CA, upper-cased.

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
				p := "TANDEM_" + strings.ToUpper(s.Profile)
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
