package nodeurl

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzRedact checks Redact on any string: it changes nothing without an
// "@"; otherwise it keeps what follows the last "@" and hides a span
// before it behind "xxxxx"; and whatever a URL parser takes for user
// information in the input, it finds none but "xxxxx" in the output.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{
		"redis://h:6379", "redis://u:s3cret@h:6379/1", "redis://:s3cret@h",
		"unix://u:p@/run/redis.sock?db=2", "redis://u:p@ss@h", "u:p@h", "@", "://@",
		"rediss://user:p%40ss@h:6380/0?dial_timeout=2s", "redis://u:12345/secret@h:6379",
		"//u:p@h", "//a:pw@b://c@d", "a:p@b://c", "redis://h#u:p@x", "redis://u:p@h?x=y@z",
		"", "redis://", "xxxxx@h", "redis://u:p@[::1]:6379",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		shown, redacted := Redact(s)
		last := strings.LastIndex(s, "@")
		if last < 0 {
			if shown != s || redacted {
				t.Fatalf("Redact(%q) = %q, %v; want it unchanged", s, shown, redacted)
			}
			return
		}
		if !redacted || !strings.HasSuffix(shown, "xxxxx"+s[last:]) || strings.Count(shown, "@") > strings.Count(s, "@") {
			t.Fatalf("Redact(%q) = %q, %v; want the user information up to the last @ hidden", s, shown, redacted)
		}
		if head := strings.TrimSuffix(shown, "xxxxx"+s[last:]); !strings.HasPrefix(s, head) {
			t.Fatalf("Redact(%q) = %q: %q is not what the input begins with", s, shown, head)
		}
		if u, err := url.Parse(s); err == nil && u.User != nil {
			// The input has user information: the output must have none
			// but "xxxxx".
			if su, err := url.Parse(shown); err == nil && su.User != nil {
				if _, has := su.User.Password(); has || su.User.Username() != "xxxxx" {
					t.Fatalf("Redact(%q) = %q, whose user information is %q", s, shown, su.User)
				}
			}
		}
	})
}

// FuzzRedactUserinfo builds URLs from a scheme, a user name, a password
// and a host with any characters in them, and checks that Redact hides the
// user name and the password completely and keeps everything else.
func FuzzRedactUserinfo(f *testing.F) {
	for _, c := range [][4]string{
		{"redis", "u", "s3cret", "h:6379/1"},
		{"rediss", "", "p@ss:w/o?rd#x", "h:6380"},
		{"unix", "u", "p", "/run/redis.sock?db=2"},
		{"redis", "a//b", "c://d", "h"},
		{"", "u", "pa//ss", "h"},
		{"", "a", "b://c", "h"},
		{"", "default", "pw", "redis://h:6379"},
		{"a:b", "u", "p", "h"},
		{"redis", "", "", ""},
	} {
		f.Add(c[0], c[1], c[2], c[3])
	}
	f.Fuzz(func(t *testing.T, scheme, user, pass, host string) {
		if strings.Contains(host, "@") {
			return // then the host is partly user information
		}
		userinfo := user + ":" + pass
		var s, want string
		switch {
		case scheme != "":
			if !scheme3986(scheme) {
				return
			}
			s, want = scheme+"://"+userinfo+"@"+host, scheme+"://xxxxx@"+host
		case strings.HasPrefix(user, "//") || scheme3986(user) && strings.HasPrefix(pass, "//"):
			return // then the user information begins with "//" or a scheme
		default:
			s, want = userinfo+"@"+host, "xxxxx@"+host
		}
		if shown, redacted := Redact(s); shown != want || !redacted {
			t.Fatalf("Redact(%q) = %q, %v; want %q", s, shown, redacted, want)
		}
	})
}

// scheme3986 reports whether s is a URL scheme by RFC 3986's grammar:
// ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
func scheme3986(s string) bool {
	if s == "" || !strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", rune(s[0])) {
		return false
	}
	return strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.") == ""
}
