package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/driver/nodeurl"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
)

// envNodes is the environment variable that lists the nodes when --nodes
// is not given.
const envNodes = "REDLOCK_NODES"

// defaultNodes is used when neither --nodes nor REDLOCK_NODES is set.
const defaultNodes = "redis://127.0.0.1:6379"

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
		urls = append(urls, strings.FieldsFunc(l, func(r rune) bool {
			return r == ',' || r == ' ' || r == '\t' || r == '\n'
		})...)
	}
	if len(urls) == 0 {
		return nil, usagef("no node URLs in %s", src)
	}
	return urls, nil
}

// options returns the lock client options the flags ask for.
func (f *nodeFlags) options() (*redlock.Options, error) {
	if f.quarantine < 0 {
		return nil, usagef("--quarantine %v is negative", f.quarantine)
	}
	if f.quarantine > 0 && f.noQuarantine {
		return nil, usagef("--quarantine and --no-quarantine contradict each other; give one of them")
	}
	return &redlock.Options{Quarantine: f.quarantine, DisableQuarantine: f.noQuarantine}, nil
}

// connect opens the nodes the flags name and a lock client over them,
// with the flags' options and a ReleaseTimeout of timeout when it is not 0.
// The caller closes the nodeSet.
func (f *nodeFlags) connect(timeout time.Duration) (*nodeSet, *redlock.Client, error) {
	return f.connectWith(func(o *redlock.Options) { o.ReleaseTimeout = timeout })
}

// connectWith is connect with the options that set gives on top of the
// flags' own.
func (f *nodeFlags) connectWith(set func(*redlock.Options)) (*nodeSet, *redlock.Client, error) {
	opts, err := f.options()
	if err != nil {
		return nil, nil, err
	}
	set(opts)
	urls, err := f.urls()
	if err != nil {
		return nil, nil, err
	}
	ts, err := f.tls.resolve(urls, f.stderr)
	if err != nil {
		return nil, nil, err
	}
	ns, err := openNodes(urls, ts)
	if err != nil {
		return nil, nil, err
	}
	c, err := ns.client(opts)
	if err != nil {
		ns.close()
		return nil, nil, err
	}
	return ns, c, nil
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

// connect checks the flags and connects as nf.connect does, waiting up to
// the timeout for each node.
func (f *reportFlags) connect(nf *nodeFlags) (*nodeSet, *redlock.Client, error) {
	if f.timeout <= 0 {
		return nil, nil, usagef("--timeout %v must be positive", f.timeout)
	}
	return nf.connect(f.timeout)
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

// A nodeSet is the nodes of one invocation: a lock node for each URL, and
// its go-redis client for the commands that status and doctor send beside
// the lock scripts.
type nodeSet struct {
	tls   *tlsSetup
	urls  []string // as given; they may hold passwords: never print them
	names []string // the lock nodes' names, "ADDR/DB": safe to print
	nodes []*goredisnode.Node
	cmds  []redis.Cmdable   // nodes[i].Client(): no retries, context deadlines honoured
	locks []*redlock.Client // made by client; closed before the nodes
}

// openNodes makes a lock node for each URL, with the TLS set-up ts for
// rediss:// URLs. Nothing is connected yet. A URL that does not parse is
// a usage error whose text contains no user information.
func openNodes(urls []string, ts *tlsSetup) (*nodeSet, error) {
	s := &nodeSet{tls: ts}
	for _, u := range urls {
		n, err := dialNode(u, ts.dialOptions(u)...)
		if err != nil {
			s.close()
			return nil, err
		}
		cmds, ok := n.Client().(redis.Cmdable)
		if !ok {
			n.Close()
			s.close()
			return nil, exitf(exitSoftware, "the client of node %s cannot send plain commands", n.Name())
		}
		s.urls = append(s.urls, u)
		s.names = append(s.names, n.Name())
		s.nodes = append(s.nodes, n)
		s.cmds = append(s.cmds, cmds)
	}
	return s, nil
}

// dialNode returns a lock node for the URL raw, made by goredisnode.Dial,
// and remembers the URL's password so that it is never printed. A URL
// that does not parse is a usage error whose text contains no user
// information.
func dialNode(raw string, opts ...goredisnode.DialOption) (*goredisnode.Node, error) {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			addSecret(p)
		}
	}
	n, err := goredisnode.Dial(raw, opts...)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "goredisnode: ")
		return nil, usagef("%v", strings.TrimPrefix(msg, "tlsfiles: "))
	}
	return n, nil
}

// lockNodes returns the nodes as redlock.Nodes.
func (s *nodeSet) lockNodes() []redlock.Node {
	out := make([]redlock.Node, len(s.nodes))
	for i, n := range s.nodes {
		out[i] = n
	}
	return out
}

// client returns a lock client for the nodes. Invalid options and nodes
// given twice are usage errors.
func (s *nodeSet) client(opts *redlock.Options) (*redlock.Client, error) {
	c, err := redlock.New(s.lockNodes(), opts)
	if err != nil {
		return nil, usagef("%v", strings.TrimPrefix(err.Error(), "redlock: "))
	}
	s.locks = append(s.locks, c)
	return c, nil
}

// close closes the lock clients, which waits for their releases still in
// flight, and then the nodes.
func (s *nodeSet) close() {
	for _, c := range s.locks {
		c.Close()
	}
	for _, n := range s.nodes {
		n.Close()
	}
}

// registerSecrets remembers the passwords of the URLs in s, a list
// separated by commas or white space (or "--nodes=" and such a list), so
// that they are never printed.
func registerSecrets(s string) {
	if _, v, ok := strings.Cut(s, "="); ok && strings.HasPrefix(s, "-") {
		s = v
	}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		if !strings.Contains(f, "@") {
			continue
		}
		if u, err := url.Parse(f); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok {
				addSecret(p)
			}
			continue
		}
		// Not a URL that parses: hide what nodeurl.Redact hides.
		if userinfo, ok := nodeurl.Userinfo(f); ok {
			if _, pw, ok := strings.Cut(userinfo, ":"); ok {
				addSecret(pw)
			} else {
				addSecret(userinfo)
			}
		}
	}
}

// shownURL returns a URL fit to print: without user information.
func shownURL(raw string) string {
	s, _ := nodeurl.Redact(raw)
	return s
}

// secrets are the passwords of the node URLs seen so far. Everything the
// program writes passes through scrub, so that a password cannot reach
// the output even through a library's error message.
var secrets struct {
	sync.Mutex
	list []string
}

func addSecret(s string) {
	if s == "" {
		return
	}
	secrets.Lock()
	defer secrets.Unlock()
	for _, x := range secrets.list {
		if x == s {
			return
		}
	}
	secrets.list = append(secrets.list, s)
	if u := url.QueryEscape(s); u != s {
		secrets.list = append(secrets.list, u)
	}
	if u := url.PathEscape(s); u != s {
		secrets.list = append(secrets.list, u)
	}
}

// scrub replaces every known password in s with "xxxxx".
func scrub(s string) string {
	secrets.Lock()
	defer secrets.Unlock()
	for _, p := range secrets.list {
		s = strings.ReplaceAll(s, p, "xxxxx")
	}
	return s
}

// A scrubWriter writes through to w with every known password replaced.
type scrubWriter struct {
	mu sync.Mutex
	w  interface{ Write([]byte) (int, error) }
}

func (s *scrubWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.Write([]byte(scrub(string(p)))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// quietRedis keeps go-redis from logging on its own: the commands report
// what matters in their own words.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quietRedis{}) }

// describeErr returns an error's text without the noise of the layers it
// went through, for tables.
func describeErr(err error) string {
	if err == nil {
		return ""
	}
	return strings.TrimPrefix(err.Error(), "redlock: ")
}

// countHealthy returns how many states are healthy.
func countHealthy(states []redlock.NodeState) int {
	n := 0
	for _, s := range states {
		if s.Health == redlock.NodeHealthy {
			n++
		}
	}
	return n
}

// stateText describes a node's state in a few words.
func stateText(s redlock.NodeState, now time.Time) string {
	switch s.Health {
	case redlock.NodeQuarantined:
		return fmt.Sprintf("quarantined until %s (%s more)", s.Until.Format("15:04:05"), roundDur(s.Until.Sub(now)))
	case redlock.NodeUnreachable:
		return "unreachable: " + describeErr(s.Err)
	case redlock.NodeBusy:
		return "busy: " + describeErr(s.Err)
	case redlock.NodeRefusing:
		return "refused: " + describeErr(s.Err)
	}
	return s.Health.String()
}

// roundDur rounds a duration for people: to 0.1s above a second, to the
// millisecond below.
func roundDur(d time.Duration) time.Duration {
	if d < 0 {
		d = 0
	}
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
