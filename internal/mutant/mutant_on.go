//go:build redlock_mutants

package mutant

import "sync/atomic"

// Enabled reports whether this build can turn mutants on.
const Enabled = true

var active atomic.Pointer[string]

// watchers are told of every Set (see Watch).
var watchers []func(name string)

// Watch has f called with the name of every mutant that Set turns on
// ("" when it turns all off), for a package that must rebuild something,
// such as its scripts, rather than ask On each time. It is for init
// functions only.
func Watch(f func(name string)) { watchers = append(watchers, f) }

// Set turns on the mutant name, and off any other; "" turns all off.
func Set(name string) error {
	active.Store(&name)
	for _, f := range watchers {
		f(name)
	}
	return nil
}

// On reports whether the mutant name is on.
func On(name string) bool {
	p := active.Load()
	return p != nil && *p == name
}
