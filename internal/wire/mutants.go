//go:build redlock_mutants

package wire

import (
	"fmt"
	"strings"

	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/internal/mutant"
)

// This file puts the holes of the scripts back, for the simulator's
// measure (see package mutant), in builds tagged redlock_mutants only:
// when a mutant of the scripts is on, the scripts that calls send are
// rebuilt from their sources with one passage replaced.

// scriptMutants maps each mutant of the scripts to the replacements that
// make it: old text, new text, in every script that has the old text.
var scriptMutants = map[string][][2]string{
	// held (horizon.lua) reports the time its grants have left, not their
	// TTL.
	"ttl-as-left": {
		{"\t\tt = st.ttl1\n", "\t\tt = math.ceil((st.hi - now) / 1000)\n"},
		{"\t\tt = math.max(t, st.ttl2)\n", "\t\tt = math.max(t, math.ceil((st.hi2 - now) / 1000))\n"},
	},
	// (The mutants of Adopt's fence, adopt-no-fence and
	// adopt-fence-answering, are the client's: see adopt.go.)
	// settle (counter.lua) never raises the counter to the released fence.
	"release-no-raise": {
		{"local raise = fence and ", "local raise = false and fence and "},
	},
}

// mutable lists the scripts a mutant may change, by the variables that
// the calls read.
var mutable = []**driver.Script{
	&acquireScript, &releaseScript, &extendScript, &probeScript,
	&acquirePermitScript, &releasePermitScript,
	&rwReadScript, &rwWriteScript, &rwReleaseScript, &rwExtendScript, &adoptScript,
}

func init() {
	original := make([]*driver.Script, len(mutable))
	for i, p := range mutable {
		original[i] = *p
	}
	mutant.Watch(func(name string) {
		reps, ok := scriptMutants[name]
		hit := make([]bool, len(reps))
		for i, p := range mutable {
			s := original[i]
			if ok {
				src := s.Source()
				for j, r := range reps {
					if strings.Contains(src, r[0]) {
						hit[j] = true
						src = strings.ReplaceAll(src, r[0], r[1])
					}
				}
				if src != s.Source() {
					s = driver.NewScript(s.Name(), src)
				}
			}
			*p = s
		}
		for j, h := range hit {
			if !h {
				// The scripts changed under the mutant: it would test
				// nothing.
				panic(fmt.Sprintf("wire: mutant %s: no script has %q", name, reps[j][0]))
			}
		}
	})
}
