// Package goredisnode implements [driver.Node] for the go-redis client,
// [github.com/redis/go-redis/v9].
//
// A Node either wraps a client the caller already has ([New]) or owns a
// client it creates from a URL ([Dial]). Either way it runs the lock
// scripts with EVALSHA, falling back to EVAL when the server answers
// NOSCRIPT, and hands the reply back in the shapes redlock expects.
//
// This package lives in its own module, so that programs using the rueidis
// adapter never download go-redis.
//
// go-redis logs through a logger of its own, global to the program: while
// a node is unreachable, its connection pool writes a line to stderr for
// each failed dial ("redis: ... failed to dial ..."), dozens a second
// with a few waiting locks. This package leaves that logger alone, since
// it belongs to the program. To quiet it, the program can set one that
// discards, with one line (package github.com/redis/go-redis/v9/logging):
//
//	logging.Disable() // go-redis's pool and connection messages, for the whole program
//
// The lock client reports what matters in its errors and through its
// Observer.
package goredisnode

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/driver/tlsfiles"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// A Node is a [driver.Node] backed by a go-redis client. It is safe for
// concurrent use by multiple goroutines.
type Node struct {
	c    redis.Scripter
	p    processor // c, if it is one; nil otherwise
	name string

	// shas holds each script's digest as a command argument, made once:
	// a *driver.Script → its SHA1 as an any.
	shas sync.Map

	// owned is the client Dial created, a *redis.Client or a
	// *redis.ClusterClient, closed by Close; nil when the caller owns the
	// client.
	owned     redis.UniversalClient
	closeOnce sync.Once
	closeErr  error

	hub hub // subscriptions for Notify
}

var _ driver.Batcher = (*Node)(nil)

// New returns a Node that runs scripts through c, which may be any client
// that can evaluate scripts: a *redis.Client, or any [redis.UniversalClient].
//
// The caller keeps ownership of c: Close does not close it. c must honour
// context deadlines: New fails, with an error wrapping
// [redlock.ErrInvalid], for a *redis.Client (a failover client included)
// or a *redis.ClusterClient made without Options.ContextTimeoutEnabled =
// true. Such a client waits for a node that does not answer as long as
// its own read timeout and retries say (seconds, by default), whatever a
// lock call's context allows, so that a lock call, a release or
// [redlock.Client.Close] would outlast its own bound. New does not change
// the caller's client: it would change it under the caller's other users
// too. Options.MaxRetries = -1 is also advised, though not required: the
// lock scripts are safe to run twice, and with deadlines honoured a retry
// ends with its call, but the lock client's rounds already decide what to
// retry. [Dial] configures its clients that way.
//
// A Node is one node of the lock client, whatever c talks to: one Redis
// master, a Redis Cluster (a *redis.ClusterClient, or a universal client
// given several addresses), or a master that a Sentinel fails over (a
// failover client). In a cluster, each script goes to the master of its
// keys' hash slot, and every key of a script is in the lock key's slot.
// Replication is asynchronous, so a failover can promote a replica that
// missed the latest grants; the promoted node notices the promotion (its
// replication ID changes) and is quarantined as after a restart, so it
// does not grant those locks again. A switch to a server that was never
// a replica, such as a name or an address moved to another master, goes
// unnoticed. Do not use a *redis.Ring: while a shard is down it sends the
// shard's keys to another shard, which never had their grants.
//
// If name is empty, New derives one that contains no credentials: for a
// *redis.Client it is the address and database, "ADDR/DB" (for example
// "127.0.0.1:6379/0" or "/run/redis.sock/0"); for a *redis.ClusterClient or
// a *redis.Ring it is the sorted, comma-separated list of the addresses it
// was configured with; for any other type it is the type name followed by
// "@" and the address of the client value, which is stable for the life of
// the client but not across processes. A failover (Sentinel) client reports
// the address "FailoverClient", so such clients should be given a name.
func New(c redis.Scripter, name string) (*Node, error) {
	if err := checkClient(c); err != nil {
		return nil, err
	}
	if name == "" {
		name = deriveName(c)
	}
	p, _ := c.(processor)
	return &Node{c: c, p: p, name: name}, nil
}

// checkClient returns an error wrapping redlock.ErrInvalid if c is a
// go-redis client whose options New can read and which ignores context
// deadlines.
func checkClient(c redis.Scripter) error {
	var deadlines bool
	switch c := c.(type) {
	case *redis.Client:
		deadlines = c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		deadlines = c.Options().ContextTimeoutEnabled
	default:
		return nil
	}
	if deadlines {
		return nil
	}
	return fmt.Errorf("goredisnode: New: the client ignores context deadlines, so a node that does not answer "+
		"holds a lock call, a release or Close for its read timeout and retries: "+
		"make it with ContextTimeoutEnabled: true (and MaxRetries: -1), or use goredisnode.Dial: %w", redlock.ErrInvalid)
}

// processor is a client that runs a command it is given, as
// *redis.Client and *redis.ClusterClient do.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// maxRedirects is how many MOVED and ASK redirections in a row the cluster
// client of a Node from Dial follows, unless the URL says otherwise.
const maxRedirects = 16

// Dial returns a Node with its own client for the Redis server or the
// Redis Cluster at rawURL. The accepted forms are those of [redis.ParseURL]
// for one server:
//
//	redis://[[user]:password@]host[:port][/db]
//	rediss://[[user]:password@]host[:port][/db]    (TLS)
//	unix://[[user]:password@]/path/to/socket[?db=N]
//
// and those of [redis.ParseClusterURL] for a cluster, which lists the
// addresses of some of its nodes in addr parameters, or says cluster=true
// when it gives one (see package [nodeurl]):
//
//	redis://[[user]:password@]host[:port]?addr=host2:port2[&addr=...]
//	rediss://[[user]:password@]host[:port]?addr=host2:port2[&addr=...]    (TLS)
//	redis://[[user]:password@]host[:port]?cluster=true
//
// followed by optional client settings as query parameters, such as
// dial_timeout=2s. The port defaults to 6379 and the database to 0. A
// cluster URL gives a [*redis.ClusterClient], which sends each script to
// the master of its keys' hash slot, following the cluster's MOVED and ASK
// redirections; the whole cluster is one node of the lock client.
//
// The client is configured for a lock: it never retries a command itself
// (a max_retries setting in the URL is overridden), it tries each new
// connection once rather than several times, and it honours the deadline
// of the context given to Eval. A cluster client still sends a command
// again, within the deadline, when a redirection or a broken connection
// calls for it, up to 16 times in a row (max_redirects in the URL sets
// another limit); the lock scripts allow that (an acquire that finds its
// own token counts as the grant). Dial does not connect: connections are made
// when Eval needs one, so a Node can be created while its server is down,
// and Eval then fails until the server is back.
//
// For TLS, the options configure the client beyond what the URL says:
// the certificate authorities to trust and a client certificate, from a
// *tls.Config ([WithTLSConfig]) or from files that are read again when
// they are rotated ([WithTLSFiles]), and the server name to verify
// ([WithServerName]). They apply to a URL that asks for TLS (rediss://);
// with another, Dial fails rather than connect in the clear.
//
// An error never contains the password. Close closes the client.
func Dial(rawURL string, opts ...DialOption) (*Node, error) {
	opt, copt, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	var o tlsfiles.Options
	for _, set := range opts {
		set(&o)
	}
	// Maintenance notifications are for managed services that move
	// endpoints; a lock node is one fixed master. Left on "auto", go-redis
	// would also resolve a host name in NewClient to classify the
	// endpoint, and Dial would wait on DNS.
	maint := &maintnotifications.Config{
		Mode:         maintnotifications.ModeDisabled,
		EndpointType: maintnotifications.EndpointTypeNone,
	}
	if copt != nil {
		if copt.MaxRedirects == 0 {
			// A MOVED or ASK reply means that the command did not run: it
			// is safe to follow. go-redis's default of 3 in a row can run
			// out while a slot moves, and the lock client would take the
			// last MOVED for a refusal.
			copt.MaxRedirects = maxRedirects
		}
		if copt.TLSConfig, err = o.Apply(copt.TLSConfig); err != nil {
			return nil, fmt.Errorf("goredisnode: %w", err)
		}
		if copt.TLSConfig != nil {
			copt.Dialer = tlsDialer(copt.TLSConfig)
		}
		copt.MaxRetries = -1
		copt.DialerRetries = 1
		copt.ContextTimeoutEnabled = true
		copt.MaintNotificationsConfig = maint
		c := redis.NewClusterClient(copt)
		return &Node{c: c, p: c, name: joinAddrs(slices.Clone(copt.Addrs)), owned: c}, nil
	}
	if opt.TLSConfig, err = o.Apply(opt.TLSConfig); err != nil {
		return nil, fmt.Errorf("goredisnode: %w", err)
	}
	if opt.TLSConfig != nil {
		opt.Dialer = tlsDialer(opt.TLSConfig)
	}
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	opt.ContextTimeoutEnabled = true
	opt.MaintNotificationsConfig = maint
	c := redis.NewClient(opt)
	return &Node{c: c, p: c, name: clientName(opt), owned: c}, nil
}

// Name returns the name given to New, or the one derived from the client
// (for Dial, "ADDR/DB", or for a cluster the addresses of the URL, sorted
// and comma-separated). It never contains credentials.
func (n *Node) Name() string { return n.name }

// Client returns the client that n runs scripts through: the one given to
// New, or for a Node from Dial the *redis.Client or *redis.ClusterClient
// that Dial made, which n owns and Close closes. It is for commands that the lock client does not
// send, such as INFO or CONFIG GET: asserted to a [redis.Cmdable], it sends
// them over n's connections and with n's settings (for a Node from Dial:
// no retries, context deadlines honoured). Such commands must leave the
// lock keys, the "redlock:" keys and the channels the lock client uses
// alone.
func (n *Node) Client() redis.Scripter { return n.c }

// Eval runs script on the node with EVALSHA and, if the server does not
// have the script cached, with EVAL. It implements [driver.Node].
//
// Integer and string replies are returned as int64 and string, arrays as
// []any of such values, and a null reply or a Lua false as nil. Under RESP3,
// a Lua true is returned as int64(1), as under RESP2. A Redis error reply is
// returned as a *driver.ReplyError, whose text is the server's message (for
// example "ERR ...") and which wraps the go-redis error, a [redis.Error].
func (n *Node) Eval(ctx context.Context, script *driver.Script, keys, args []string) (any, error) {
	if n.p == nil {
		return n.eval(ctx, script.SHA1(), script.Source(), keys, args)
	}
	cmd := n.command(ctx, script, keys, args)
	_ = n.p.Process(ctx, cmd) // the error is cmd's
	if noScript(cmd) {
		cmd = evalCommand(ctx, script, cmd.Args())
		_ = n.p.Process(ctx, cmd)
	}
	return result(cmd)
}

// eval is Eval for the script src whose digest is sha, through the
// methods of a redis.Scripter, for a client that is not a processor.
func (n *Node) eval(ctx context.Context, sha, src string, keys, args []string) (any, error) {
	a := argv(args)
	cmd := n.c.EvalSha(ctx, sha, keys, a...)
	if noScript(cmd) {
		cmd = n.c.Eval(ctx, src, keys, a...)
	}
	return result(cmd)
}

// command returns the EVALSHA command of script with keys and args. It
// is what the client's EvalSha makes, with the arguments put in place
// once rather than twice (EvalSha takes them as ...any and copies them
// after the keys), and the digest converted to an argument once per
// script.
func (n *Node) command(ctx context.Context, script *driver.Script, keys, args []string) *redis.Cmd {
	sha, ok := n.shas.Load(script)
	if !ok {
		sha, _ = n.shas.LoadOrStore(script, any(script.SHA1()))
	}
	a := make([]any, 3+len(keys)+len(args))
	a[0], a[1], a[2] = "evalsha", sha, len(keys)
	for i, k := range keys {
		a[3+i] = k
	}
	for i, v := range args {
		a[3+len(keys)+i] = v
	}
	cmd := redis.NewCmd(ctx, a...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3) // for a cluster client: the slot is that of the first key
	}
	return cmd
}

// evalCommand returns the EVAL command that sends script's source in place
// of the digest of the EVALSHA command whose arguments are a.
func evalCommand(ctx context.Context, script *driver.Script, a []any) *redis.Cmd {
	a = append([]any{"eval", script.Source()}, a[2:]...)
	cmd := redis.NewCmd(ctx, a...)
	if a[2] != 0 {
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}

// noScript reports whether cmd failed because the server does not have
// its script cached.
func noScript(cmd *redis.Cmd) bool {
	err := cmd.Err()
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// EvalBatch runs every call as Eval would, in one pipeline: one write of
// EVALSHA commands, and one more of EVAL commands for the calls whose
// script the server did not have cached. It implements [driver.Batcher].
// A single call, and every call of a client that cannot pipeline (a
// [redis.Scripter] without a Pipeline method), runs as Eval runs it.
func (n *Node) EvalBatch(ctx context.Context, calls []driver.Call) {
	p, ok := n.c.(pipeliner)
	if !ok || len(calls) == 1 {
		for i := range calls {
			c := &calls[i]
			c.Reply, c.Err = n.Eval(ctx, c.Script, c.Keys, c.Args)
		}
		return
	}
	cmds := make([]*redis.Cmd, len(calls))
	pipe := p.Pipeline()
	for i, c := range calls {
		cmds[i] = n.command(ctx, c.Script, c.Keys, c.Args)
		_ = pipe.Process(ctx, cmds[i]) // queued; each command carries its own error
	}
	_, _ = pipe.Exec(ctx)
	var again []int
	for i, cmd := range cmds {
		if noScript(cmd) {
			again = append(again, i)
			continue
		}
		calls[i].Reply, calls[i].Err = result(cmd)
	}
	if len(again) == 0 {
		return
	}
	pipe = p.Pipeline()
	for _, i := range again {
		cmds[i] = evalCommand(ctx, calls[i].Script, cmds[i].Args())
		_ = pipe.Process(ctx, cmds[i])
	}
	_, _ = pipe.Exec(ctx)
	for _, i := range again {
		calls[i].Reply, calls[i].Err = result(cmds[i])
	}
}

// pipeliner is a client that can pipeline commands, as *redis.Client does.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// argv returns args as the arguments of a go-redis command.
func argv(args []string) []any {
	v := make([]any, len(args))
	for i, a := range args {
		v[i] = a
	}
	return v
}

// result returns the reply of cmd as Eval does.
func result(cmd *redis.Cmd) (any, error) {
	v, err := cmd.Result()
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		return nil, replyError(err)
	}
	return normalize(v)
}

// Close ends the Node's subscriptions (see Notify) and closes the client if
// Dial created it; a client passed to New is left open. Close may be
// called more than once; later calls return the result of the first.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.closeErr = n.hub.close()
		if n.owned != nil {
			n.closeErr = errors.Join(n.closeErr, n.owned.Close())
		}
	})
	return n.closeErr
}

// normalize converts a go-redis reply into the types redlock.Node
// documents, in place and without allocating for the common types. An
// array is returned as the interface value it came in, not as the
// []any it holds: converting that back to an interface would allocate,
// once per reply.
func normalize(reply any) (any, error) {
	switch v := reply.(type) {
	case nil, int64, string:
		return v, nil
	case []any:
		for i, e := range v {
			e, err := normalize(e)
			if err != nil {
				return nil, err
			}
			v[i] = e
		}
		return reply, nil
	case bool: // RESP3 converts Lua booleans to booleans.
		if v {
			return int64(1), nil
		}
		return nil, nil
	case error: // an error reply nested in an array
		return nil, replyError(v)
	case float64: // RESP3 double; RESP2 sends it as a bulk string
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	case *big.Int: // RESP3 big number; RESP2 sends it as a bulk string
		return v.String(), nil
	}
	return nil, fmt.Errorf("goredisnode: unsupported reply type %T", reply)
}

// replyError returns err as a *driver.ReplyError if it is an error reply,
// and as it is otherwise.
func replyError(err error) error {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return &driver.ReplyError{Msg: err.Error(), Err: err}
	}
	return err
}

// clientName returns "ADDR/DB" for the client options.
func clientName(o *redis.Options) string {
	return o.Addr + "/" + strconv.Itoa(o.DB)
}

func deriveName(c redis.Scripter) string {
	switch c := c.(type) {
	case *redis.Client:
		return clientName(c.Options())
	case *redis.ClusterClient:
		return joinAddrs(slices.Clone(c.Options().Addrs))
	case *redis.Ring:
		var addrs []string
		for _, a := range c.Options().Addrs {
			addrs = append(addrs, a)
		}
		return joinAddrs(addrs)
	}
	// Printing the value could reveal credentials; only its type and,
	// for pointer-like values, its address are used.
	if v := reflect.ValueOf(c); v.IsValid() {
		switch v.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
			return fmt.Sprintf("%T@%#x", c, v.Pointer())
		}
	}
	return fmt.Sprintf("%T", c)
}

func joinAddrs(addrs []string) string {
	slices.Sort(addrs)
	return strings.Join(addrs, ",")
}
