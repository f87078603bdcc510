// Command redlock runs commands while holding a Redlock distributed lock,
// and shows and checks the Redis nodes that the locks live on.
//
//	redlock run [flags] KEY -- COMMAND [ARGS...]   run COMMAND while holding KEY
//	redlock run --permits N KEY -- COMMAND ...     ... holding one of N permits of KEY
//	redlock elect [flags] KEY -- COMMAND ...       run COMMAND while leading the election KEY
//	redlock leader KEY                             who leads the election KEY
//	redlock status KEY                             who holds KEY, node by node
//	redlock doctor                                 check the nodes for Redlock
//	redlock demo                                   see the algorithm at work
//
// The nodes come from --nodes or the environment variable REDLOCK_NODES,
// a comma-separated list of redis://, rediss:// and unix:// URLs; the
// default is redis://127.0.0.1:6379. Run "redlock help COMMAND" for the
// flags and exit statuses of each command, and "redlock help TOPIC" for
// what they share: nodes, tls, quarantine, exit-codes, environment, flags.
package main

import "os"

func main() {
	// On Linux, run and elect start COMMAND under a keeper: this binary
	// again, told so by its first argument (keeper_linux.go).
	if code, ok := keeperMain(os.Args[1:]); ok {
		os.Exit(code)
	}
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}
