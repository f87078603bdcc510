package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// execute runs the command line args, writing to stdout and stderr, and
// returns the exit status.
func execute(args []string, stdout, stderr io.Writer) (code int) {
	// A URL given where it is not expected could be quoted back by the
	// flag parser: every URL in sight is hidden from the start.
	registerSecrets(os.Getenv(envNodes))
	for _, a := range args {
		if strings.Contains(a, "://") {
			registerSecrets(a)
		}
	}
	out, errw := &scrubWriter{w: stdout}, &scrubWriter{w: stderr}
	defer recoverPanic(stderr, &code)
	root := newRootCmd(out, errw)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	var e *exitError
	switch {
	case errors.As(err, &e) && e.msg != "":
		fmt.Fprintf(errw, "redlock: %s\n", printableLines(e.msg))
	case e == nil:
		// An error from parsing the command line. cobra indents its
		// suggestions ("Did you mean this?") with tabs, which
		// printableLines would show escaped; the user's words in it are
		// quoted.
		fmt.Fprintf(errw, "redlock: %s\n", printableLines(strings.ReplaceAll(err.Error(), "\n\t", "\n  ")))
	}
	// Not after a report that said what is wrong (doctor's).
	if exitCode(err) == exitUsage && (e == nil || e.msg != "") {
		fmt.Fprintf(errw, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return exitCode(err)
}

// recoverPanic, deferred, ends a panic of the goroutine with exit status
// 70 and a message on stderr from which the node URLs' user information
// and passwords are removed: a panic's own report would bypass the
// scrubber.
func recoverPanic(stderr io.Writer, code *int) {
	p := recover()
	if p == nil {
		return
	}
	fmt.Fprintf(stderr, "redlock: internal error (a bug; please report it): %s\n%s", scrubAll(fmt.Sprint(p)), scrubAll(string(debug.Stack())))
	*code = exitSoftware
}

// newRootCmd returns the redlock command with its subcommands.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	nf := &nodeFlags{stderr: stderr}
	root := &cobra.Command{
		Use:   "redlock",
		Short: "Run commands under a Redlock distributed lock, and check its Redis nodes",
		// The first screen: the long material is in the help topics.
		Long: rootLine,
		Example: `  export REDLOCK_NODES=redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
  redlock run nightly-report -- ./make-report.sh
  redlock elect scheduler -- ./scheduler         # one leader, standbys wait
  redlock inspect nightly-report                 # who holds it
  redlock doctor                                 # are the nodes fit for Redlock?`,
		Version:           versionString(),
		SilenceErrors:     true,
		SilenceUsage:      true,
		DisableAutoGenTag: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("redlock {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%v", err)
	})
	pf := root.PersistentFlags()
	pf.SortFlags = false // the nodes first, then how they are judged, then TLS
	pf.Var((*urlList)(&nf.nodes), "nodes", "the Redis nodes: URLs separated by commas (default $"+envNodes+", else "+defaultNodes+"); see 'redlock help nodes'")
	pf.StringVar(&nf.nodesFile, "nodes-file", "", "read the node URLs from FILE, one a line, which keeps passwords out of ps (default $"+envNodesFile+")")
	pf.DurationVar(&nf.quarantine, "quarantine", 0, "least restart quarantine: a node started more recently than this does not vote (default: learned from the TTLs in use)")
	pf.BoolVar(&nf.noQuarantine, "no-quarantine", false, "let nodes vote however recently they started (only for appendfsync always, or nodes nobody locked on before)")
	nf.tls.register(pf)
	root.RegisterFlagCompletionFunc("nodes", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"redis://", "rediss://", "unix://"}, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
	})

	root.AddCommand(newRunCmd(nf), newElectCmd(nf), newLeaderCmd(nf), newInspectCmd(nf, "inspect"), newInspectCmd(nf, "status"),
		newReleaseCmd(nf), newDoctorCmd(nf), newDemoCmd(nf))
	setHelp(root)
	return root
}

// urlList is the value of --nodes: every use adds to the list.
type urlList []string

func (l *urlList) String() string {
	// The URLs may hold passwords; the help text must not show them.
	shown := make([]string, len(*l))
	for i, u := range *l {
		shown[i] = shownURL(u)
	}
	return strings.Join(shown, ",")
}

func (l *urlList) Set(s string) error {
	registerSecrets(s)
	*l = append(*l, s)
	return nil
}

func (l *urlList) Type() string { return "URLs" }

// noArgsCompletion completes nothing: for arguments such as lock keys.
func noArgsCompletion(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return nil, cobra.ShellCompDirectiveNoFileComp
}
