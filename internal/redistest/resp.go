package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Error is an error reply from Redis, such as "ERR unknown command" or
// "WRONGTYPE Operation against a key holding the wrong kind of value".
type Error string

func (e Error) Error() string { return string(e) }

// A value is one complete RESP2 or RESP3 value as read from a stream.
type value struct {
	// kind is the value's type byte: '+' simple string, '-' error,
	// ':' integer, '$' bulk string, '*' array, '_' null, ',' double,
	// '#' boolean, '!' bulk error, '=' verbatim string, '(' big number,
	// '%' map, '~' set or '>' push.
	kind byte
	// str is the payload of the types that are not aggregates.
	str string
	// null is set for the RESP3 null and for the RESP2 null bulk string
	// and null array.
	null bool
	// elems are the elements of an aggregate; a map's keys and values
	// alternate.
	elems []value
	// raw is every byte the value was read from, attributes included.
	// Only values returned by readValue have it.
	raw []byte
}

// errProtocol is wrapped by the errors for malformed input.
var errProtocol = errors.New("redistest: RESP protocol error")

func protocolError(msg string) error {
	return fmt.Errorf("%w: %s", errProtocol, msg)
}

// A respReader reads RESP values from a stream and keeps the exact bytes of
// each, so that a proxy can relay them unchanged.
type respReader struct {
	br  *bufio.Reader
	buf []byte // the bytes of the value being read
}

func newRESPReader(r io.Reader) *respReader {
	return &respReader{br: bufio.NewReader(r)}
}

// readValue reads one complete value, and any attributes before it. It
// returns io.EOF if the stream ends before the value starts and
// io.ErrUnexpectedEOF if it ends inside it.
func (r *respReader) readValue() (value, error) {
	r.buf = nil
	v, err := r.parse()
	if err != nil {
		return value{}, err
	}
	v.raw = r.buf
	return v, nil
}

// readCommand reads one command as a client sends it: an array of bulk
// strings, or an inline command (a line of words, as typed into telnet).
// It returns the command's bytes and its arguments; like redis-server, it
// takes an empty line or an empty array for a command with no arguments,
// which the server ignores without answering.
func (r *respReader) readCommand() (raw []byte, args []string, err error) {
	first, err := r.br.Peek(1)
	if err != nil {
		return nil, nil, err
	}
	r.buf = nil
	if first[0] != '*' {
		// Inline commands may end in a bare "\n".
		line, err := r.rawLine()
		if err != nil {
			return nil, nil, err
		}
		return r.buf, strings.Fields(string(line)), nil
	}
	v, err := r.parse()
	if err != nil {
		return nil, nil, err
	}
	args = make([]string, len(v.elems))
	for i, e := range v.elems {
		if e.kind != '$' || e.null {
			return nil, nil, protocolError("command argument is not a bulk string")
		}
		args[i] = e.str
	}
	return r.buf, args, nil
}

// parse reads one value into r.buf and returns it without raw.
func (r *respReader) parse() (value, error) {
	for {
		line, err := r.line()
		if err != nil {
			return value{}, err
		}
		if len(line) == 0 {
			return value{}, protocolError("empty line where a value starts")
		}
		kind, rest := line[0], string(line[1:])
		switch kind {
		case '+', '-', '(':
			return value{kind: kind, str: rest}, nil
		case ':':
			if _, err := strconv.ParseInt(rest, 10, 64); err != nil {
				return value{}, protocolError("bad integer " + strconv.Quote(rest))
			}
			return value{kind: kind, str: rest}, nil
		case ',':
			if _, err := strconv.ParseFloat(rest, 64); err != nil {
				return value{}, protocolError("bad double " + strconv.Quote(rest))
			}
			return value{kind: kind, str: rest}, nil
		case '#':
			if rest != "t" && rest != "f" {
				return value{}, protocolError("bad boolean " + strconv.Quote(rest))
			}
			return value{kind: kind, str: rest}, nil
		case '_':
			return value{kind: kind, null: true}, nil
		case '$', '!', '=':
			n, err := parseLength(rest)
			if err != nil {
				return value{}, err
			}
			if n < 0 {
				return value{kind: kind, null: true}, nil
			}
			body, err := r.body(n)
			if err != nil {
				return value{}, err
			}
			if kind == '=' && (len(body) < 4 || body[3] != ':') {
				return value{}, protocolError("verbatim string without a format")
			}
			return value{kind: kind, str: body}, nil
		case '*', '~', '>', '%', '|':
			n, err := parseLength(rest)
			if err != nil {
				return value{}, err
			}
			if n < 0 {
				return value{kind: kind, null: true}, nil
			}
			if kind == '%' || kind == '|' {
				n *= 2 // a key and a value per entry
			}
			// Grow as elements arrive rather than trusting n up front.
			var elems []value
			for range n {
				e, err := r.parse()
				if err != nil {
					return value{}, err
				}
				elems = append(elems, e)
			}
			if kind == '|' {
				// An attribute only annotates the value that follows it.
				continue
			}
			return value{kind: kind, elems: elems}, nil
		default:
			return value{}, protocolError("unknown type byte " + strconv.QuoteRune(rune(kind)))
		}
	}
}

// parseLength parses the length of a string or aggregate, -1 meaning null.
func parseLength(s string) (int, error) {
	if s == "?" {
		return 0, protocolError("streamed strings and aggregates are not supported")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < -1 {
		return 0, protocolError("bad length " + strconv.Quote(s))
	}
	return n, nil
}

// line reads a line that ends in "\r\n" into r.buf and returns it without
// the terminator. The result is only valid until the next read.
func (r *respReader) line() ([]byte, error) {
	line, err := r.rawLine()
	if err != nil {
		return nil, err
	}
	if !bytes.HasSuffix(line, []byte("\r\n")) {
		return nil, protocolError("line not terminated by CRLF")
	}
	return line[:len(line)-2], nil
}

// rawLine reads up to and including the next "\n" into r.buf and returns
// it. The result is only valid until the next read.
func (r *respReader) rawLine() ([]byte, error) {
	start := len(r.buf)
	for {
		chunk, err := r.br.ReadSlice('\n')
		r.buf = append(r.buf, chunk...)
		switch {
		case err == nil:
			return r.buf[start:], nil
		case err == io.EOF && len(r.buf) > 0:
			return nil, io.ErrUnexpectedEOF
		case err != bufio.ErrBufferFull:
			return nil, err
		}
	}
}

// body reads a string of n bytes and its "\r\n" into r.buf and returns the
// string.
func (r *respReader) body(n int) (string, error) {
	start := len(r.buf)
	r.buf = slices.Grow(r.buf, n+2)[:start+n+2]
	if _, err := io.ReadFull(r.br, r.buf[start:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return "", err
	}
	if !bytes.HasSuffix(r.buf, []byte("\r\n")) {
		return "", protocolError("string not terminated by CRLF")
	}
	return string(r.buf[start : start+n]), nil
}

// appendCommand appends a command to b the way clients send it: as an array
// of bulk strings.
func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, "\r\n"...)
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	return b
}

// decode converts v to the Go value that [Server.Do] documents; an error
// reply becomes an [Error].
func (v value) decode() any {
	if v.null {
		return nil
	}
	switch v.kind {
	case ':':
		n, _ := strconv.ParseInt(v.str, 10, 64) // checked by parse
		return n
	case ',':
		f, _ := strconv.ParseFloat(v.str, 64) // checked by parse
		return f
	case '#':
		return v.str == "t"
	case '-', '!':
		return Error(v.str)
	case '=':
		return v.str[4:] // after the format, such as "txt:"
	case '*', '~', '>', '%':
		elems := make([]any, len(v.elems))
		for i, e := range v.elems {
			elems[i] = e.decode()
		}
		return elems
	default: // '+', '$' and '('
		return v.str
	}
}
