package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/internal/timeline"
)

// A demoPhase is a phase of the demo, as it began.
type demoPhase struct {
	start time.Time
	label string
}

// A nodeStop is a node that the demo stopped, or cut itself off from.
type nodeStop struct {
	node int // from 0
	at   time.Time
}

// checkTimeline refuses, before the run, a --timeline file in a directory
// that does not exist.
func checkTimeline(path string) error {
	if path == "" {
		return nil
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return usagef("--timeline %s: there is no directory %s", path, dir)
	}
	return nil
}

// drawTimeline draws the run in the file path, if one is named, and says
// where.
func (d *demo) drawTimeline(path string) error {
	if path == "" {
		return nil
	}
	if err := d.timeline(time.Now()).WriteFile(path); err != nil {
		return exitf(exitSoftware, "--timeline: %v", err)
	}
	d.say("")
	d.say("timeline of the run drawn in %s", path)
	return nil
}

// timeline returns the picture of the run until end (see package
// timeline), on the same kind of axis as the fault suite's: a lane per
// worker, with each call of Lock as a thin line while it waited or when it
// failed, and each hold as a bar labelled with its fence; a lane per
// node, with the stretch during which it was stopped (or cut off); the
// phases shaded behind; overlapping holds and fences that did not rise in
// red; the verdict's checks under it.
func (d *demo) timeline(end time.Time) *timeline.Chart {
	at := func(t time.Time) time.Duration { return t.Sub(d.start) }
	worker := func(w int) string { return fmt.Sprintf("worker %d", w) }
	holds := d.hist.sorted()
	misses := d.hist.missed()
	c := &timeline.Chart{
		Title: fmt.Sprintf("redlock demo: %d workers contend for %s (TTL %v)", d.df.workers, d.key, d.df.ttl),
		End:   at(end),
	}

	// What the checks found, in red.
	type holdRef struct {
		worker int
		at     time.Time
	}
	bad := make(map[holdRef]bool)
	for _, o := range findOverlaps(holds) {
		bad[holdRef{o.earlier.worker, o.earlier.acquired}] = true
		bad[holdRef{o.later.worker, o.later.acquired}] = true
		c.Marks = append(c.Marks, timeline.Mark{From: at(o.later.acquired), To: at(minTime(o.earlier.end(), o.later.end())),
			Lanes: []string{worker(o.earlier.worker), worker(o.later.worker)}, Label: "overlap", Note: o.String()})
	}
	texts := fenceErrors(holds)
	for i, j := range fenceDrops(holds) {
		h, prev, text := holds[j], holds[j-1], texts[i]
		bad[holdRef{h.worker, h.acquired}] = true
		c.Marks = append(c.Marks, timeline.Mark{From: at(h.acquired), To: at(h.acquired),
			Lanes: []string{worker(prev.worker), worker(h.worker)}, Label: "fence", Note: text})
	}

	for w := 1; w <= d.df.workers; w++ {
		c.Clients = append(c.Clients, timeline.Lane{Name: worker(w)})
	}
	for _, h := range holds {
		l := &c.Clients[h.worker-1]
		kind, how := timeline.Hold, "released"
		if h.until.Before(h.released) {
			kind, how = timeline.Lapsed, "its validity ended before the release"
		}
		l.Spans = append(l.Spans,
			timeline.Span{From: at(h.called), To: at(h.acquired), Kind: timeline.Call,
				Note: fmt.Sprintf("worker %d waited %v for the lock", h.worker, roundDur(h.acquired.Sub(h.called)))},
			timeline.Span{From: at(h.acquired), To: at(h.end()), Kind: kind, Label: fmt.Sprint(h.fence), Bad: bad[holdRef{h.worker, h.acquired}],
				Note: fmt.Sprintf("worker %d held the lock with fence %d from %v to %v: %s", h.worker, h.fence, ms(at(h.acquired)), ms(at(h.end())), how)})
	}
	for _, m := range misses {
		l := &c.Clients[m.worker-1]
		l.Spans = append(l.Spans, timeline.Span{From: at(m.called), To: at(m.returned), Kind: timeline.Call,
			Note: fmt.Sprintf("worker %d got no lock after %v: %s", m.worker, roundDur(m.returned.Sub(m.called)), describeErr(m.err))})
	}

	for i := range d.names {
		c.Nodes = append(c.Nodes, timeline.Lane{Name: fmt.Sprintf("node %d", i+1)})
	}
	for _, s := range d.stops {
		label, note := "stopped", fmt.Sprintf("node %d stopped at %v", s.node+1, ms(at(s.at)))
		if d.embedded == nil {
			label, note = "cut off", fmt.Sprintf("the demo cut itself off from node %d at %v; the server kept running", s.node+1, ms(at(s.at)))
		}
		l := &c.Nodes[s.node]
		l.Spans = append(l.Spans, timeline.Span{From: at(s.at), To: at(end), Kind: timeline.Fault, Label: label, Note: note})
	}
	for i, p := range d.phases {
		to := end
		if i+1 < len(d.phases) {
			to = d.phases[i+1].start
		}
		c.Periods = append(c.Periods, timeline.Period{From: at(p.start), To: at(to), Label: p.label})
	}

	failed := 0
	for _, r := range d.results {
		c.Notes = append(c.Notes, r.String())
		if !r.ok {
			failed++
		}
	}
	outcome := fmt.Sprintf("all %d checks passed", len(d.results))
	if failed > 0 {
		outcome = fmt.Sprintf("%d of %d checks failed", failed, len(d.results))
	}
	fences := ""
	if len(holds) > 0 {
		fences = fmt.Sprintf(", fences %d to %d", holds[0].fence, holds[len(holds)-1].fence)
	}
	c.Subtitle = fmt.Sprintf("%d nodes, quorum %d · %d holds%s · %d calls that got no lock · %s",
		len(d.names), admin.New(d.monitor).Quorum(), len(holds), fences, len(misses), outcome)
	return c
}

// ms rounds a moment of the run to the millisecond.
func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
