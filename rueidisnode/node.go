// Package rueidisnode implements [driver.Node] for the rueidis client,
// [github.com/redis/rueidis].
//
// A Node either wraps a client the caller already has ([New]) or owns a
// client it creates from a URL ([Dial]). Either way it runs the lock
// scripts with EVALSHA, falling back to EVAL when the server answers
// NOSCRIPT, and hands the reply back in the shapes redlock expects.
//
// This package lives in its own module, so that programs using the
// go-redis adapter never download rueidis.
//
// Unlike go-redis, rueidis writes no log of its own: an unreachable node
// shows only in the errors of the lock client, and nothing needs quieting.
package rueidisnode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/driver/tlsfiles"
	"github.com/redis/rueidis"
)

// A Node is a [driver.Node] backed by a rueidis client. It is safe for
// concurrent use by multiple goroutines.
type Node struct {
	c    rueidis.Client // nil for a cluster from Dial: see lazy
	lazy *lazyClient    // makes the client of a cluster from Dial
	name string
	hub  hub // subscriptions for Notify

	// owned reports whether Dial created c, which Close then closes.
	owned     bool
	closeOnce sync.Once
}

var _ driver.Batcher = (*Node)(nil)

// New returns a Node that runs scripts through c.
//
// The caller keeps ownership of c: Close does not close it. For the lock
// client to behave as documented, c should not retry commands
// (ClientOption.DisableRetry = true); rueidis always honours the deadline
// of the context given to Eval.
//
// A Node is one node of the lock client, whatever c talks to: one Redis
// master, a Redis Cluster (rueidis detects one from its addresses), or a
// master that a Sentinel fails over (ClientOption.Sentinel). In a
// cluster, each script goes to the master of its keys' hash slot, and
// every key of a script is in the lock key's slot. Replication is
// asynchronous, so a failover can promote a replica that missed the
// latest grants; the promoted node notices the promotion (its replication
// ID changes) and is quarantined as after a restart, so it does not grant
// those locks again. A switch to a server that was never a replica, such
// as a name or an address moved to another master, goes unnoticed.
//
// If name is empty, New derives one that contains no credentials: the
// address of the server as rueidis reports it in c.Nodes() (for example
// "127.0.0.1:6379" or "/run/redis.sock"), or the sorted, comma-separated
// addresses if c knows several. A rueidis client does not report the
// database it selects, so the derived name has no "/DB" suffix; clients
// that share a server but use different databases must be given names.
func New(c rueidis.Client, name string) *Node {
	if name == "" {
		name = deriveName(c)
	}
	return &Node{c: c, name: name}
}

// Dial returns a Node with its own client for the Redis server or the
// Redis Cluster at rawURL. The accepted forms are those of
// [rueidis.ParseURL] for a single server:
//
//	redis://[[user]:password@]host[:port][/db]
//	rediss://[[user]:password@]host[:port][/db]    (TLS)
//	unix://[[user]:password@]/path/to/socket[?db=N]
//
// and for a cluster, whose URL lists the addresses of some of its nodes in
// addr parameters, or says cluster=true when it gives one (see package
// [nodeurl]):
//
//	redis://[[user]:password@]host[:port]?addr=host2:port2[&addr=...]
//	rediss://[[user]:password@]host[:port]?addr=host2:port2[&addr=...]    (TLS)
//	redis://[[user]:password@]host[:port]?cluster=true
//
// followed by optional query parameters such as dial_timeout=2s. The port
// defaults to 6379 and the database to 0. A Sentinel-managed set
// (master_set) is rejected. A cluster URL gives a rueidis cluster client,
// which sends each script to the master of its keys' hash slot, following
// the cluster's MOVED and ASK redirections; the whole cluster is one node
// of the lock client.
//
// The client is configured for a lock: it never retries a command itself
// (a max_retries setting in the URL is overridden), it does not use
// client-side caching, and it keeps rueidis's automatic pipelining. Like
// every rueidis client it honours the deadline of the context given to
// Eval.
//
// Dial does not connect. rueidis.NewClient normally connects at once and
// fails when the server is down; for a single server, Dial instead lets
// that first connection attempt fail without touching the network
// (rueidis's ForceSingleClient option keeps the client usable after it),
// and for a cluster it makes the client when Eval first needs it, and
// again at each Eval until that succeeds. So Dial returns at once even
// when the server is down or unreachable. The connection is made when
// Eval first needs it, within the deadline of Eval's context, and is made
// again after it breaks; while the server is down, Eval fails.
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
	opt, cluster, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	var o tlsfiles.Options
	for _, set := range opts {
		set(&o)
	}
	if opt.TLSConfig, err = o.Apply(opt.TLSConfig); err != nil {
		return nil, fmt.Errorf("rueidisnode: %w", err)
	}
	if opt.TLSConfig != nil && opt.DialCtxFn == nil {
		opt.DialCtxFn = dialTLS
	}
	opt.DisableRetry = true
	opt.DisableCache = true
	if cluster {
		name := strings.Join(slices.Sorted(slices.Values(opt.InitAddress)), ",")
		return &Node{lazy: &lazyClient{opt: opt}, name: name, owned: true}, nil
	}
	opt.ForceSingleClient = true

	var lazy lazyDialer
	lazy.dial = opt.DialCtxFn
	opt.DialCtxFn = lazy.DialContext
	c, err := rueidis.NewClient(opt)
	if c == nil {
		return nil, fmt.Errorf("rueidisnode: %w", err)
	}
	if err != nil && !errors.Is(err, errNotYet) {
		c.Close()
		return nil, fmt.Errorf("rueidisnode: %w", err)
	}
	lazy.armed.Store(true)
	return &Node{c: c, name: opt.InitAddress[0] + "/" + strconv.Itoa(opt.SelectDB), owned: true}, nil
}

// client returns the client that n runs commands through.
func (n *Node) client(ctx context.Context) (rueidis.Client, error) {
	if n.lazy != nil {
		return n.lazy.get(ctx)
	}
	return n.c, nil
}

// Name returns the name given to New, or the one derived from the client
// (for Dial, "ADDR/DB", or for a cluster the addresses of the URL, sorted
// and comma-separated). It never contains credentials.
func (n *Node) Name() string { return n.name }

// Eval runs script on the node with EVALSHA and, if the server does not
// have the script cached, with EVAL. It implements [driver.Node].
//
// Integer and string replies are returned as int64 and string, arrays of
// integers as []int64, other arrays as []any of such values, and a null reply or a Lua false as nil. Under RESP3,
// a Lua true is returned as int64(1), as under RESP2. A Redis error reply is
// returned as an error whose text is the server's message (for example
// "ERR ..."): a *driver.ReplyError that wraps the rueidis error, a
// *rueidis.RedisError, for errors.As. (rueidis itself drops the "ERR " prefix from the message.)
func (n *Node) Eval(ctx context.Context, script *driver.Script, keys, args []string) (any, error) {
	return n.eval(ctx, script.SHA1(), script.Source(), keys, args)
}

// eval is Eval for the script src whose digest is sha.
func (n *Node) eval(ctx context.Context, sha, src string, keys, args []string) (any, error) {
	c, err := n.client(ctx)
	if err != nil {
		return nil, err
	}
	cmd, err := evalsha(c, sha, keys, args)
	if err != nil {
		return nil, err
	}
	resp := c.Do(ctx, cmd)
	if isNoScript(resp) {
		cmd, _ = evalSource(c, src, keys, args) // the same keys, which passed
		resp = c.Do(ctx, cmd)
	}
	return result(resp)
}

// evalsha returns the command EVALSHA sha with keys and args, built for c,
// or errCrossSlot.
func evalsha(c rueidis.Client, sha string, keys, args []string) (_ rueidis.Completed, err error) {
	defer crossSlot(&err)
	return c.B().Evalsha().Sha1(sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build(), nil
}

// evalSource returns the command EVAL src with keys and args, built for c,
// or errCrossSlot.
func evalSource(c rueidis.Client, src string, keys, args []string) (_ rueidis.Completed, err error) {
	defer crossSlot(&err)
	return c.B().Eval().Script(src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build(), nil
}

// errCrossSlot is what a Node with a cluster client returns for a script
// whose keys are in different hash slots: what a cluster node would
// answer, as such a command cannot be sent to one. (The lock client's
// scripts never have such keys.)
var errCrossSlot = &driver.ReplyError{Msg: "CROSSSLOT Keys in request don't hash to the same slot"}

// crossSlot, deferred by a function that builds a command for a rueidis
// cluster client, turns the panic of its builder on keys in different
// hash slots into errCrossSlot in *err.
func crossSlot(err *error) {
	r := recover()
	if r == nil {
		return
	}
	if msg, ok := r.(string); !ok || !strings.Contains(msg, "different key slots") {
		panic(r)
	}
	*err = errCrossSlot
}

// isNoScript reports whether resp is the server's NOSCRIPT error: it does
// not have the script cached.
func isNoScript(resp rueidis.RedisResult) bool {
	rerr, ok := rueidis.IsRedisErr(resp.Error())
	return ok && rerr.IsNoScript()
}

// EvalBatch runs every call as Eval would, in one DoMulti: the EVALSHA
// commands are written together, and EVAL is sent for the calls whose
// script the server did not have cached. It implements [driver.Batcher].
func (n *Node) EvalBatch(ctx context.Context, calls []driver.Call) {
	if len(calls) == 1 {
		c := &calls[0]
		c.Reply, c.Err = n.Eval(ctx, c.Script, c.Keys, c.Args)
		return
	}
	client, err := n.client(ctx)
	if err != nil {
		for i := range calls {
			calls[i].Err = err
		}
		return
	}
	// sent[j] is the call whose command is cmds[j].
	cmds := make(rueidis.Commands, 0, len(calls))
	sent := make([]int, 0, len(calls))
	for i, c := range calls {
		cmd, err := evalsha(client, c.Script.SHA1(), c.Keys, c.Args)
		if err != nil {
			calls[i].Err = err
			continue
		}
		cmds = append(cmds, cmd)
		sent = append(sent, i)
	}
	if len(cmds) == 0 {
		return
	}
	var again []int
	for j, resp := range client.DoMulti(ctx, cmds...) {
		if isNoScript(resp) {
			again = append(again, sent[j])
			continue
		}
		calls[sent[j]].Reply, calls[sent[j]].Err = result(resp)
	}
	if len(again) == 0 {
		return
	}
	cmds = cmds[:0]
	for _, i := range again {
		c := calls[i]
		cmd, _ := evalSource(client, c.Script.Source(), c.Keys, c.Args) // the same keys, which passed
		cmds = append(cmds, cmd)
	}
	for j, resp := range client.DoMulti(ctx, cmds...) {
		calls[again[j]].Reply, calls[again[j]].Err = result(resp)
	}
}

// result returns resp as Eval does.
func result(resp rueidis.RedisResult) (any, error) {
	msg, err := resp.ToMessage()
	if err != nil {
		if rueidis.IsRedisNil(err) {
			return nil, nil
		}
		return nil, replyError(&msg, err)
	}
	return normalize(&msg)
}

// Close ends the Node's subscriptions (see Notify), giving their
// connection back to the client, and closes the client if Dial created
// it, waiting for calls in progress to finish, and for an attempt under
// way to make a cluster's client, which ends when rueidis gives up
// connecting; a client passed to New is left open. Close may be called
// more than once, and always returns nil.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.hub.close()
		switch {
		case n.lazy != nil:
			n.lazy.close()
		case n.owned:
			n.c.Close()
		}
	})
	return nil
}

// normalize converts a rueidis reply into the types redlock.Node
// documents.
func normalize(m *rueidis.RedisMessage) (any, error) {
	switch {
	case m.IsInt64():
		return m.AsInt64()
	case m.IsString():
		return m.ToString()
	case m.IsArray():
		vals, err := m.ToArray()
		if err != nil {
			return nil, err
		}
		if v, ok := int64s(vals); ok {
			return v, nil
		}
		out := make([]any, len(vals))
		for i := range vals {
			if out[i], err = normalize(&vals[i]); err != nil {
				return nil, err
			}
		}
		return out, nil
	case m.IsNil():
		return nil, nil
	case m.IsBool(): // RESP3 converts Lua booleans to booleans.
		if b, _ := m.AsBool(); b {
			return int64(1), nil
		}
		return nil, nil
	case m.IsFloat64(): // RESP3 double; RESP2 sends it as a bulk string
		f, err := m.AsFloat64()
		if err != nil {
			return nil, err
		}
		return strconv.FormatFloat(f, 'g', -1, 64), nil
	}
	if err := m.Error(); err != nil { // an error reply nested in an array
		return nil, replyError(m, err)
	}
	// RESP3 big numbers and verbatim strings are strings under RESP2.
	if v, err := m.ToAny(); err == nil {
		if s, ok := v.(string); ok {
			return s, nil
		}
	}
	return nil, fmt.Errorf("rueidisnode: unsupported reply %s", m.String())
}

// int64s returns vals as a []int64 if every one is an integer.
func int64s(vals []rueidis.RedisMessage) ([]int64, bool) {
	if len(vals) == 0 {
		return nil, false
	}
	for i := range vals {
		if !vals[i].IsInt64() {
			return nil, false
		}
	}
	out := make([]int64, len(vals))
	for i := range vals {
		out[i], _ = vals[i].AsInt64()
	}
	return out, true
}

// replyError returns err, the error rueidis made of the error reply m, as
// a *driver.ReplyError whose text is the whole of the server's message:
// rueidis drops its "ERR " prefix. Other errors are returned as they are.
func replyError(m *rueidis.RedisMessage, err error) error {
	rerr, ok := rueidis.IsRedisErr(err)
	if !ok {
		return err
	}
	text, _ := m.ToString()
	if text == "" {
		text = rerr.Error()
	}
	return &driver.ReplyError{Msg: text, Err: rerr}
}

func deriveName(c rueidis.Client) string {
	nodes := c.Nodes()
	addrs := make([]string, 0, len(nodes))
	for a := range nodes {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	return strings.Join(addrs, ",")
}

// errNotYet fails the connection attempt rueidis.NewClient makes, so that
// Dial does not block on the network.
var errNotYet = errors.New("rueidisnode: connection deferred to first use")

// A lazyDialer fails every dial until it is armed, then dials with dial, or
// as rueidis does by default when dial is nil.
type lazyDialer struct {
	armed atomic.Bool
	dial  func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error)
}

func (d *lazyDialer) DialContext(ctx context.Context, addr string, nd *net.Dialer, cfg *tls.Config) (net.Conn, error) {
	if !d.armed.Load() {
		return nil, errNotYet
	}
	if d.dial != nil {
		return d.dial(ctx, addr, nd, cfg)
	}
	if cfg != nil {
		td := tls.Dialer{NetDialer: nd, Config: cfg}
		return td.DialContext(ctx, "tcp", addr)
	}
	return nd.DialContext(ctx, "tcp", addr)
}
