//go:build !redlock_mutants

package mutant

import "errors"

// Enabled reports whether this build can turn mutants on.
const Enabled = false

// Set fails: this build cannot turn mutants on.
func Set(name string) error {
	if name == "" {
		return nil
	}
	return errors.New("mutant: built without the tag redlock_mutants")
}

// On reports whether the mutant name is on: never, in this build.
func On(string) bool { return false }
