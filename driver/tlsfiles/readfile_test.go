//go:build unix

package tlsfiles

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// ReadFile reads regular files only, up to MaxFileSize, and fails at once
// for a device that never ends, a named pipe that nobody writes to and a
// directory; Load, which reads the files of TLS, goes through it.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, MaxFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("ok"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(small); err != nil || string(b) != "ok" {
		t.Fatalf("ReadFile(small) = %q, %v", b, err)
	}
	for path, want := range map[string]string{
		"/dev/zero": "a character device", fifo: "a named pipe", dir: "a directory", big: "more than the",
	} {
		_, err := ReadFile(path)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
			t.Errorf("ReadFile(%s) = %v, want an error with %q", path, err, want)
		}
		if want != "more than the" && !errors.Is(err, ErrNotRegular) {
			t.Errorf("ReadFile(%s) = %v, not ErrNotRegular", path, err)
		}
		if _, err := Load(Files{CACert: path}); err == nil {
			t.Errorf("Load with the CA file %s succeeded", path)
		}
	}
}
