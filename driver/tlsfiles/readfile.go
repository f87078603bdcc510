package tlsfiles

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// MaxFileSize is the largest file that ReadFile reads: far more than a
// chain of PEM certificates, a key or a list of node URLs needs.
const MaxFileSize = 1 << 20

// ErrNotRegular is the error of ReadFile for a path that is not a regular
// file.
var ErrNotRegular = errors.New("not a regular file")

// ReadFile returns the contents of the regular file at path, which must
// be at most MaxFileSize bytes long. It fails for anything else, without
// reading from it or waiting on it: a directory, a named pipe, a device
// such as /dev/zero, a socket. A symbolic link is followed. Its error
// wraps ErrNotRegular, or the error of the file system, and names the
// path.
func ReadFile(path string) ([]byte, error) {
	// Opened without blocking, so that a named pipe with no writer does
	// not hold the open; then checked before a byte is read.
	f, err := os.OpenFile(path, openFlags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind(fi.Mode()))}
	}
	if fi.Size() > MaxFileSize {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%d bytes, more than the %d a file may have", fi.Size(), MaxFileSize)}
	}
	// The file may grow while it is read: read no more than the limit.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("more than the %d bytes a file may have", MaxFileSize)}
	}
	return data, nil
}

// kind names what a file of mode m is.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "an irregular file"
}
