package connect

import (
	"errors"
	"reflect"
	"testing"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/clientx"
)

func TestDefaultNodes(t *testing.T) {
	t.Setenv(EnvNodes, "")
	if got := DefaultNodes(); got != DefaultURL {
		t.Errorf("DefaultNodes() with %s empty = %q, want %q", EnvNodes, got, DefaultURL)
	}
	t.Setenv(EnvNodes, " redis://a:1,redis://b:2 ")
	if got, want := DefaultNodes(), "redis://a:1,redis://b:2"; got != want {
		t.Errorf("DefaultNodes() with %s set = %q, want %q", EnvNodes, got, want)
	}
}

func TestSplit(t *testing.T) {
	got, err := Split(" redis://a:1 ,redis://b:2,unix:///run/r.sock")
	want := []string{"redis://a:1", "redis://b:2", "unix:///run/r.sock"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Split = %q, %v; want %q, nil", got, err, want)
	}
	for _, bad := range []string{"", "  ", "redis://a:1,,redis://b:2", "redis://a:1,"} {
		if got, err := Split(bad); err == nil {
			t.Errorf("Split(%q) = %q, nil; want an error", bad, got)
		}
	}
}

func TestDial(t *testing.T) {
	c, closeNodes, err := Dial([]string{"redis://127.0.0.1:1", "redis://127.0.0.1:2", "redis://127.0.0.1:3"}, nil)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	if got, want := clientx.Of(c).Nodes(), []string{"127.0.0.1:1/0", "127.0.0.1:2/0", "127.0.0.1:3/0"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Nodes() = %q, want %q", got, want)
	}
	if err := closeNodes(); err != nil {
		t.Errorf("closing: %v", err)
	}

	if _, _, err := Dial([]string{"redis://127.0.0.1:1", "http://127.0.0.1:2"}, nil); err == nil {
		t.Error("Dial with an http:// URL succeeded")
	}
	// The same node twice is refused by redlock.New.
	_, _, err = Dial([]string{"redis://127.0.0.1:1", "redis://127.0.0.1:1"}, nil)
	if !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("Dial with a duplicate node: %v, want an error wrapping ErrInvalid", err)
	}
}
