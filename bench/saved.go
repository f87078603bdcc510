package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// WriteJSON writes the report to path as JSON, for drawing plots later
// from several runs (ReadReports, Figures). The configuration's writer
// and network are left out: the network is described by Report.Network.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "\t")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadReports reads reports that WriteJSON wrote.
func ReadReports(paths []string) ([]*Report, error) {
	var reps []*Report
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		r := new(Report)
		if err := json.Unmarshal(b, r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		reps = append(reps, r)
	}
	return reps, nil
}

// Stalls reports whether the report's run had a simulated network with a
// stalling server.
func (r *Report) Stalls() bool {
	return r.Network != "" && !strings.HasSuffix(r.Network, "; no stalls")
}
