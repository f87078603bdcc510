//go:build !unix

package tlsfiles

import "os"

// openFlags open a file for reading.
const openFlags = os.O_RDONLY
