package main

import (
	"context"
	"fmt"
	"io"
	"os"
	rtrace "runtime/trace"
	"strconv"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

// traceCategory is the category of the runtime/trace log entries that
// mark where each library's traced pairs begin and end.
const traceCategory = "waits"

// traceChunk is how many pairs a library runs in one turn of the trace.
const traceChunk = 100

// traceRun writes into w a runtime/trace of n pairs of each library, the
// libraries taking turns of traceChunk pairs, as in the measured slices,
// so that a change in the machine's load hits them alike. Each turn is
// marked by two log entries: "begin LIB PAIRS" and "end".
func traceRun(ctx context.Context, w io.Writer, libs []string, ps []pairer, n int) error {
	if err := rtrace.Start(w); err != nil {
		return err
	}
	defer rtrace.Stop()
	for done := 0; done < n; done += traceChunk {
		k := min(traceChunk, n-done)
		for i, p := range ps {
			rtrace.Log(ctx, traceCategory, fmt.Sprintf("begin %s %d", libs[i], k))
			err := pairsFor(ctx, p, k)
			rtrace.Log(ctx, traceCategory, "end")
			if err != nil {
				return fmt.Errorf("%s: %w", libs[i], err)
			}
		}
	}
	return nil
}

// A traced is what the trace shows of one library's pairs, from a
// "begin" entry to its "end", or summed over all its turns.
type traced struct {
	lib   string
	pairs int
	wall  time.Duration
	// time is the calling goroutine's time by state: "running",
	// "syscall", "runnable" (ready, waiting for a thread to run it) and
	// "waiting: REASON", as the runtime names why it parked: "network"
	// for a reply, "chan receive", "select", "sync", "sleep"...
	time map[string]time.Duration
	// parks counts the calling goroutine's parks by reason.
	parks map[string]int
	// syscalls counts its system calls.
	syscalls int
	// created counts the goroutines created, by anyone; woken the other
	// goroutines made runnable from waiting; procStarts the times a P
	// (the runtime's right to run Go code) went from idle to running.
	created, woken, procStarts int
}

// A traceSummary reads the events of a trace in order and sums them up by
// library.
type traceSummary struct {
	done []*traced
	cur  *traced // between "begin" and "end"

	caller trace.GoID // the goroutine that logged "begin"
	state  string     // its state, as a key of traced.time
	since  trace.Time // when it entered state
	start  trace.Time // of cur
}

// summarizeTrace reads the trace in r and returns, for each library in
// the order of its first turn, the sum of its turns.
func summarizeTrace(r io.Reader) ([]*traced, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return nil, err
	}
	var s traceSummary
	for {
		ev, err := tr.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := s.add(ev); err != nil {
			return nil, err
		}
	}
	if s.cur != nil {
		return nil, fmt.Errorf("the trace ends inside %s's pairs", s.cur.lib)
	}
	return mergeTurns(s.done), nil
}

// mergeTurns sums the turns of each library, in the order of their first.
func mergeTurns(turns []*traced) []*traced {
	var out []*traced
	byLib := map[string]*traced{}
	for _, t := range turns {
		m := byLib[t.lib]
		if m == nil {
			m = &traced{lib: t.lib, time: map[string]time.Duration{}, parks: map[string]int{}}
			byLib[t.lib] = m
			out = append(out, m)
		}
		m.pairs += t.pairs
		m.wall += t.wall
		for k, v := range t.time {
			m.time[k] += v
		}
		for k, v := range t.parks {
			m.parks[k] += v
		}
		m.syscalls += t.syscalls
		m.created += t.created
		m.woken += t.woken
		m.procStarts += t.procStarts
	}
	return out
}

// summarizeTraceFile reads the trace in the file at path.
func summarizeTraceFile(path string) ([]*traced, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return summarizeTrace(f)
}

// stateName is the key of traced.time for a goroutine state.
func stateName(st trace.GoState, reason string) string {
	switch st {
	case trace.GoRunning:
		return "running"
	case trace.GoSyscall:
		return "syscall"
	case trace.GoRunnable:
		return "runnable"
	case trace.GoWaiting:
		if reason == "" {
			reason = "unnamed"
		}
		return "waiting: " + reason
	}
	return st.String()
}

// add takes one event into the summary.
func (s *traceSummary) add(ev trace.Event) error {
	switch ev.Kind() {
	case trace.EventLog:
		return s.marker(ev)
	case trace.EventStateTransition:
		if s.cur != nil {
			s.transition(ev)
		}
	}
	return nil
}

// marker opens or closes a library's window at a log entry of ours.
func (s *traceSummary) marker(ev trace.Event) error {
	l := ev.Log()
	if l.Category != traceCategory {
		return nil
	}
	f := strings.Fields(l.Message)
	switch {
	case len(f) == 3 && f[0] == "begin":
		if s.cur != nil {
			return fmt.Errorf("%s begins inside %s's pairs", f[1], s.cur.lib)
		}
		n, err := strconv.Atoi(f[2])
		if err != nil || n <= 0 {
			return fmt.Errorf("bad trace marker %q", l.Message)
		}
		s.cur = &traced{lib: f[1], pairs: n, time: map[string]time.Duration{}, parks: map[string]int{}}
		s.caller, s.state, s.since, s.start = ev.Goroutine(), "running", ev.Time(), ev.Time()
	case len(f) == 1 && f[0] == "end":
		if s.cur == nil {
			return fmt.Errorf("an end of pairs without a beginning")
		}
		s.cur.time[s.state] += ev.Time().Sub(s.since)
		s.cur.wall = ev.Time().Sub(s.start)
		s.done = append(s.done, s.cur)
		s.cur = nil
	default:
		return fmt.Errorf("bad trace marker %q", l.Message)
	}
	return nil
}

// transition counts a change of state of a goroutine or a P.
func (s *traceSummary) transition(ev trace.Event) {
	st := ev.StateTransition()
	t := s.cur
	switch st.Resource.Kind {
	case trace.ResourceGoroutine:
		from, to := st.Goroutine()
		if st.Resource.Goroutine() == s.caller {
			t.time[s.state] += ev.Time().Sub(s.since)
			s.state, s.since = stateName(to, st.Reason), ev.Time()
			switch to {
			case trace.GoWaiting:
				t.parks[st.Reason]++
			case trace.GoSyscall:
				t.syscalls++
			}
			return
		}
		switch {
		case from == trace.GoNotExist && to == trace.GoRunnable:
			t.created++
		case from == trace.GoWaiting && to == trace.GoRunnable:
			t.woken++
		}
	case trace.ResourceProc:
		if from, to := st.Proc(); from != trace.ProcRunning && to == trace.ProcRunning {
			t.procStarts++
		}
	}
}
