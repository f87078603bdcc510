package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/observe"
	"github.com/redis/go-redis/v9"
)

// This file says what a node's refusal means (redlock.ErrRefused, the
// outcome redlock.Refused, the state observe.NodeRefusing) and what to do
// about it.

// errorCode returns the error code of a node's error reply, such as
// "WRONGPASS" or "READONLY"; "TLS" for a TLS handshake that failed; and ""
// for anything else.
func errorCode(err error) string {
	var reply *driver.ReplyError
	if errors.As(err, &reply) {
		return aclCode(reply)
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return aclCode(&driver.ReplyError{Msg: rerr.Error()})
	}
	if driver.IsCertificateError(err) {
		return "TLS"
	}
	return ""
}

// aclCode returns the reply's code, but NOPERM for the ERR with which
// Redis refuses a command that the ACL user may not run inside a script.
func aclCode(reply *driver.ReplyError) string {
	if reply.Code() == "ERR" && strings.Contains(reply.Msg, "can't run this command") {
		return "NOPERM"
	}
	return reply.Code()
}

// permissionCodes are the error codes of a node that refuses the
// credentials in the node URL or the commands its ACL user may run.
var permissionCodes = map[string]bool{"NOAUTH": true, "WRONGPASS": true, "NOPERM": true}

// refusalHint says in a few words what a refusal with the given error
// means and what to do about it; "" when there is nothing to add to the
// server's own words.
func refusalHint(err error) string {
	code := errorCode(err)
	if h := driver.Hint(code); h != "" && strings.Contains(err.Error(), h) {
		return "" // the node's error has the hint already
	}
	switch code {
	case "NOAUTH":
		return "the node requires a password: put it in the node URL, redis://USER:PASSWORD@HOST:PORT"
	case "WRONGPASS":
		return "the user name or password in the node URL is wrong, or the user is disabled"
	case "NOPERM":
		return "the node's ACL does not let this user run the lock scripts: allow EVALSHA, EVAL and the commands, keys and channels listed in docs/security.md"
	case "WRONGTYPE":
		return "the key holds a value of another type on this node, not a lock: choose another key, or delete the value if nothing uses it"
	case "READONLY":
		return "the node is a read-only replica: give redlock independent masters"
	case "MOVED", "ASK", "CROSSSLOT":
		return "the node is part of a Redis Cluster: name the whole cluster as one node, with redis://HOST:PORT?cluster=true (or ?addr=HOST2:PORT2&addr=... for more of its nodes)"
	case "OOM":
		return "the node is full (used memory above maxmemory, policy noeviction) and refuses new keys: raise maxmemory or free memory; locks already held can still be released"
	case "MISCONF":
		return "the node cannot save to disk and refuses every write: fix its disk or persistence settings (see the node's log)"
	case "NOSCRIPT", "ERR":
		if strings.Contains(err.Error(), "unknown command") {
			return "the node does not know a command the lock client needs (renamed or disabled EVAL/EVALSHA, or not Redis)"
		}
	case "TLS":
		return tlsHint(err)
	}
	return ""
}

// refusalStatus returns the exit status for an error that wraps
// redlock.ErrRefused: 77 (EX_NOPERM) when a node refused the credentials
// or its ACL denied a command, and 78 (EX_CONFIG) otherwise: the nodes or
// the key are not fit for locks.
func refusalStatus(err error) int {
	var oe *redlock.OpError
	if errors.As(err, &oe) {
		for _, n := range oe.Nodes {
			if n.Outcome == observe.OutcomeRefused && permissionCodes[errorCode(n.Err)] {
				return exitNoPerm
			}
		}
	}
	return exitConfig
}

// refusedText explains, node by node, why the nodes refused a lock.
func refusedText(op *redlock.OpError) string {
	var b strings.Builder
	if op == nil {
		return "the nodes refused the request"
	}
	refused := 0
	for _, n := range op.Nodes {
		if n.Outcome == observe.OutcomeRefused {
			refused++
		}
	}
	fmt.Fprintf(&b, "%d of %d nodes refused it, and will refuse it again (%d needed to agree):", refused, len(op.Nodes), op.Quorum)
	hints := map[string]bool{}
	var order []string
	for _, n := range op.Nodes {
		fmt.Fprintf(&b, "\n  %s %s", n.Node, resultText(n))
		if n.Outcome != observe.OutcomeRefused {
			continue
		}
		if h := refusalHint(n.Err); h != "" && !hints[h] {
			hints[h] = true
			order = append(order, h)
		}
	}
	for _, h := range order {
		b.WriteString("\n  (" + h + ")")
	}
	return b.String()
}
