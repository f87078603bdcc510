package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// This file lays out the help screens and holds the help topics: the
// material every command shares, which 'redlock help TOPIC' shows, so that
// the first screen and each command's help stay short.

// rootLine says what redlock is, in one line: the first line of the first
// screen.
const rootLine = "redlock runs commands under a Redlock distributed lock on N Redis nodes."

// helpTemplate shows the first screen for redlock itself, a topic's text
// for a topic, and for a command its usage, flags and examples first, its
// description after them.
const helpTemplate = `{{if not .HasParent}}{{.UsageString}}{{else if .IsAdditionalHelpTopicCommand}}{{.Long | trimTrailingWhitespaces}}
{{else}}{{.UsageString}}{{with .Long}}
Description:
{{. | trimTrailingWhitespaces}}
{{end}}{{end}}`

// usageTemplate is the first screen for redlock itself, and the usage,
// flags and examples of a command. GLOBALS stands for the names of the
// flags that every command takes, filled in by usageTemplateFor.
const usageTemplate = `{{if not .HasParent}}{{.Long}}

Usage:
  {{.CommandPath}} [flags] COMMAND [ARGS...]

Available Commands:{{range .Commands}}{{if .IsAvailableCommand}}
  {{rpad .Name .NamePadding}} {{.Short}}{{end}}{{end}}

Examples:
{{.Example}}

Additional help topics:{{range .Commands}}{{if and .IsAdditionalHelpTopicCommand (not (index .Annotations "details"))}} {{.Name}}{{end}}{{end}}
Read one with "{{.CommandPath}} help TOPIC", and a command's help with "{{.CommandPath}} help COMMAND".
{{else}}Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags (what they do: '{{.Root.Name}} help flags'):
GLOBALS{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

Available Commands:{{range .Commands}}{{if .IsAvailableCommand}}
  {{rpad .Name .NamePadding}} {{.Short}}{{end}}{{end}}{{end}}
{{end}}`

// usageTemplateFor returns usageTemplate with the names of the flags
// in global, which every command inherits.
func usageTemplateFor(global *pflag.FlagSet) string {
	var names []string
	global.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, "--"+f.Name)
		}
	})
	return strings.Replace(usageTemplate, "GLOBALS", wrapList(names, "  ", 78), 1)
}

// wrapList joins words with ", " into lines of at most width columns,
// each starting with indent.
func wrapList(words []string, indent string, width int) string {
	var b strings.Builder
	line := indent
	for i, w := range words {
		if i < len(words)-1 {
			w += ","
		}
		switch {
		case line == indent:
			line += w
		case len(line)+1+len(w) > width:
			b.WriteString(line + "\n")
			line = indent + w
		default:
			line += " " + w
		}
	}
	b.WriteString(line)
	return b.String()
}

// The commands are listed in the order they are added, most used first,
// and the help topics in the order a reader needs them.
func init() { cobra.EnableCommandSorting = false }

// setHelp lays out the help of root and of every command below it, and
// adds the help topics.
func setHelp(root *cobra.Command) {
	root.SetHelpCommand(newHelpCmd())
	root.SetHelpTemplate(helpTemplate)
	root.SetUsageTemplate(usageTemplateFor(root.PersistentFlags()))
	for _, t := range []struct{ name, short, long string }{
		{"nodes", "Node URLs, Redis Clusters, Sentinel and passwords", nodesHelp},
		{"tls", "TLS: certificates, private CAs and client certificates", tlsHelp},
		{"quarantine", "Restart quarantine: why a restarted node does not vote", quarantineHelp},
		{"exit-codes", "What each exit status means, command by command", exitCodesHelp},
		{"environment", "The variables redlock reads, and those it gives COMMAND", environmentHelp()},
		{"flags", "The flags that every command takes", flagsHelp(root.PersistentFlags())},
	} {
		// A command with neither Run nor subcommands is a help topic.
		root.AddCommand(&cobra.Command{Use: t.name, Short: t.short, Long: t.long})
	}
	fitScreens(root)
}

// maxScreen is the most lines that the first screen of any help may take:
// 'redlock help X' for a command or a topic.
const maxScreen = 40

// fitScreens makes the first screen of every command and topic of root
// fit maxScreen lines. What does not fit goes to a topic of its own,
// X-details, which the first screen names and the list of topics leaves
// out (its annotation "details" names X). For a command, the first screen keeps the first paragraph of its
// description and as many of its examples as fit; the topic has every
// example and the whole description. A topic keeps as many of its
// paragraphs as fit. The texts themselves stay whole where they are
// written, so that they are edited in one place.
func fitScreens(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" || helpLines(c) <= maxScreen {
			continue
		}
		topic := c.Name() + "-details"
		more := fmt.Sprintf("More: '%s help %s'", root.Name(), topic)
		var full string
		if c.Runnable() {
			full = fmt.Sprintf("%s %s, in full: every example, and the whole description.\n", root.Name(), c.Name())
			if c.Example != "" {
				full += "\nExamples:\n" + c.Example + "\n"
			}
			full += "\nDescription:\n" + c.Long
			summary, _, _ := strings.Cut(c.Long, "\n\n")
			c.Long = summary + "\n\n" + more + " has every example and the whole description."
			examples := strings.Split(c.Example, "\n\n")
			for n := len(examples); n >= 0 && helpLines(c) > maxScreen; n-- {
				c.Example = strings.Join(examples[:n], "\n\n")
			}
		} else {
			paras := strings.Split(c.Long, "\n\n")
			n := len(paras)
			for ; n > 1; n-- {
				c.Long = strings.Join(paras[:n], "\n\n") + "\n\n" + more + "."
				if helpLines(c) <= maxScreen {
					break
				}
			}
			full = fmt.Sprintf("%s help %s, continued.\n\n", root.Name(), c.Name()) + strings.Join(paras[n:], "\n\n")
		}
		root.AddCommand(&cobra.Command{Use: topic, Short: c.Short + ": the rest", Long: full,
			Annotations: map[string]string{"details": c.Name()}})
	}
}

// helpLines returns how many lines the help of c takes.
func helpLines(c *cobra.Command) int {
	var b strings.Builder
	c.InitDefaultHelpFlag()
	c.SetOut(&b)
	c.Help()
	c.SetOut(nil)
	return strings.Count(b.String(), "\n")
}

// newHelpCmd returns the command 'redlock help [COMMAND|TOPIC]'. Unlike
// cobra's own, it ends with the usage status for what it does not know.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [COMMAND|TOPIC]",
		Short: "Show the help of a command or a topic",
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []string
			for _, sub := range c.Root().Commands() {
				if (sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand()) && strings.HasPrefix(sub.Name(), toComplete) {
					names = append(names, sub.Name()+"\t"+sub.Short)
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, _, err := c.Root().Find(args)
			if cmd == nil || err != nil {
				return usagef("no help for %q: 'redlock help' lists the commands and the topics", strings.Join(args, " "))
			}
			cmd.InitDefaultHelpFlag()
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	}
}

// nodesHelp is the topic 'redlock help nodes'.
const nodesHelp = `Nodes come from --nodes or the environment variable ` + envNodes + `: a list of
URLs separated by commas or spaces (--nodes may also be given more than
once, and wins over ` + envNodes + `). Or they come from a file, named by
--nodes-file or ` + envNodesFile + `: one URL a line, where blank lines and
lines that begin with # are left out. The default is ` + defaultNodes + `.
A URL starts with redis://, rediss:// or unix://.

A node is one Redis server:

  redis://[[user]:password@]host[:port][/db]
  rediss://[[user]:password@]host[:port][/db]     (TLS: 'redlock help tls')
  unix://[[user]:password@]/path/to/socket[?db=N]

or a whole Redis Cluster, which is one node, one vote:

  redis://host:port?addr=host2:port2&addr=...     (a Redis Cluster, as one node)
  redis://host:port?cluster=true                  (a Redis Cluster by one address)

The port defaults to 6379 and the database to 0; a cluster has database 0
only. Client settings may follow as query parameters, such as
dial_timeout=2s.

Use independent masters (no replication between them) or masters whose
replicas only take over in a failover, or whole clusters, an odd number of
them: 3 survive one failure, 5 survive two. A replica named as a node
refuses every grant (READONLY), and a node of a Redis Cluster named by a
URL for one server answers MOVED for most keys: 'redlock doctor' reports
both as errors.

Sentinel: a URL names one server or one cluster; redlock does not ask a
Redis Sentinel where a master is (a program can: goredisnode.New takes a
go-redis failover client). To use masters that Sentinel fails over, name
each by an address that the failover moves to the promoted replica, such as
a DNS name or a virtual IP. The promoted replica sees its own promotion and
sits out the quarantine, as after a restart ('redlock help quarantine'); an
address moved to a server that was never the master's replica is not seen.

Passwords: characters such as , / ? # @ % and spaces and tabs in a user
name or password must be percent-encoded: %2C for a comma, %20 for a space,
%09 for a tab, %2F for /, %3F for ?, %23 for #, %40 for @, %25 for %. A
list whose passwords hold a separator is refused, and a URL that does not
parse is named by its place in the list ("node URL 2 of --nodes", "line 3
of --nodes-file F"), never repeated. Passwords are never printed.

A password given with --nodes is on redlock's command line, which every
user of the machine can read (ps, /proc) while redlock runs, and which
shell histories keep. Give passwords in a file (--nodes-file, readable by
you alone) or in ` + envNodes + ` instead. Neither variable reaches the
command that run and elect start.`

// quarantineHelp is the topic 'redlock help quarantine'.
const quarantineHelp = `Restart quarantine: a node whose redis-server started more recently than the
longest lock it might have lost does not vote, so a restarted node cannot
hand out a lock that is still held through the others. Freshly started
servers are quarantined too, for one TTL, so on fresh servers the first
lock waits one TTL. A master promoted from replica since its process
started is quarantined in the same way: each hash slot sits out one
quarantine at its first use (the failover quarantine).

How long a node sits out is learned from the TTLs the lock clients use and
record on the nodes. --quarantine sets a floor (use the longest TTL any
client of these nodes uses); --no-quarantine turns it off, which is safe
only for nodes with appendonly yes and appendfsync always, or nodes nobody
has locked anything on before.

A node in quarantine counts among the nodes that are not available for a
quorum (status 69 when too few are left: 'redlock help exit-codes');
'redlock run' and 'redlock elect' say so on stderr while they wait,
'redlock inspect' shows the node as quarantined, and 'redlock doctor' shows
it with the node's persistence and, for a cluster, whether each master's
slots are or will be in quarantine.`

// exitCodesHelp is the topic 'redlock help exit-codes'.
const exitCodesHelp = `The statuses that redlock chooses itself follow sysexits.h, so that scripts
can tell the failures apart. These mean the same for every command:

  64       usage error: bad flags, arguments or node URLs
  69       too few nodes available for a quorum: unreachable, busy, or in
           quarantine
  70       an unexpected error in redlock itself
  77       nodes refused the credentials or their ACL denies a command
           (NOAUTH, WRONGPASS, NOPERM): fix the node URLs or the ACL
  78       nodes refused for good otherwise: a replica (READONLY), a cluster
           node named as one server (MOVED, ASK, CROSSSLOT), KEY holding
           another type of value (WRONGTYPE), a full node (OOM), a node that
           cannot save (MISCONF), TLS that cannot work (a certificate that
           fails verification, a client certificate missing or refused:
           'redlock help tls')

inspect, leader and release exit 69, 77 or 78 only when so many nodes fail
that way that too few answered (release: too few confirmed). run and elect
do not wait when so many nodes refuse (77 or 78) that no quorum is possible.

run [flags] KEY -- COMMAND, and elect [flags] KEY -- COMMAND:
  COMMAND's own   when it ran (128+N if it was killed by signal N)
  75              run: the lock (with --permits, every permit) is held by
                  others, and --wait ran out; elect: another candidate led,
                  and --wait ran out
  76              the lock, the permit or the leadership was lost while
                  COMMAND ran
  126, 127        COMMAND could not be run, or was not found
  128+N           interrupted by signal N while waiting for the lock or
                  campaigning

inspect KEY, and status KEY (with --permits, the largest of the slots'):
  0        the lock is held, shared, free or split (with --permits: every
           slot is held, free or split)
  64       also for --permits out of range
  69       too few nodes answered to tell

leader KEY:
  0        a candidate leads
  1        nobody leads
  69       too few nodes answered to tell

release --force KEY:
  0        removed, or nothing to remove: a quorum of nodes confirmed
  1        the question was not answered yes: nothing was removed
  64       also for no --force, no --yes when stdin is not a terminal,
           --slot without --permits or --permits without --slot, a slot or
           number of permits out of range
  69       too few nodes confirmed: keys on the nodes that did not answer
           expire with their TTLs

doctor:
  0        every node is healthy and nothing needs attention
  1        a quorum of healthy nodes exists, but something needs attention
  2        no quorum of healthy nodes exists
  64       also for nodes that the lock client refuses (one server under
           two URLs), on which every lock fails

demo:
  0        every check passed
  1        a check failed`

// environmentHelp returns the topic 'redlock help environment'.
func environmentHelp() string {
	var b strings.Builder
	row := func(name, text string) { fmt.Fprintf(&b, "  %-19s %s\n", name, text) }
	b.WriteString("redlock reads these variables; a flag wins over its variable:\n\n")
	row(envNodes, "the nodes, as --nodes ('redlock help nodes')")
	row(envNodesFile, "a file of node URLs, one a line, as --nodes-file")
	row(envCACert, "as --cacert (all six: 'redlock help tls')")
	row(envCACertDir, "as --cacertdir")
	row(envCert, "as --cert")
	row(envKey, "as --key")
	row(envSNI, "as --sni")
	row(envInsecure, "as --insecure: 1, true, 0 or false")
	b.WriteString(`
'redlock run' and 'redlock elect' do not pass on to COMMAND the variables
that the nodes or their secrets come from:
` + strings.Join(secretVars, ", ") + `.
A command that runs redlock again names the nodes itself.

'redlock run' and 'redlock elect' give COMMAND these; none of them is
passed on from redlock's own environment, so that a run inside another sees
only its own:

`)
	row("REDLOCK_KEY", "the KEY of the lock or the election")
	row("REDLOCK_FENCE", "the fencing token: greater than every earlier holder's")
	row("", "(with --permits: in the slot); elect: the term")
	row("REDLOCK_LOCK_ID", "the holder's ID, which inspect, release and leader show")
	row("REDLOCK_SLOT", "run --permits N: the permit's slot, from 0 to N-1")
	row("REDLOCK_PERMITS", "run --permits N: N")
	row("REDLOCK_TERM", "elect: the term, greater than every earlier leader's")
	row("REDLOCK_VALUE", "elect: the --value")
	b.WriteString("\n'redlock run --help' and 'redlock elect --help' say how to use them.")
	return b.String()
}

// flagsHelp returns the topic 'redlock help flags': the flags in global,
// which every command takes.
func flagsHelp(global *pflag.FlagSet) string {
	return `Every command takes these flags, before its name or after it (for run
and elect, before KEY):

` + strings.TrimRight(global.FlagUsages(), "\n") + `

'redlock help nodes', 'redlock help quarantine' and 'redlock help tls' say
more. redlock itself also takes -h, --help and -v, --version.`
}
