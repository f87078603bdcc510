package redistest

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestReadValue(t *testing.T) {
	tests := []struct {
		name string
		in   string
		kind byte
		want any // decoded
	}{
		{"simple string", "+OK\r\n", '+', "OK"},
		{"error", "-ERR bad\r\n", '-', Error("ERR bad")},
		{"integer", ":-42\r\n", ':', int64(-42)},
		{"bulk string", "$5\r\na\r\nbc\r\n", '$', "a\r\nbc"},
		{"empty bulk string", "$0\r\n\r\n", '$', ""},
		{"RESP2 null bulk string", "$-1\r\n", '$', nil},
		{"RESP2 null array", "*-1\r\n", '*', nil},
		{"null", "_\r\n", '_', nil},
		{"double", ",3.5\r\n", ',', 3.5},
		{"boolean", "#t\r\n", '#', true},
		{"bulk error", "!7\r\nERR bad\r\n", '!', Error("ERR bad")},
		{"verbatim string", "=8\r\ntxt:text\r\n", '=', "text"},
		{"big number", "(123456789012345678901234567890\r\n", '(', "123456789012345678901234567890"},
		{"empty array", "*0\r\n", '*', []any{}},
		{
			"nested array",
			"*3\r\n:1\r\n*2\r\n+a\r\n$-1\r\n-ERR x\r\n",
			'*', []any{int64(1), []any{"a", nil}, Error("ERR x")},
		},
		{
			"map counts two values per entry",
			"%2\r\n+a\r\n:1\r\n+b\r\n*1\r\n:2\r\n",
			'%', []any{"a", int64(1), "b", []any{int64(2)}},
		},
		{"set", "~2\r\n+a\r\n+b\r\n", '~', []any{"a", "b"}},
		{
			"push",
			">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n",
			'>', []any{"invalidate", []any{"k"}},
		},
		{
			"attribute before a reply is not the reply",
			"|1\r\n+ttl\r\n:3600\r\n:7\r\n",
			':', int64(7),
		},
		{
			"attribute inside an aggregate is not an element",
			"*2\r\n|1\r\n+key-popularity\r\n*1\r\n,0.19\r\n:1\r\n:2\r\n",
			'*', []any{int64(1), int64(2)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A second value after the first checks that the first was read
			// to its end and no further.
			r := newRESPReader(strings.NewReader(tt.in + "+next\r\n"))
			v, err := r.readValue()
			if err != nil {
				t.Fatal(err)
			}
			if v.kind != tt.kind {
				t.Errorf("kind %q, want %q", v.kind, tt.kind)
			}
			if string(v.raw) != tt.in {
				t.Errorf("raw %q, want %q", v.raw, tt.in)
			}
			if got := v.decode(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("decoded %#v, want %#v", got, tt.want)
			}
			if next, err := r.readValue(); err != nil || next.str != "next" {
				t.Errorf("next value (%q, %v), want +next", next.raw, err)
			}
			if _, err := r.readValue(); err != io.EOF {
				t.Errorf("at the end: %v, want io.EOF", err)
			}
		})
	}
}

func TestReadValueErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"truncated line", "+OK", io.ErrUnexpectedEOF},
		{"truncated bulk string", "$5\r\nab", io.ErrUnexpectedEOF},
		{"truncated array", "*2\r\n:1\r\n", io.ErrUnexpectedEOF},
		{"truncated attribute", "|1\r\n+a\r\n:1\r\n", io.ErrUnexpectedEOF},
		{"unknown type", "?x\r\n", errProtocol},
		{"bare LF", "+OK\n", errProtocol},
		{"bad length", "$-2\r\n", errProtocol},
		{"bad integer", ":x\r\n", errProtocol},
		{"bad double", ",x\r\n", errProtocol},
		{"bad boolean", "#x\r\n", errProtocol},
		{"bulk string too long for its length", "$1\r\nab\r\n", errProtocol},
		{"verbatim string without format", "=2\r\nab\r\n", errProtocol},
		{"streamed string", "$?\r\n;1\r\na\r\n;0\r\n", errProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newRESPReader(strings.NewReader(tt.in)).readValue()
			if !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestReadCommand(t *testing.T) {
	in := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n" +
		"PING hello  world\r\n" +
		"ping\n" +
		"\r\n" +
		"*0\r\n"
	want := []struct {
		raw  string
		args []string
	}{
		{"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n", []string{"SET", "k", "a\r\nb"}},
		{"PING hello  world\r\n", []string{"PING", "hello", "world"}},
		{"ping\n", []string{"ping"}},
		{"\r\n", []string{}},
		{"*0\r\n", []string{}},
	}
	r := newRESPReader(strings.NewReader(in))
	for _, w := range want {
		raw, args, err := r.readCommand()
		if err != nil {
			t.Fatal(err)
		}
		if string(raw) != w.raw || !reflect.DeepEqual(args, w.args) {
			t.Errorf("got (%q, %q), want (%q, %q)", raw, args, w.raw, w.args)
		}
	}
	if _, _, err := r.readCommand(); err != io.EOF {
		t.Errorf("at the end: %v, want io.EOF", err)
	}

	_, _, err := newRESPReader(strings.NewReader("*1\r\n:1\r\n")).readCommand()
	if !errors.Is(err, errProtocol) {
		t.Errorf("command of an integer: %v, want a protocol error", err)
	}
}

func TestAppendCommand(t *testing.T) {
	got := string(appendCommand([]byte("x"), "GET", "", "a b"))
	want := "x*3\r\n$3\r\nGET\r\n$0\r\n\r\n$3\r\na b\r\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
