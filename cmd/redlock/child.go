package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// child is COMMAND's running process, or on Linux the keeper that runs
// COMMAND (keeper_linux.go).
type child struct {
	cmd *exec.Cmd
	// life, when COMMAND runs under a keeper, is the write end of the
	// keeper's life pipe: closing it makes the keeper kill COMMAND and
	// everything it started. redlock's death closes it too.
	life *os.File
	// keeperErr says why COMMAND runs without a keeper on a system that
	// has one; it is nil when COMMAND runs under one, or the system has
	// none.
	keeperErr error
	// group is set when COMMAND leads a process group of its own, so that
	// signals reach everything it started.
	group bool
	// terminal is set when COMMAND shares the terminal's foreground
	// process group with redlock: the keyboard's signals reach it directly.
	terminal bool
}

// startChild starts argv with env, sharing redlock's standard streams:
// under a keeper where the system has one, else itself.
func startChild(argv, env []string) (*child, error) {
	fg := inForeground()
	ch := &child{group: !fg && groupsSupported, terminal: fg}
	cmd, life, err := startKeeper(argv, env, !fg)
	var ee *exitError
	switch {
	case err == nil:
		ch.cmd, ch.life = cmd, life
		return ch, nil
	case errors.As(err, &ee):
		return nil, err // COMMAND could not be started
	case !errors.Is(err, errNoKeeper):
		ch.keeperErr = err
	}
	cmd = exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = sysProcAttr(!fg)
	if err := cmd.Start(); err != nil {
		code := exitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		return nil, &exitError{code: code, err: err, msg: fmt.Sprintf("cannot run %s: %v", argv[0], unwrapExec(err))}
	}
	ch.cmd = cmd
	return ch, nil
}

// errNoKeeper is startKeeper's error on systems without a keeper.
var errNoKeeper = errors.New("no keeper on this system")

// unwrapExec drops the command name that exec errors repeat.
func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// wait waits for COMMAND to exit; under a keeper, for the keeper, which
// exits when COMMAND does, with its status.
func (ch *child) wait() {
	ch.cmd.Wait()
	if ch.life != nil {
		ch.life.Close() // the keeper is gone: nothing to kill
	}
}

// exitStatus returns COMMAND's exit status, 128+N if signal N killed it.
func (ch *child) exitStatus() int {
	ps := ch.cmd.ProcessState
	if ps == nil {
		return exitSoftware
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignalBase + int(ws.Signal())
	}
	return ps.ExitCode()
}

// forward passes a signal that redlock received on to COMMAND. A SIGINT
// or SIGQUIT typed at the terminal has reached COMMAND already.
func (ch *child) forward(sig os.Signal) {
	if ch.terminal && (sig == syscall.SIGINT || sig == syscall.SIGQUIT) {
		return
	}
	ch.signal(sig)
}

// signal sends sig to COMMAND, or to its process group.
func (ch *child) signal(sig os.Signal) {
	if ch.group {
		if s, ok := sig.(syscall.Signal); ok && signalGroup(ch.cmd.Process.Pid, s) == nil {
			return
		}
	}
	if err := ch.cmd.Process.Signal(sig); err != nil && sig == syscall.SIGTERM {
		ch.cmd.Process.Kill() // systems without SIGTERM
	}
}

// kill kills COMMAND: under a keeper, COMMAND and everything it
// started, whatever process group they are in; else COMMAND, or its
// process group.
func (ch *child) kill() {
	if ch.life != nil {
		ch.life.Close()
		return
	}
	ch.signal(syscall.SIGKILL)
}

// killGroup kills whatever is left of COMMAND's process group, and, while
// the keeper runs, everything COMMAND started.
func (ch *child) killGroup() {
	if ch.life != nil {
		ch.life.Close()
	}
	if ch.group {
		signalGroup(ch.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// signalNumber returns the number of a signal, for exit statuses.
func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}
