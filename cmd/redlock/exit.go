package main

import (
	"errors"
	"fmt"
)

// Exit statuses. The non-zero ones that redlock chooses itself follow
// sysexits.h, so that scripts can tell the failures apart; the status of a
// command that redlock ran is passed through unchanged.
const (
	exitOK          = 0
	exitFailure     = 1  // a check failed (doctor, demo), or release was not confirmed
	exitNoQuorum    = 2  // doctor: no quorum of healthy nodes
	exitUsage       = 64 // EX_USAGE: bad flags, arguments or node URLs
	exitUnavailable = 69 // EX_UNAVAILABLE: too few nodes available for a quorum
	exitSoftware    = 70 // EX_SOFTWARE: an unexpected error
	exitTaken       = 75 // EX_TEMPFAIL: others held the lock for all of --wait
	exitLockLost    = 76 // the lock was lost while the command ran
	exitNoPerm      = 77 // EX_NOPERM: nodes refused the credentials or the ACL denied a command
	exitConfig      = 78 // EX_CONFIG: nodes refused for good otherwise (a replica, a key of another type, a full node, ...)
	exitCannotExec  = 126
	exitNotFound    = 127
	exitSignalBase  = 128 // killed by or interrupted with a signal: 128+signal
)

// An exitError ends the program with a status, after printing its message
// (if any) on stderr.
type exitError struct {
	code int
	msg  string // printed as "redlock: msg"; empty prints nothing
	err  error  // the underlying error, if any
}

func (e *exitError) Error() string {
	switch {
	case e.msg != "":
		return e.msg
	case e.err != nil:
		return e.err.Error()
	}
	return fmt.Sprintf("exit status %d", e.code)
}

func (e *exitError) Unwrap() error { return e.err }

// exitf returns an exitError with a formatted message.
func exitf(code int, format string, args ...any) *exitError {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}

// silentExit ends the program with code and no message: the command has
// already said what there was to say.
func silentExit(code int) *exitError { return &exitError{code: code} }

// errUsage marks errors in how the program was called.
var errUsage = errors.New("usage error")

// usagef returns a usage error with a formatted message.
func usagef(format string, args ...any) *exitError {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, args...), err: errUsage}
}

// exitCode returns the exit status for an error returned by a command.
// Errors that are not exitErrors come from parsing the command line.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return exitUsage
}
