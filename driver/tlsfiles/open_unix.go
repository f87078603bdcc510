//go:build unix

package tlsfiles

import (
	"os"
	"syscall"
)

// openFlags open a file for reading without waiting for a named pipe's
// writer.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK
