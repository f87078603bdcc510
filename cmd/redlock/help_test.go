package main

import (
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// The commands on the first screen, and the help topics.
var (
	helpCommands = []string{"run", "elect", "leader", "inspect", "status", "release", "doctor", "demo", "completion"}
	helpTopics   = []string{"nodes", "tls", "quarantine", "exit-codes", "environment", "flags"}
)

// The first screen fits in 25 lines: what redlock is, its commands, a few
// examples and where to read more. redlock alone and 'redlock help' show
// the same.
func TestFirstScreen(t *testing.T) {
	t.Parallel()
	r := run(t, "--help")
	expect(t, r, 0, rootLine, "Usage:", "Available Commands:", "Examples:", "Additional help topics:", "redlock help TOPIC")
	if n := strings.Count(r.stdout, "\n"); n > 25 {
		t.Fatalf("redlock --help is %d lines long, more than 25:\n%s", n, r.stdout)
	}
	for _, c := range helpCommands {
		if !strings.Contains(r.stdout, "\n  "+c+" ") {
			t.Errorf("redlock --help does not list the command %s:\n%s", c, r.stdout)
		}
	}
	_, topics, _ := strings.Cut(r.stdout, "Additional help topics:")
	topics, _, _ = strings.Cut(topics, "\n")
	if got, want := strings.Fields(topics), helpTopics; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("redlock --help lists the topics %q, want %q", got, want)
	}
	for _, args := range [][]string{{}, {"help"}} {
		if other := run(t, args...); other.code != 0 || other.stdout != r.stdout {
			t.Errorf("redlock %s differs from redlock --help:\n%s", strings.Join(args, " "), other)
		}
	}
}

// Each command's help begins with its usage and its flags; examples and
// prose come after them.
func TestCommandHelpLayout(t *testing.T) {
	t.Parallel()
	for _, c := range helpCommands {
		r := run(t, c, "--help")
		expect(t, r, 0, "Usage:\n  redlock "+c, "Flags:\n", "Global Flags", "--nodes", "help flags")
		last := -1
		for _, head := range []string{"Usage:", "Flags:", "Global Flags", "Examples:", "Description:"} {
			i := strings.Index(r.stdout, "\n"+head)
			if head == "Usage:" && strings.HasPrefix(r.stdout, head) {
				i = 0
			}
			if i < 0 && (head == "Examples:" || c == "completion") {
				continue // completion has no examples of its own
			}
			if i <= last {
				t.Fatalf("redlock %s --help: %q is missing or out of place:\n%s", c, head, r.stdout)
			}
			last = i
		}
	}
}

// The help topics hold what the first screen no longer says, and 'redlock
// TOPIC' shows a topic too.
func TestHelpTopics(t *testing.T) {
	t.Parallel()
	expect(t, fullHelp(t, "nodes"), 0, "redis://[[user]:password@]host[:port][/db]", "rediss://", "unix://", "?addr=", "?cluster=true",
		defaultNodes, "REDLOCK_NODES", "3 survive one failure", "Sentinel", "percent-encoded", "never printed")
	expect(t, run(t, "nodes"), 0, "?cluster=true")
	expect(t, run(t, "help", "tls"), 0, "rediss://", "private CA", "status 78")
	expect(t, run(t, "help", "quarantine"), 0, "Restart quarantine", "one TTL", "--quarantine sets a floor", "--no-quarantine",
		"appendfsync always", "promoted")

	// Every status redlock chooses, with the refusals behind 77 and 78.
	want := []string{"NOAUTH", "WRONGPASS", "NOPERM", "READONLY", "MOVED", "ASK", "CROSSSLOT", "WRONGTYPE", "OOM", "MISCONF",
		"nobody leads", "not answered yes", "no quorum of healthy nodes", "a check failed", "126, 127", "128+N"}
	for _, code := range []int{exitOK, exitFailure, exitNoQuorum, exitUsage, exitUnavailable, exitSoftware, exitTaken, exitLockLost,
		exitNoPerm, exitConfig} {
		want = append(want, "\n  "+strconv.Itoa(code)+" ")
	}
	expect(t, fullHelp(t, "exit-codes"), 0, want...)

	expect(t, run(t, "help", "environment"), 0, append([]string{envNodes, envCACert, envCACertDir, envCert, envKey, envSNI, envInsecure},
		childVars...)...)

	var flags []string
	newRootCmd(io.Discard, io.Discard).PersistentFlags().VisitAll(func(f *pflag.Flag) { flags = append(flags, "--"+f.Name+" ") })
	expect(t, run(t, "help", "flags"), 0, flags...)
}
