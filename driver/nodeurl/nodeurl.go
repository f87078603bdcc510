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
// or a Redis Cluster's, in the form of go-redis's ParseClusterURL: the
// address of one of its nodes, and the others' in addr parameters, or a
// cluster parameter when one address is given:
//
//	redis://[[user]:password@]host[:port]?addr=host2:port2[&addr=host3:port3...]
//	rediss://[[user]:password@]host[:port]?addr=host2:port2[&addr=...]    (TLS)
//	redis://[[user]:password@]host[:port]?cluster=true
//
// The addresses of a cluster are where the client starts: it learns the
// other nodes, and which of them serves each hash slot, from the cluster.
// The whole cluster is one node of a lock client. A cluster has one
// database, 0, and is reached over TCP. [Cluster] tells the two apart.
//
// The port defaults to 6379 and the database to 0; a user name without a
// password, and query parameters that set client options, are accepted as
// the client library's own URL parser accepts them. Characters such as
// "/", "?", "#", "@" and "%" in a user name or password must be
// percent-encoded.
//
// Beside the URL, an adapter's Dial takes options for TLS: a *tls.Config,
// certificate files that are read again when they are rotated on disk,
// and a server name to verify. They apply to rediss:// URLs, of one server
// or of a cluster alike, and make Dial fail for any other URL, which
// would connect in the clear. Package
// [github.com/quorumlock/redlock/driver/tlsfiles] implements them
// (tlsfiles.Options.Apply), and dials TLS connections whose server's
// refusal of a client certificate reads as such (tlsfiles.Dial).
//
// A URL must begin with one of these schemes: [Scheme] says what is
// expected of one that does not, which a client library's parser would
// report in its own terms. Query parameters are checked by the adapter
// against the ranges that [Int] and [Duration] enforce, so that a value
// the client library would accept but could not use (a negative pool
// size, a pool of a hundred billion connections) is refused at Dial.
//
// An adapter parses URLs with its client library's parser, and makes the
// errors of that parser safe to show with [Error]; they wrap
// redlock.ErrInvalid. A node's name, and every
// error an adapter returns, must be free of credentials; [Redact] hides
// them in URLs that an adapter shows.
package nodeurl

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/redlock"
)

// Expected says what a node URL looks like, for error messages.
const Expected = "a node URL starts with redis://, rediss:// or unix://, as in redis://127.0.0.1:6379"

// Scheme returns nil if rawURL begins with redis://, rediss:// or unix://
// (the scheme in any case), and otherwise an error that says what is
// expected, for [Error]. The error does not repeat rawURL.
func Scheme(rawURL string) error {
	scheme, _, ok := strings.Cut(rawURL, "://")
	switch {
	case strings.TrimSpace(rawURL) == "":
		return errors.New("the URL is empty; " + Expected)
	case !ok || !isScheme(scheme):
		return errors.New("no scheme; " + Expected)
	}
	switch strings.ToLower(scheme) {
	case "redis", "rediss", "unix":
		return nil
	}
	return fmt.Errorf("scheme %s:// is not one of a node's; %s", strings.ToLower(scheme), Expected)
}

// Addrs returns nil if every address in rawURL, a redis:// or rediss://
// URL, is one a client could dial: its host and those of its addr
// parameters, each with a port from 1 to 65535 if it has one. Client
// libraries split an address without checking its parts, so a port
// such as 99999 would only fail when dialled, which a lock client takes
// for an outage. A URL or query that does not parse, and a unix:// URL,
// is left for the client library's parser to judge. The error names the
// address and what is wrong with it; it does not repeat the user
// information.
func Addrs(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil
	}
	if err := addr(u.Host, true); err != nil {
		return err
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil
	}
	for _, a := range q["addr"] {
		if err := addr(a, false); err != nil {
			return fmt.Errorf("addr=%q: %w", a, err)
		}
	}
	return nil
}

// addr checks one address, host[:port]; the host may be empty (the client
// library's default, localhost) if emptyHost is true.
func addr(hostport string, emptyHost bool) error {
	host, port := hostport, ""
	if i := strings.LastIndexByte(hostport, ':'); i >= 0 && !strings.Contains(hostport[i:], "]") {
		host, port = hostport[:i], hostport[i+1:]
	}
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	switch {
	case host == "" && !emptyHost:
		return errors.New("no host")
	case strings.ContainsFunc(host, func(r rune) bool { return r <= ' ' || r == 0x7f || strings.ContainsRune("/?#@[]", r) }):
		return fmt.Errorf("host %q: not a host name or an IP address", host)
	case port == "":
		return nil
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q: want a number from 1 to 65535", port)
	}
	return nil
}

// MaxConns is the largest number of connections, or of connection
// attempts at once, that a query parameter may ask for: far above what a
// lock node needs, and small enough that a pool of this size costs
// little before it is used.
const MaxConns = 10000

// MaxTimeout is the longest duration a query parameter may set.
const MaxTimeout = 24 * time.Hour

// Int parses the value v of the query parameter name as a decimal integer
// from lo to hi. Its error names the parameter and the range.
func Int(name, v string, lo, hi int) (int, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < int64(lo) || n > int64(hi) {
		return 0, fmt.Errorf("%s=%q: want an integer from %d to %d", name, v, lo, hi)
	}
	return int(n), nil
}

// Duration parses the value v of the query parameter name as a duration
// such as "500ms" or "2s", or a whole number of seconds, up to
// MaxTimeout. It refuses a negative duration, and zero unless zero is
// true. Its error names the parameter and the range.
func Duration(name, v string, zero bool) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		var n int
		if n, err = strconv.Atoi(strings.TrimSpace(v)); err == nil {
			d = time.Duration(n) * time.Second
			if n > int(MaxTimeout/time.Second) {
				d = MaxTimeout + 1
			}
		}
	}
	if err != nil || d < 0 || d > MaxTimeout || d == 0 && !zero {
		lo := "0"
		if !zero {
			lo = "more than 0"
		}
		return 0, fmt.Errorf("%s=%q: want a duration such as 2s or 500ms, from %s to %v", name, v, lo, MaxTimeout)
	}
	return d, nil
}

// Bool parses the value v of the query parameter name as
// [strconv.ParseBool] does. Its error names the parameter.
func Bool(name, v string) (bool, error) {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return false, fmt.Errorf("%s=%q: want true or false", name, v)
	}
	return b, nil
}

// Query returns the query parameters of rawURL, or nil if it has none or
// they do not parse (which the client library then reports).
func Query(rawURL string) url.Values {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil
	}
	return q
}

// Cluster reports whether rawURL names a Redis Cluster: whether it has an
// addr parameter, or a cluster parameter that is true (as
// [strconv.ParseBool] reads it). It returns rawURL without the cluster
// parameter, which no client library knows, for the library's cluster URL
// parser. It fails for a cluster URL whose scheme is not redis or rediss,
// that selects a database other than 0, or whose cluster parameter is not
// a boolean or is false beside addr parameters.
//
// A URL that does not parse, or whose query does not, is not a cluster's:
// Cluster returns it unchanged for the library to report what is wrong.
// Its errors never repeat the user information.
func Cluster(rawURL string) (cluster bool, rest string, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false, rawURL, nil
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return false, rawURL, nil
	}
	cluster = q.Has("addr")
	if q.Has("cluster") {
		v, err := strconv.ParseBool(q.Get("cluster"))
		switch {
		case err != nil:
			return false, "", fmt.Errorf("cluster=%q: want true or false", q.Get("cluster"))
		case !v && cluster:
			return false, "", errors.New("cluster=false with addr parameters, which name a cluster's nodes")
		}
		cluster = v
	}
	if !cluster {
		return false, rawURL, nil
	}
	switch {
	case u.Scheme != "redis" && u.Scheme != "rediss":
		return false, "", fmt.Errorf("a cluster is reached over TCP, with redis:// or rediss://, not %s://", u.Scheme)
	case u.Path != "" && u.Path != "/" && u.Path != "/0":
		return false, "", fmt.Errorf("database %q: a cluster has only database 0", strings.TrimPrefix(u.Path, "/"))
	}
	// Drop the cluster parameter from the query as written, which keeps
	// the rest of rawURL as it is.
	var kept []string
	for _, pair := range strings.Split(u.RawQuery, "&") {
		k, _, _ := strings.Cut(pair, "=")
		if k, err := url.QueryUnescape(k); err == nil && k == "cluster" {
			continue
		}
		kept = append(kept, pair)
	}
	i := strings.IndexByte(rawURL, '?')
	rest = rawURL[:i]
	if len(kept) > 0 {
		rest += "?" + strings.Join(kept, "&")
	}
	return true, rest + rawURL[i+1+len(u.RawQuery):], nil
}

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
			return &invalidError{fmt.Errorf("%s: invalid URL %q: malformed user information "+
				"(characters such as / ? # @ %% , and spaces in a user name or password must be percent-encoded)", pkg, shown)}
		}
	}
	var uerr *url.Error
	if errors.As(err, &uerr) { // its text repeats the whole URL
		err = uerr.Err
	}
	return &invalidError{fmt.Errorf("%s: invalid URL %q: %w", pkg, shown, err)}
}

// An invalidError is an error of Error: it wraps its reason and
// redlock.ErrInvalid.
type invalidError struct{ err error }

func (e *invalidError) Error() string   { return e.err.Error() }
func (e *invalidError) Unwrap() []error { return []error{e.err, redlock.ErrInvalid} }

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
