package main

import (
	"encoding/json"
	"io"
	"os"
	"strings"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/spf13/cobra"
)

// This file holds the flags that name the nodes and judge them, shared by
// every command, and those of the commands that write reports.

// envNodes is the environment variable that lists the nodes when --nodes
// is not given.
const envNodes = "REDLOCK_NODES"

// defaultNodes is used when neither --nodes nor REDLOCK_NODES is set.
const defaultNodes = "redis://127.0.0.1:6379"

// maxTTL is the largest TTL, and the largest --quarantine, that the
// commands accept: the default of redlock.Options.MaxTTL. A larger one
// is a usage error, before anything is sent.
const maxTTL = time.Hour

// checkTTL returns a usage error if the duration d of flag is not
// positive or above maxTTL.
func checkTTL(flag string, d time.Duration) error {
	switch {
	case d <= 0:
		return usagef("%s %v must be positive", flag, d)
	case d > maxTTL:
		return usagef("%s %v is above the maximum TTL, %v; for a longer job, keep a shorter TTL: redlock extends it while the command runs", flag, d, maxTTL)
	}
	return nil
}

// nodeFlags are the flags, shared by every command, that say which nodes
// to use and how the lock client judges them.
type nodeFlags struct {
	nodes        []string
	quarantine   time.Duration
	noQuarantine bool
	tls          tlsFlags
	stderr       io.Writer // for the warning of --insecure
}

// given reports whether the nodes were named, by --nodes or REDLOCK_NODES.
func (f *nodeFlags) given() bool {
	return len(f.nodes) > 0 || strings.TrimSpace(os.Getenv(envNodes)) != ""
}

// urls returns the node URLs: from --nodes, else from REDLOCK_NODES, else
// the default. Each source is a list separated by commas or white space;
// --nodes may also be repeated.
func (f *nodeFlags) urls() ([]string, error) {
	src, lists := "--nodes", f.nodes
	if len(lists) == 0 {
		src, lists = envNodes, []string{os.Getenv(envNodes)}
		if strings.TrimSpace(lists[0]) == "" {
			src, lists = "the default", []string{defaultNodes}
		}
	}
	var urls []string
	for _, l := range lists {
		urls = append(urls, splitList(l)...)
	}
	if len(urls) == 0 {
		return nil, usagef("no node URLs in %s", src)
	}
	return urls, nil
}

// splitList splits a list of node URLs separated by commas or white space.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
}

// options returns the lock client options the flags ask for.
func (f *nodeFlags) options() (*redlock.Options, error) {
	if f.quarantine < 0 {
		return nil, usagef("--quarantine %v is negative", f.quarantine)
	}
	if f.quarantine > maxTTL {
		return nil, usagef("--quarantine %v is above the maximum TTL, %v, which is the longest a lock can be held without an extension", f.quarantine, maxTTL)
	}
	if f.quarantine > 0 && f.noQuarantine {
		return nil, usagef("--quarantine and --no-quarantine contradict each other; give one of them")
	}
	return &redlock.Options{Quarantine: f.quarantine, DisableQuarantine: f.noQuarantine}, nil
}

// reportFlags are the flags of the commands that report on the nodes.
type reportFlags struct {
	json    bool
	timeout time.Duration
}

func (f *reportFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.json, "json", false, "print the report as JSON")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 2*time.Second, "how long to wait for each node")
}

// write writes rep to w as indented JSON with --json, and otherwise as
// text with print.
func (f *reportFlags) write(w io.Writer, rep any, print func()) error {
	if !f.json {
		print()
		return nil
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return &exitError{code: exitSoftware, err: err, msg: err.Error()}
	}
	return nil
}
