package drivertest

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/driver/nodeurl"
)

// A URLParser is what [FuzzURL] needs to know of how an adapter parses
// node URLs, beyond its Adapter.
type URLParser struct {
	// Parse parses raw as the adapter's Dial does, without making a
	// client, and returns the name Dial gives the node and the network
	// ("tcp" or "unix") and address that its client would dial.
	Parse func(raw string) (name, network, addr string, err error)

	// LibraryParse is the client library's own URL parser: the adapter
	// may reject more URLs than it, never fewer.
	LibraryParse func(raw string) error
}

// FuzzURL fuzzes the URL parsing of the adapter that a describes; call it
// from a fuzz test (func FuzzURL(f *testing.F)) in the adapter's package.
// It builds URLs from a prefix (normally a scheme and "://"), a user name,
// a password and the rest, and checks that:
//
//   - the adapter rejects every URL that the library rejects;
//   - an error reads pkg: invalid URL "U": ..., where U is the URL
//     as [nodeurl.Redact] shows it;
//   - an error says nothing that depends on what Redact hides: the same
//     URL with other credentials in their place fails with the same
//     error, so no piece of a password can be in it;
//   - the node's name does not depend on the credentials either;
//   - Dial accepts what Parse accepts and names the node the same (tried
//     only for unix sockets and loopback IP addresses, so that no name is
//     looked up and no other host is reached).
func FuzzURL[N Node](f *testing.F, a Adapter[N], p URLParser) {
	for _, c := range [][4]string{
		{"redis://", "", "", "127.0.0.1:6379/0"},
		{"redis://", "u", "s3cret", "127.0.0.1:6380/2"},
		{"rediss://", "", "p@ss", "h:6380"},
		{"unix://", "u", "p", "/run/redis.sock?db=2"},
		{"redis://", "u", "12345/secret", "h:6379"},
		{"redis://", "u", "pass:word", "[::1]:6379/1"},
		{"redis://", "u", "p%zz", "h"},
		{"redis://", "u", "p", "h:port"},
		{"redis://", "u", "p", "h/1/2"},
		{"redis://", "u", "p", "h?dial_timeout=2s&max_retries=3"},
		{"redis://", "u", "p", "h?bogus=1"},
		{"redis://", "u", "p", "h?addr=h2:6379"},
		{"redis://", "u", "p", "h?master_set=m"},
		{"", "user", "hunter2", "redis://127.0.0.1"},
		{"//", "a", "pw", "b://c@d"},
		{"http://", "", "", "h"},
		{"", "", "", ""},
	} {
		f.Add(c[0], c[1], c[2], c[3])
	}
	f.Fuzz(func(t *testing.T, prefix, user, pass, rest string) {
		build := func(user, pass string) string {
			if user == "" && pass == "" {
				return prefix + rest
			}
			return prefix + user + ":" + pass + "@" + rest
		}
		raw := build(user, pass)
		name, network, addr, err := p.Parse(raw)
		if lerr := p.LibraryParse(raw); lerr != nil && err == nil {
			t.Fatalf("%s accepts %q, which its library rejects: %v", a.Pkg, raw, lerr)
		}
		if err != nil {
			shown, _ := nodeurl.Redact(raw)
			if want := fmt.Sprintf("%s: invalid URL %q: ", a.Pkg, shown); !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("the error for %q is %q; want it to begin with %q", raw, err, want)
			}
		}
		if user != "" || pass != "" {
			// The same URL with other credentials.
			other := build("u", "p")
			name2, _, _, err2 := p.Parse(other)
			s1, _ := nodeurl.Redact(raw)
			s2, _ := nodeurl.Redact(other)
			if err != nil && err2 != nil && s1 == s2 && err.Error() != err2.Error() {
				t.Fatalf("the error for %q depends on its credentials:\n%v\nwith u:p instead:\n%v", raw, err, err2)
			}
			if err == nil && err2 == nil && sameButUserinfo(raw, other) && name != name2 {
				t.Fatalf("the name of %q depends on its credentials: %q; with u:p instead: %q", raw, name, name2)
			}
		}
		if err != nil || !local(network, addr) {
			return
		}
		n, err := a.Dial(raw)
		if err != nil {
			t.Fatalf("Parse accepts %q but Dial fails: %v", raw, err)
		}
		defer n.Close()
		if n.Name() != name {
			t.Fatalf("Dial(%q) names the node %q; Parse %q", raw, n.Name(), name)
		}
	})
}

// sameButUserinfo reports whether a URL parser finds user information in
// both a and b and everything else the same.
func sameButUserinfo(a, b string) bool {
	ua, err := url.Parse(a)
	if err != nil || ua.User == nil {
		return false
	}
	ub, err := url.Parse(b)
	if err != nil || ub.User == nil {
		return false
	}
	ua.User, ub.User = nil, nil
	return *ua == *ub
}

// local reports whether a node at addr on network (as for net.Dial) can
// be dialled without a DNS lookup and without reaching another host: a
// unix socket, or a loopback IP address.
func local(network, addr string) bool {
	if network == "unix" {
		return true
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
