// Package nodeurl states the URL forms that an adapter's Dial accepts for a
// node, and reports URLs that do not parse without revealing the passwords
// in them. It is for the authors of adapters, beside package driver.
//
// The Dial function of an adapter (goredisnode.Dial, rueidisnode.Dial)
// takes one Redis server's URL in one of these forms:
//
//	redis://[[user]:password@]host[:port][/db]
//	rediss://[[user]:password@]host[:port][/db]    (TLS)
//	unix://[[user]:password@]/path/to/socket[?db=N]
//
// The port defaults to 6379 and the database to 0; a user name without a
// password, and query parameters that set client options, are accepted as
// the client library's own URL parser accepts them. Characters such as
// "/", "?", "#", "@" and "%" in a user name or password must be
// percent-encoded.
//
// An adapter parses URLs with its client library's parser, and makes the
// errors of that parser safe to show with [Error]. A node's name, and every
// error an adapter returns, must be free of credentials; [Redact] hides
// them in URLs that an adapter shows.
package nodeurl

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Error returns the error an adapter reports when parse, its URL parser,
// rejects rawURL with err. The error reads
//
//	pkg: invalid URL "U": reason
//
// where U is rawURL as [Redact] shows it, and it never repeats the user
// name or password. The reason could quote them: a character that should
// have been percent-encoded can make a parser cut the URL in the wrong
// place and quote a piece of the password as a port or a path. So when
// rawURL has user information, the reason is the error that parse returns
// for U, or, if parse accepts U, that the user information is malformed.
// Otherwise it is err. A reason from parse is wrapped, without the
// [*url.Error] around it, whose text repeats the URL.
func Error(pkg, rawURL string, err error, parse func(string) error) error {
	shown, redacted := Redact(rawURL)
	if redacted {
		if err = parse(shown); err == nil {
			return fmt.Errorf("%s: invalid URL %q: malformed user information "+
				"(characters such as / ? # @ %% in a user name or password must be percent-encoded)", pkg, shown)
		}
	}
	var uerr *url.Error
	if errors.As(err, &uerr) { // its text repeats the whole URL
		err = uerr.Err
	}
	return fmt.Errorf("%s: invalid URL %q: %w", pkg, shown, err)
}

// Redact replaces the user information of s, as [Userinfo] finds it,
// with "xxxxx". It works on strings that are not valid URLs, where the user
// information cannot be told apart reliably; when in doubt it hides too
// much rather than too little.
func Redact(s string) (shown string, redacted bool) {
	start, end, ok := userinfo(s)
	if !ok {
		return s, false
	}
	return s[:start] + "xxxxx" + s[end:], true
}

// Userinfo returns what Redact hides of s: everything before the last "@",
// after the "://" of s's scheme if s begins with one (or after a leading
// "//"). ok is false if s has no "@".
func Userinfo(s string) (string, bool) {
	start, end, ok := userinfo(s)
	return s[start:end], ok
}

// userinfo returns where the user information of s starts and ends.
func userinfo(s string) (start, end int, ok bool) {
	end = strings.LastIndex(s, "@")
	if end < 0 {
		return 0, 0, false
	}
	// Only a "://" after a scheme ends the scheme: in
	// "user:pass@host://x" or "user:pa://ss@host" there is none, and the
	// password is before the "://".
	switch i := strings.Index(s, "://"); {
	case strings.HasPrefix(s, "//"):
		start = len("//")
	case i > 0 && isScheme(s[:i]):
		start = i + len("://")
	}
	return start, end, true
}

// isScheme reports whether s is a URL scheme (RFC 3986): a letter, then
// letters, digits, "+", "-" and ".".
func isScheme(s string) bool {
	for i, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}
