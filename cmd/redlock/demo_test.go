package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/timeline"
)

// The demo works with nothing but this program: embedded nodes.
func TestDemoEmbedded(t *testing.T) {
	t.Parallel()
	r := run(t, "demo", "--phase", "1s")
	expect(t, r, 0, "embedded Redis-protocol nodes", "restart quarantine: off",
		"phase 1", "phase 2: stopping node 4 and node 5", "phase 3: stopping node 3",
		"errors.Is(err, redlock.ErrNoQuorum) = true",
		"PASS  no overlapping holders", "PASS  fences strictly increased", "PASS  no lost updates",
		"demo PASSED")
	if strings.Contains(r.stdout, "FAIL") {
		t.Fatalf("a check failed:\n%s", r)
	}
}

// With --nodes the demo runs against real servers, which it leaves
// running; with restart quarantine on, it waits for fresh servers first.
func TestDemoRealNodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no quarantine", []string{"--no-quarantine"}},
		{"quarantine", []string{"--ttl", "1s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.StartN(t, 5, redistest.Config{})
			args := append([]string{"demo", "--phase", "1s", nodesFlag(srv...)}, tc.args...)
			r := run(t, args...)
			expect(t, r, 0, "cutting off node 4 and node 5", "demo PASSED")
			if strings.Contains(r.stdout, "FAIL") {
				t.Fatalf("a check failed:\n%s", r)
			}
			for _, s := range srv {
				if !s.Running() {
					t.Fatalf("the demo stopped a real server")
				}
			}
		})
	}
}

// readSVG decodes an SVG document strictly, and returns how many elements
// of each name and class it has ("rect.h"), the text of its text elements
// and of its title elements (the tooltips).
func readSVG(t *testing.T, doc []byte) (count map[string]int, texts, titles []string) {
	t.Helper()
	count = make(map[string]int)
	d := xml.NewDecoder(bytes.NewReader(doc))
	var open []string
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the timeline is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			class := ""
			for _, a := range tok.Attr {
				if a.Name.Local == "class" {
					class = a.Value
				}
			}
			count[tok.Name.Local+"."+class]++
			open = append(open, tok.Name.Local)
		case xml.EndElement:
			open = open[:len(open)-1]
		case xml.CharData:
			switch {
			case len(open) == 0:
			case open[len(open)-1] == "text":
				texts = append(texts, string(tok))
			case open[len(open)-1] == "title":
				titles = append(titles, string(tok))
			}
		}
	}
	if count["svg."] != 1 {
		t.Fatalf("want one svg element, got %v", count)
	}
	return count, texts, titles
}

// --timeline draws the run: a lane per worker with a bar per hold, whose
// tooltip gives its fence; the nodes the demo stopped; the phases; the
// verdict.
func TestDemoTimeline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runIn(t, dir, nil, "demo", "--phase", "1s", "--timeline", "run.svg")
	expect(t, r, 0, "demo PASSED", "timeline of the run drawn in run.svg")
	doc, err := os.ReadFile(filepath.Join(dir, "run.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if len(doc) > timeline.MaxBytes {
		t.Errorf("the timeline is %d bytes, more than %d", len(doc), timeline.MaxBytes)
	}
	count, texts, titles := readSVG(t, doc)
	// Each hold is a bar, drawn blue (the legend has one more).
	_, rest, _ := strings.Cut(r.stdout, "each of the ")
	holds, _, _ := strings.Cut(rest, " ")
	if n, err := strconv.Atoi(holds); err != nil || count["rect.h"] != n+1 {
		t.Errorf("the run had %s holds, the timeline draws %d", holds, count["rect.h"]-1)
	}
	if count["rect.b"]+count["rect.m"] != 0 {
		t.Errorf("a run without violations has red in its timeline: %v", count)
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{"redlock demo: 4 workers", "worker 1", "worker 4", "node 1", "node 5", "fences ",
		"phase 1: all 5 nodes up", "phase 2: 3 of 5 nodes up", "phase 3: 2 of 5 nodes up, no quorum",
		"PASS  no overlapping holders"} {
		if !strings.Contains(all, want) {
			t.Errorf("the timeline lacks %q:\n%s", want, all)
		}
	}
	if n := strings.Count(all, "stopped"); n != 3 {
		t.Errorf("want nodes 3, 4 and 5 labelled stopped, got %d labels", n)
	}
	tips := strings.Join(titles, "\n")
	for _, want := range []string{"worker 1 held the lock with fence ", "node 4 stopped at ", "too few nodes available for a quorum"} {
		if !strings.Contains(tips, want) {
			t.Errorf("no tooltip says %q", want)
		}
	}

	// A file that cannot be written is refused before the run.
	r = runIn(t, dir, nil, "demo", "--timeline", filepath.Join("missing", "run.svg"))
	expect(t, r, exitUsage, "--timeline", "there is no directory missing")
	if strings.Contains(r.stdout, "phase 1") {
		t.Errorf("the demo ran before refusing the file:\n%s", r)
	}
}
