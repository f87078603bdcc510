package goredisnode_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/quorumlock/redlock/internal/redistest"
)

// A lock refused by a server that wants a password, or that refuses the
// one given, says what to fix: the library's error, not only the CLI's,
// carries the hint.
func TestCredentialErrorsCarryHint(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	srv.MustDo(t, "CONFIG", "SET", "requirepass", "s3cret") // the last command without one
	for url, code := range map[string]string{
		"redis://" + srv.Addr():             "NOAUTH",
		"redis://:wrong@" + srv.Addr():      "WRONGPASS",
		"redis://alice:wrong@" + srv.Addr(): "WRONGPASS",
	} {
		n, err := goredisnode.Dial(url)
		if err != nil {
			t.Fatal(err)
		}
		locks, err := redlock.New([]redlock.Node{n}, &redlock.Options{DisableQuarantine: true})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = locks.Lock(ctx, "k", 10*time.Second)
		cancel()
		locks.Close()
		n.Close()
		if !errors.Is(err, redlock.ErrRefused) || !strings.Contains(err.Error(), code+" ") ||
			!strings.Contains(err.Error(), driver.Hint(code)) || strings.Contains(err.Error(), "wrong@") {
			t.Errorf("Lock on %s: %v; want a %s refusal with the hint %q", code, err, code, driver.Hint(code))
		}
	}
}
