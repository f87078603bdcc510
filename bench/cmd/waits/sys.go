package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A kernel reads what Linux counts for a process and for the machine from
// the proc and sys file systems mounted at proc and sys. Every reading
// reports whether it could be made: elsewhere, or in a container that
// hides these files, the columns that need it are left blank.
type kernel struct {
	proc, sys string // normally "/proc" and "/sys"
}

var host = kernel{proc: "/proc", sys: "/sys"}

// schedstat sums, over the threads of process pid ("self" for this one),
// the time they ran on a CPU and the time they waited, runnable, for one,
// in nanoseconds (/proc/PID/task/*/schedstat). A thread that exits takes
// its counts with it; the Go runtime and redis-server keep theirs.
func (k kernel) schedstat(pid string) (run, wait int64, ok bool) {
	files, _ := filepath.Glob(filepath.Join(k.proc, pid, "task", "*", "schedstat"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		r, w, good := parseSchedstat(string(b))
		if good {
			run, wait, ok = run+r, wait+w, true
		}
	}
	return run, wait, ok
}

// parseSchedstat reads a schedstat line: time on a CPU (ns), time waiting
// on a run queue (ns), and time slices.
func parseSchedstat(s string) (run, wait int64, ok bool) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return 0, 0, false
	}
	run, err1 := strconv.ParseInt(f[0], 10, 64)
	wait, err2 := strconv.ParseInt(f[1], 10, 64)
	return run, wait, err1 == nil && err2 == nil
}

// voluntarySwitches sums the voluntary context switches of the threads of
// process pid: the times a thread gave up its CPU to wait, as for a reply.
func (k kernel) voluntarySwitches(pid string) (int64, bool) {
	files, _ := filepath.Glob(filepath.Join(k.proc, pid, "task", "*", "status"))
	var sum int64
	ok := false
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if v, found := statusField(string(b), "voluntary_ctxt_switches"); found {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				sum, ok = sum+n, true
			}
		}
	}
	return sum, ok
}

// statusField returns the value of the field name of a /proc status file.
func statusField(status, name string) (string, bool) {
	for line := range strings.Lines(status) {
		if k, v, ok := strings.Cut(line, ":"); ok && k == name {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// allowedCPUs returns the CPUs process pid may run on, as in "0-1", or
// "?".
func (k kernel) allowedCPUs(pid string) string {
	b, err := os.ReadFile(filepath.Join(k.proc, pid, "status"))
	if err != nil {
		return "?"
	}
	if v, ok := statusField(string(b), "Cpus_allowed_list"); ok {
		return v
	}
	return "?"
}

// command returns the name of process pid's program, or "".
func (k kernel) command(pid string) string {
	b, err := os.ReadFile(filepath.Join(k.proc, pid, "comm"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// idleEntries sums, over all CPUs, how many times a CPU entered an idle
// state other than POLL (/sys/devices/system/cpu/cpu*/cpuidle/state*/usage):
// each is a CPU that stopped (halted, on a virtual machine) and must be
// woken, by an interrupt, before it runs anything again. POLL is a busy
// loop, not a halt, and is left out. The count is the machine's, not this
// process's.
func (k kernel) idleEntries() (int64, bool) {
	states, _ := filepath.Glob(filepath.Join(k.sys, "devices", "system", "cpu", "cpu[0-9]*", "cpuidle", "state[0-9]*"))
	var sum int64
	ok := false
	for _, st := range states {
		name, err := os.ReadFile(filepath.Join(st, "name"))
		if err != nil || strings.TrimSpace(string(name)) == "POLL" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(st, "usage"))
		if err != nil {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			sum, ok = sum+n, true
		}
	}
	return sum, ok
}

// busyTicks returns the time all CPUs spent busy, in clock ticks (1/100 s
// on Linux), from the first line of /proc/stat.
func (k kernel) busyTicks() (int64, bool) {
	b, err := os.ReadFile(filepath.Join(k.proc, "stat"))
	if err != nil {
		return 0, false
	}
	return parseBusyTicks(string(b))
}

// ticksPerSecond is USER_HZ, the unit of /proc/stat, 100 on every Linux
// architecture that Go supports.
const ticksPerSecond = 100

// parseBusyTicks adds up the fields of the "cpu" line of /proc/stat that
// are not idle: user, nice, system, irq, softirq and steal (iowait is
// idle; guest time is already in user and nice).
func parseBusyTicks(stat string) (int64, bool) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, false
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system irq softirq steal
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, false
		}
		busy += n
	}
	return busy, true
}

// selfVoluntarySwitches returns the voluntary context switches of all the
// threads of this process so far (getrusage RUSAGE_SELF).
func selfVoluntarySwitches() (int64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return int64(ru.Nvcsw), true
}
