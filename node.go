package redlock

import "context"

// A Node is one independent Redis master, as the lock client sees it.
//
// Node is the whole boundary between the algorithm and a Redis client
// library: the client only ever runs the package's own Lua scripts on a
// node. The adapters in the goredisnode and rueidisnode modules implement it
// for go-redis and rueidis; any other client can implement it in a few lines.
//
// Implementations must be safe for concurrent use by multiple goroutines.
type Node interface {
	// Name identifies the node in errors, logs and metrics, and lets New
	// reject a node that is given twice. It should name the address and the
	// database (for example "10.0.0.7:6379/0") and must never contain
	// credentials.
	Name() string

	// Eval runs script on the node with the given keys and arguments. It
	// should send EVALSHA with script.SHA1() and, when the node answers
	// NOSCRIPT, send EVAL with script.Source().
	//
	// The reply is returned as an int64 (integer), a string (bulk or simple
	// string), a []any (array) or nil (null); an array of integers only may
	// also be returned as a []int64, which spares the boxing of each
	// element. A Redis error reply is returned as a non-nil error. Eval
	// must give up when ctx is done.
	//
	// A client library that retries a command after a network error may
	// run a script twice; the acquire script is written so that a retry
	// finds its own grant, but a retried release or extend may report a key
	// as absent that it itself removed a moment before. Adapters therefore
	// should not retry.
	Eval(ctx context.Context, script *Script, keys []string, args []string) (any, error)
}
