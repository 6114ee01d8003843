// Command tandem captures MySQL-protocol traffic and replays it against
// several storage engines at once to compare their latency and results.
//
// Each subcommand turns its flags into a Config and calls the package that
// does the work; errors come back here, are printed as one message and end
// the process with status 1.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	_ "github.com/tandemdb/tandem/internal/cmalloc"
	"github.com/tandemdb/tandem/internal/version"
)

func main() {
	// go-sql-driver's own notes ("[mysql] 2026/12/06 … packets.go:58 read
	// tcp …: connection reset by peer") came out as a foreign line before
	// tandem's error; they say why a connection was lost, so they stay,
	// said as tandem says things.
	mysql.SetLogger(driverLog{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot().ExecuteContext(ctx)
	stop()
	stopProfile()
	if err != nil {
		fmt.Fprintf(os.Stderr, "tandem: %v\n", err)
		code := 1
		if es := (*exitStatus)(nil); errors.As(err, &es) {
			code = es.code
		}
		os.Exit(code)
	}
}

// exitStatus is an error that ends the process with a status of its own
// instead of 1: replay's and sweep's 2 (a run that completed while a
// target failed) and 130 (an interrupted run).
type exitStatus struct {
	code int
	err  error
}

func (e *exitStatus) Error() string { return e.err.Error() }
func (e *exitStatus) Unwrap() error { return e.err }

// driverLog writes go-sql-driver's notes as "tandem: mysql driver: …",
// without the driver's source position.
type driverLog struct{}

var driverPos = regexp.MustCompile(`^[a-z_]+\.go:\d+ `)

func (driverLog) Print(v ...any) {
	fmt.Fprintf(os.Stderr, "tandem: mysql driver: %s\n", driverPos.ReplaceAllString(strings.TrimSpace(fmt.Sprint(v...)), ""))
}

// stopProfile ends a --cpuprofile; it runs whether the command failed or not.
var stopProfile = func() {}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "tandem",
		Short: "Compare MySQL storage engines on your own traffic",
		Long: `Tandem records MySQL-protocol traffic (through a proxy, or synthesized
sysbench-style) into a capture, replays it against several servers at once —
typically the same server version with different storage engines — and tells
you, per statement, which engine is faster and where results differ.`,
		Version:       version.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%v; %s", err, helpHint(c))
	})
	var cpuProfile string
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a Go CPU profile of this command to `FILE` (for diagnosing Tandem itself; read with 'go tool pprof')")
	root.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		if cpuProfile == "" {
			return nil
		}
		f, err := os.Create(cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		stopProfile = func() {
			pprof.StopCPUProfile()
			f.Close()
		}
		return nil
	}
	root.AddCommand(newSandboxCmd(), newPrepareCmd(), newProxyCmd(), newCaptureCmd(), newSynthCmd(), newReplayCmd(), newReportCmd(), newInspectCmd(), newAlignCmd(), newFootprintCmd(), newSweepCmd(), newPackCmd(), newShadowWorkerCmd())
	// cobra's own help and completion commands answered a topic or shell
	// they do not know with the usage and exit status 0.
	root.SetHelpCommand(newHelpCmd())
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			refuseUnknownSubcommands(c)
		}
	}
	return root
}

// newHelpCmd is "tandem help [command]": a command's help, or an error
// for one that does not exist.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "Prints the help of a command, as 'tandem COMMAND --help' does.",
		Args:  cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			switch {
			case err != nil:
				return unknownSubcommand(c.Root(), args[0])
			case len(rest) > 0 && cmd.HasSubCommands():
				return unknownSubcommand(cmd, rest[0])
			}
			cmd.InitDefaultHelpFlag() // listed in the help, as with --help
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
		// "tandem help <TAB>" completes command names, as cobra's does.
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			cmd, _, err := c.Root().Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, sub := range cmd.Commands() {
				if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
					out = append(out, cobra.CompletionWithDesc(sub.Name(), sub.Short))
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
	}
}

// refuseUnknownSubcommands makes c, a command that only groups others,
// refuse what is none of them (cobra prints the help and exits 0: "tandem
// sandbox stop" left a script going on with its servers running).
func refuseUnknownSubcommands(c *cobra.Command) {
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		return unknownSubcommand(c, args[0])
	}
}

// unknownSubcommand says that c has no command name, suggesting the
// closest and listing those it has.
func unknownSubcommand(c *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, c.CommandPath())
	c.SuggestionsMinimumDistance = 2
	if s := c.SuggestionsFor(name); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	var names []string
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	return fmt.Errorf("%s; its commands: %s; %s", msg, strings.Join(names, ", "), helpHint(c))
}

// commandPath is c's path without the leading "tandem".
func commandPath(c *cobra.Command) string {
	p := c.CommandPath()
	if len(p) > len("tandem ") {
		return p[len("tandem "):]
	}
	return ""
}

// helpHint is "see 'tandem CMD --help'" for c ("see 'tandem --help'" for
// the root: it read "tandem  --help").
func helpHint(c *cobra.Command) string {
	if p := commandPath(c); p != "" {
		return "see 'tandem " + p + " --help'"
	}
	return "see 'tandem --help'"
}

// noArgs is cobra.NoArgs with a message that says what to do.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		if hint := onOffHint(c, args); hint != "" {
			return errors.New(hint)
		}
		return fmt.Errorf("unexpected argument %q; %s", args[0], helpHint(c))
	}
	return nil
}

// atLeast1 refuses a count flag below 1: the libraries read 0 as their
// default, which a user who typed 0 did not mean.
func atLeast1(flag string, v int) error {
	if v < 1 {
		return fmt.Errorf("%s %d: want 1 or more", flag, v)
	}
	return nil
}

// notNegative refuses a duration flag below 0.
func notNegative(flag string, v time.Duration) error {
	if v < 0 {
		return fmt.Errorf("%s %v: want 0 or more", flag, v)
	}
	return nil
}

// onOffHint says how to give an on|off flag its value when args hold one
// written after a space (--auto-inc off: the flag took its default "on",
// and "off" became an argument), or "".
func onOffHint(c *cobra.Command, args []string) string {
	var value string
	for _, a := range args {
		switch strings.ToLower(a) {
		case "on", "off", "true", "false", "yes", "no":
			value = a
		}
	}
	if value == "" {
		return ""
	}
	var named []string
	c.Flags().Visit(func(f *pflag.Flag) {
		if f.Value.Type() == "on|off" {
			named = append(named, f.Name)
		}
	})
	if len(named) != 1 {
		return fmt.Sprintf("unexpected argument %q: an on|off flag takes its value with '=' (--flag=%s); %s", value, value, helpHint(c))
	}
	return fmt.Sprintf("unexpected argument %q: --%s takes its value with '=': --%s=%s (alone it means on)", value, named[0], named[0], value)
}

// printJSON writes v as indented JSON: every --json flag prints this way.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
