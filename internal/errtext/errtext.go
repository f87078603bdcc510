// Package errtext shortens the error texts of nodes for people: what a
// node said, without the internals of the script that met the error.
package errtext

import (
	"errors"
	"strings"
)

// Of returns the text of a node's error without the internals of the
// script that met it: a replica's refusal says that it is one, and the
// SHA and line that Redis appends to an error inside a script are cut.
func Of(err error) string {
	var reply interface{ Code() string } // a *driver.ReplyError
	if errors.As(err, &reply) && reply.Code() == "READONLY" {
		return "is a replica (READONLY)"
	}
	msg := err.Error()
	// Redis appends " script: <sha>, on @user_script:<line>." to an error
	// reply met inside a script.
	i := strings.Index(msg, " script: ")
	if i < 0 {
		return msg
	}
	j := strings.Index(msg[i:], "@user_script:")
	if j < 0 {
		return msg
	}
	k := i + j + len("@user_script:")
	for k < len(msg) && msg[k] >= '0' && msg[k] <= '9' {
		k++
	}
	if k < len(msg) && msg[k] == '.' {
		k++
	}
	return msg[:i] + msg[k:]
}
