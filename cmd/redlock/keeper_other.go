//go:build !linux

package main

import (
	"os"
	"os/exec"
)

// keeperMain returns false: only Linux has the keeper (keeper_linux.go).
func keeperMain([]string) (int, bool) { return 0, false }

// startKeeper fails: redlock starts COMMAND itself.
func startKeeper([]string, []string, bool) (*exec.Cmd, *os.File, error) {
	return nil, nil, errNoKeeper
}
