package main

// The keeper: on Linux, run and elect start COMMAND under a small process
// of their own, the redlock binary again, so that COMMAND and everything it
// starts end when redlock dies, however it dies (SIGKILL included), long
// before the lock it held can expire.
//
// redlock starts the keeper as
//
//	/proc/self/exe keeperArg LIFE STATUS COMMAND [ARGS...]
//
// with the read end of a pipe, the life pipe, as file descriptor LIFE.
// redlock keeps the write end and never writes to it: the keeper reads
// end-of-file when redlock is gone, or when redlock closes it on purpose to
// kill whatever COMMAND started. The keeper is the child subreaper of
// COMMAND's descendants (PR_SET_CHILD_SUBREAPER), so that they stay in its
// tree of processes when their parents exit; on end-of-file it kills
// COMMAND and every process of that tree with SIGKILL, again and again
// until none is left, and exits. COMMAND also gets SIGKILL from the kernel
// if the keeper itself dies (the parent-death signal).
//
// STATUS is the write end of a second pipe, on which the keeper tells
// redlock whether COMMAND could be started: it closes it without a word
// once COMMAND runs, and otherwise writes the exit status (126 or 127) and
// the error, and exits with that status. So redlock says why COMMAND could
// not run in its own words, as it did when it started COMMAND itself.
//
// The keeper exits with COMMAND's status: its exit code, or 128+N if
// signal N killed it, which is what child.exitStatus makes of a signal.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// keeperArg, as the first argument, makes the redlock binary a keeper.
// It is not a command: cobra never sees it.
const keeperArg = "__keeper"

// keeperMain runs the keeper if args, the command line without the
// program's name, asks for it. It returns false when they do not.
func keeperMain(args []string) (code int, ok bool) {
	if len(args) < 4 || args[0] != keeperArg {
		return 0, false
	}
	life, err1 := strconv.Atoi(args[1])
	status, err2 := strconv.Atoi(args[2])
	if err1 != nil || err2 != nil || !isPipe(life) || !isPipe(status) {
		return 0, false
	}
	return keep(life, status, args[3:]), true
}

// isPipe reports whether fd is an open pipe.
func isPipe(fd int) bool {
	var st unix.Stat_t
	return fd > 2 && unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO
}

// keep is the keeper: it runs argv and returns the status to exit with.
func keep(lifeFd, statusFd int, argv []string) int {
	// Neither pipe goes on to COMMAND.
	unix.CloseOnExec(lifeFd)
	unix.CloseOnExec(statusFd)
	status := os.NewFile(uintptr(statusFd), "status")
	life := os.NewFile(uintptr(lifeFd), "life")

	// Caught, not ignored: an ignored signal stays ignored in COMMAND.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

	if gone(lifeFd) {
		// redlock died before COMMAND started: nothing starts.
		return exitSignalBase + int(syscall.SIGKILL)
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// COMMAND stays in the keeper's process group: the keeper's own
	// when redlock gave it one, else the terminal's foreground group.
	// The parent-death signal is bound to the thread that starts COMMAND,
	// which this goroutine keeps until the keeper exits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread()
	if err := cmd.Start(); err != nil {
		code := exitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		fmt.Fprintf(status, "%d %s", code, unwrapExec(err))
		return code
	}
	status.Close()
	pid := cmd.Process.Pid

	// The keeper reaps whatever ends among its children, COMMAND and
	// orphans of its tree alike, and hears of COMMAND's end from it.
	exited := make(chan unix.WaitStatus, 1)
	go func() {
		for {
			var ws unix.WaitStatus
			p, err := unix.Wait4(-1, &ws, 0, nil)
			switch {
			case err == unix.EINTR:
				continue
			case err != nil:
				return // no children left
			case p == pid:
				exited <- ws
			}
		}
	}()
	eof := make(chan struct{})
	go func() {
		io.Copy(io.Discard, life) // redlock never writes: this returns at end-of-file
		close(eof)
	}()

	// When the keeper leads its process group, a signal sent to the group
	// has reached COMMAND already; otherwise the keeper shares the
	// terminal's foreground group with COMMAND, and a SIGINT or SIGQUIT
	// there was typed at the terminal, as child.forward says.
	ownGroup := unix.Getpgrp() == os.Getpid()
	for {
		select {
		case ws := <-exited:
			if eof != nil && gone(lifeFd) {
				killTree(ownGroup) // redlock died as COMMAND exited
			}
			if ws.Signaled() {
				return exitSignalBase + int(ws.Signal())
			}
			return ws.ExitStatus()
		case sig := <-sigs:
			if ownGroup || sig == syscall.SIGINT || sig == syscall.SIGQUIT {
				continue
			}
			cmd.Process.Signal(sig)
		case <-eof:
			eof = nil
			killTree(ownGroup)
		}
	}
}

// gone reports whether the life pipe's write end is closed: redlock has
// exited, or wants everything killed.
func gone(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLHUP|unix.POLLIN|unix.POLLERR) != 0
}

// killTree kills with SIGKILL every living descendant of the keeper and,
// when ownGroup is set, every other process of its process group, until
// none is left. It gives up after killTimeout, for processes that do not
// die when killed (stuck in the kernel, say).
func killTree(ownGroup bool) {
	self := os.Getpid()
	pgrp := unix.Getpgrp()
	deadline := time.Now().Add(killTimeout)
	for time.Now().Before(deadline) {
		procs := readProcs()
		var left []int
		children := make(map[int][]int)
		for _, p := range procs {
			children[p.ppid] = append(children[p.ppid], p.pid)
		}
		live := make(map[int]bool)
		for _, p := range procs {
			live[p.pid] = p.state != 'Z' && p.state != 'X'
			if ownGroup && p.pgrp == pgrp && p.pid != self && live[p.pid] {
				left = append(left, p.pid)
			}
		}
		seen := map[int]bool{self: true}
		for queue := children[self]; len(queue) > 0; queue = queue[1:] {
			p := queue[0]
			if seen[p] {
				continue
			}
			seen[p] = true
			if live[p] {
				left = append(left, p)
			}
			queue = append(queue, children[p]...)
		}
		if len(left) == 0 {
			return
		}
		for _, p := range left {
			unix.Kill(p, unix.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// killTimeout bounds how long killTree goes on killing.
const killTimeout = 30 * time.Second

// A procStat is what killTree reads of a process in /proc/PID/stat.
type procStat struct {
	pid, ppid, pgrp int
	state           byte
}

// readProcs returns every process that /proc shows.
func readProcs() []procStat {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procStat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces and
		// parentheses, so the fields are read after the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 3 || len(f[0]) != 1 {
			continue
		}
		ppid, err1 := strconv.Atoi(f[1])
		pgrp, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, procStat{pid: pid, ppid: ppid, pgrp: pgrp, state: f[0][0]})
	}
	return out
}

// startKeeper starts argv under a keeper, with env and redlock's standard
// streams, in a process group of the keeper's own when ownGroup is set. It
// returns the keeper's process and the write end of its life pipe; an
// *exitError when COMMAND could not be started; and another error when the
// keeper itself could not be, for startChild to start COMMAND without it.
func startKeeper(argv, env []string, ownGroup bool) (*exec.Cmd, *os.File, error) {
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		lifeR.Close()
		lifeW.Close()
		return nil, nil, err
	}
	// File descriptors that redlock inherited without close-on-exec, such
	// as a make jobserver's, reach COMMAND under the same numbers, as
	// they did when redlock started it itself; the pipes come after them.
	extra := inheritedFiles()
	lifeFd, statusFd := 3+len(extra), 4+len(extra)
	args := append([]string{keeperArg, strconv.Itoa(lifeFd), strconv.Itoa(statusFd)}, argv...)
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Args[0] = os.Args[0]
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = append(extra, lifeR, statusW)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: ownGroup}
	err = cmd.Start()
	lifeR.Close()
	statusW.Close()
	if err != nil {
		lifeW.Close()
		statusR.Close()
		return nil, nil, err
	}
	report, _ := io.ReadAll(statusR) // until COMMAND runs, or could not
	statusR.Close()
	if len(report) == 0 {
		return cmd, lifeW, nil
	}
	lifeW.Close()
	cmd.Wait()
	codeText, msg, _ := strings.Cut(string(report), " ")
	code, err := strconv.Atoi(codeText)
	if err != nil {
		code, msg = exitCannotExec, string(report)
	}
	return nil, nil, &exitError{code: code, err: errors.New(msg), msg: fmt.Sprintf("cannot run %s: %s", argv[0], msg)}
}

// inheritedFiles returns, for each file descriptor from 3 up to the
// highest that redlock holds open without close-on-exec, that descriptor,
// or nil for one that is closed or close-on-exec, as exec.Cmd.ExtraFiles
// takes them.
func inheritedFiles() []*os.File {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	var fds []int
	top := 2
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue
		}
		fds = append(fds, fd)
		top = max(top, fd)
	}
	files := make([]*os.File, top-2)
	inherited.mu.Lock()
	defer inherited.mu.Unlock()
	for _, fd := range fds {
		f := inherited.files[fd]
		if f == nil {
			f = os.NewFile(uintptr(fd), "inherited")
			inherited.files[fd] = f
		}
		files[fd-3] = f
	}
	return files
}

// inherited keeps the Files that inheritedFiles made, so that none is
// collected, which would close its descriptor.
var inherited = struct {
	mu    sync.Mutex
	files map[int]*os.File
}{files: make(map[int]*os.File)}
