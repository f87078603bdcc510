package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/driver/nodeurl"
	"github.com/quorumlock/redlock/driver/tlsfiles"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/spf13/cobra"
)

// This file holds the flags that name the nodes and judge them, shared by
// every command, and those of the commands that write reports.

// envNodes is the environment variable that lists the nodes when --nodes
// is not given.
const envNodes = "REDLOCK_NODES"

// envNodesFile names a file of node URLs when neither --nodes nor
// --nodes-file nor REDLOCK_NODES is given.
const envNodesFile = "REDLOCK_NODES_FILE"

// defaultNodes is used when no node is named.
const defaultNodes = "redis://127.0.0.1:6379"

// secretVars are the variables that the node URLs and the secrets of TLS
// may come from: never passed on to the command that run and elect start.
var secretVars = []string{envNodes, envNodesFile, envCert, envKey}

// nodeFlags are the flags, shared by every command, that say which nodes
// to use and how the lock client judges them.
type nodeFlags struct {
	nodes        []string
	nodesFile    string
	quarantine   time.Duration
	noQuarantine bool
	tls          tlsFlags
	stderr       io.Writer // for the warning of --insecure, and the default nodes
	saidDefault  bool      // whether the use of defaultNodes was told on stderr
}

// given reports whether the nodes were named, by --nodes, --nodes-file,
// REDLOCK_NODES or REDLOCK_NODES_FILE.
func (f *nodeFlags) given() bool {
	return len(f.nodes) > 0 || f.nodesFile != "" || strings.TrimSpace(os.Getenv(envNodes)) != "" || os.Getenv(envNodesFile) != ""
}

// A nodeSource is where the node URLs come from.
type nodeSource struct {
	name string   // for messages: "--nodes", "$REDLOCK_NODES", "--nodes-file F", "the default"
	list []string // lists of URLs separated by commas or white space; nil for a file
	file string   // the contents of a file: a URL a line
}

// source returns where the node URLs come from: --nodes, else
// --nodes-file, else REDLOCK_NODES, else REDLOCK_NODES_FILE, else the
// default. It reads the file, which must be a regular file of at most
// 1 MiB.
func (f *nodeFlags) source() (nodeSource, error) {
	env, envFile := os.Getenv(envNodes), os.Getenv(envNodesFile)
	switch {
	case len(f.nodes) > 0 && f.nodesFile != "":
		return nodeSource{}, usagef("--nodes and --nodes-file both name the nodes; give one of them")
	case len(f.nodes) > 0:
		return nodeSource{name: "--nodes", list: f.nodes}, nil
	case f.nodesFile != "":
		return readNodesFile("--nodes-file", f.nodesFile)
	case strings.TrimSpace(env) != "" && envFile != "":
		return nodeSource{}, usagef("$%s and $%s both name the nodes; unset one of them", envNodes, envNodesFile)
	case strings.TrimSpace(env) != "":
		return nodeSource{name: "$" + envNodes, list: []string{env}}, nil
	case envFile != "":
		return readNodesFile("$"+envNodesFile, envFile)
	}
	return nodeSource{name: "the default", list: []string{defaultNodes}}, nil
}

// readNodesFile reads the file of node URLs at path, which flag names.
func readNodesFile(flag, path string) (nodeSource, error) {
	b, err := tlsfiles.ReadFile(path)
	if err != nil {
		return nodeSource{}, usagef("%s: %v", flag, err)
	}
	registerSecrets(string(b))
	return nodeSource{name: flag + " " + path, file: string(b)}, nil
}

// A nodeEntry is one node URL and where it is in its source.
type nodeEntry struct {
	url   string
	where string // "node URL 2 of --nodes", "line 3 of --nodes-file F"
}

// entries returns the node URLs of src: in a file, one a line, where
// blank lines and lines that begin with "#" are left out; in a list,
// separated by commas or white space.
func (src nodeSource) entries() []nodeEntry {
	var out []nodeEntry
	if src.list == nil {
		for i, line := range strings.Split(src.file, "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			out = append(out, nodeEntry{line, fmt.Sprintf("line %d of %s", i+1, src.name)})
		}
		return out
	}
	for _, l := range src.list {
		for _, u := range splitList(l) {
			out = append(out, nodeEntry{u, fmt.Sprintf("node URL %d of %s", len(out)+1, src.name)})
		}
	}
	return out
}

// urls returns the node URLs (see source and entries). Each URL must
// parse: an error names a URL by its place, and shows it only when no
// password can be in it.
func (f *nodeFlags) urls() ([]string, error) {
	src, err := f.source()
	if err != nil {
		return nil, err
	}
	if src.name == "the default" && !f.saidDefault && f.stderr != nil {
		// A user who forgot to name the nodes learns it before the
		// errors that an absent local server brings.
		f.saidDefault = true
		fmt.Fprintf(f.stderr, "redlock: no nodes named (--nodes, --nodes-file, $%s or $%s): using %s\n", envNodes, envNodesFile, defaultNodes)
	}
	entries := src.entries()
	if len(entries) == 0 {
		return nil, usagef("no node URLs in %s", src.name)
	}
	hasUserinfo := strings.Contains(src.file, "@")
	for _, l := range src.list {
		if pos, ok := cutPassword(l); ok {
			return nil, usagef("node URL %d of %s has a comma, a space or a tab in its user name or password, "+
				"where they separate URLs: percent-encode them (%%2C for a comma, %%20 for a space, %%09 for a tab)", pos, src.name)
		}
		hasUserinfo = hasUserinfo || strings.Contains(l, "@")
	}
	urls := make([]string, len(entries))
	for i, e := range entries {
		if err := checkURL(e, hasUserinfo); err != nil {
			return nil, err
		}
		urls[i] = e.url
	}
	return urls, nil
}

// checkURL checks that the node URL of e parses, as the adapter reads it.
// Its error shows the URL only without its user information, and not at
// all if e has none but its source has (it could be a piece of a
// password that was cut where it should not have been).
func checkURL(e nodeEntry, sourceHasUserinfo bool) error {
	n, err := goredisnode.Dial(e.url)
	if err == nil {
		n.Close()
		return nil
	}
	if !strings.Contains(e.url, "@") && sourceHasUserinfo {
		return usagef("%s is not a valid node URL: %s; characters such as , / ? # @ %% and spaces in a user name or password must be percent-encoded", e.where, nodeurl.Expected)
	}
	// goredisnode: invalid URL "SHOWN": REASON, where SHOWN is redacted.
	msg := strings.TrimPrefix(err.Error(), "goredisnode: invalid URL ")
	if shown, err := strconv.QuotedPrefix(msg); err == nil {
		return usagef("%s, %s, is not valid: %s", e.where, shown, strings.TrimPrefix(msg[len(shown):], ": "))
	}
	return usagef("%s is not valid: %s", e.where, strings.TrimPrefix(err.Error(), "goredisnode: "))
}

// splitList splits a list of node URLs separated by commas or white space.
func splitList(s string) []string {
	return strings.FieldsFunc(s, isSeparator)
}

func isSeparator(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' }

// cutPassword reports whether a separator of the list s lies inside the
// user information of a URL, where splitting would cut a password in
// pieces, and the place of that URL in the list. A URL's user
// information runs from its "scheme://" to the last "@" before the next
// URL that begins with a scheme.
func cutPassword(s string) (pos int, cut bool) {
	starts := schemeStarts(s)
	for k, p := range starts {
		end := len(s)
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		region := s[p:end]
		from := strings.Index(region, "://") + len("://")
		if at := strings.LastIndexByte(region, '@'); at > from && strings.ContainsFunc(region[from:at], isSeparator) {
			return len(splitList(s[:p])) + 1, true
		}
	}
	return 0, false
}

// schemeStarts returns where the URLs of the list s that begin with
// "scheme://" begin.
func schemeStarts(s string) []int {
	var out []int
	for p := 0; p < len(s); p++ {
		if p > 0 && !isSeparator(rune(s[p-1])) {
			continue
		}
		scheme, _, ok := strings.Cut(s[p:], "://")
		if ok && scheme != "" && !strings.ContainsFunc(scheme, isSeparator) && isSchemeName(scheme) {
			out = append(out, p)
		}
	}
	return out
}

// isSchemeName reports whether s is a URL scheme, as net/url reads one: a
// letter, then letters, digits, "+", "-" and ".".
func isSchemeName(s string) bool {
	u, err := url.Parse(s + ":")
	return err == nil && u.Scheme == strings.ToLower(s) && s != ""
}

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
