// Package timeline draws a run of lock clients as an SVG picture, in the
// manner of the timelines of Jepsen's reports: one lane per client, on
// which each hold of a lock is a bar from its grant to its release or the
// end of its validity, labelled with its fence, and each call a thin line
// while it waits or fails; below them one lane per node, with the faults
// done to it (paused, killed, restarted, cut off, clock stepped) on the
// same time axis; and in red, the violations a checker found, marked where
// they happen.
//
// The fault suite (module github.com/quorumlock/redlock/faulttest) draws
// its scenarios' histories with it, and the redlock command's demo draws
// its own run. The package knows neither: a [Chart] is lanes of spans on
// one time axis. It imports only the standard library.
//
// A chart's SVG is at most [MaxBytes] long, however many spans it has:
// when the full drawing would be longer, spans too close to be told apart
// at the chart's width are drawn as one, tooltips are left out, and only
// the first marks are drawn, in turn, until it fits.
package timeline

import (
	"fmt"
	"os"
	"time"
)

// A Kind says how a span is drawn.
type Kind int

// The kinds of span.
const (
	// Hold is a hold of a lock: a bar from the grant to the release (or to
	// whatever else ended it early), labelled with the fence.
	Hold Kind = iota
	// Lapsed is a hold that ran to the end of its validity: a paler bar.
	Lapsed
	// Call is a call in progress, waiting for a lock or failing to get
	// one: a thin grey line.
	Call
	// Fault is a fault in force on a node, from its injection to its
	// healing: an orange bar, labelled beside it when the label does not
	// fit in it.
	Fault
	// Event is a moment, such as a restart or a step of a clock: a tick at
	// From, labelled beside it. To is not used.
	Event
)

// A Span is one thing drawn in a lane, from From to To on the chart's
// time axis.
type Span struct {
	From, To time.Duration
	Kind     Kind
	// Label is drawn on the bar when it fits there (a hold's fence), and
	// beside it for faults and events.
	Label string
	// Note is shown as the span's tooltip.
	Note string
	// Bad marks the span as part of a violation: it is drawn red.
	Bad bool
}

// A Lane is one row of the chart: a client's, or a node's.
type Lane struct {
	Name  string
	Spans []Span
}

// A Period is a named stretch of the run, shaded behind the lanes, such
// as a phase of the demo.
type Period struct {
	From, To time.Duration
	Label    string
}

// A Mark is a violation: a red band over the lanes it names (over every
// lane when it names none), from From to To, or a red line at From when
// To is not after it; labelled above the lanes.
type Mark struct {
	From, To time.Duration
	Lanes    []string
	Label    string // short: drawn above the lanes
	Note     string // the tooltip
}

// A Chart is the picture of one run.
type Chart struct {
	Title    string
	Subtitle string
	// Clients are drawn first, top to bottom; Nodes below them.
	Clients []Lane
	Nodes   []Lane
	Periods []Period
	Marks   []Mark
	// Notes are lines of text under the chart, such as what each
	// violation was. The first 8 are drawn.
	Notes []string
	// Start and End bound the time axis. When End is not after Start,
	// the axis runs from the first moment in the chart to the last.
	Start, End time.Duration
	// Width is the width of the picture in pixels; 0 means 1200.
	Width int
}

// MaxBytes is the most bytes Chart.SVG returns for a chart of up to 32
// lanes and 50 periods, however many spans and marks it has.
const MaxBytes = 190_000

// SVG returns the chart as an SVG document.
func (c *Chart) SVG() []byte {
	var out []byte
	for _, d := range detail {
		out = c.render(d)
		if len(out) <= MaxBytes {
			break
		}
	}
	return out
}

// WriteFile writes the chart's SVG to path.
func (c *Chart) WriteFile(path string) error {
	if err := os.WriteFile(path, c.SVG(), 0o644); err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	return nil
}
