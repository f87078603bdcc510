//go:build redlock_mutants

package mutant

import "sync/atomic"

// Enabled reports whether this build can turn mutants on.
const Enabled = true

var active atomic.Pointer[string]

// Set turns on the mutant name, and off any other; "" turns all off.
func Set(name string) error {
	active.Store(&name)
	return nil
}

// On reports whether the mutant name is on.
func On(name string) bool {
	p := active.Load()
	return p != nil && *p == name
}
