package main

import (
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// A node that nothing listens on: usage errors must be found before any
// connection is needed.
const deadNode = "--nodes=redis://127.0.0.1:1"

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, ""}, // prints help, exits 0: checked below
		{[]string{"no-such-command"}, `unknown command "no-such-command"`},
		{[]string{"--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"run"}, "missing KEY and COMMAND"},
		{[]string{"run", "k"}, "missing COMMAND"},
		{[]string{"run", "k", "--"}, "missing COMMAND"},
		{[]string{"run", "--", "echo", "hi"}, `missing KEY before "--"`},
		{[]string{"run", "--ttl", "1s", "--", "echo", "hi"}, `missing KEY before "--"`},
		{[]string{"elect", "--", "echo", "hi"}, `missing KEY before "--"`},
		{[]string{"run", "--ttl", "2562047h", deadNode, "k", "--", "true"}, "above the maximum TTL, 1h0m0s"},
		{[]string{"run", "--ttl", "1h0m1s", deadNode, "k", "--", "true"}, "above the maximum TTL"},
		{[]string{"elect", "--ttl", "2h", deadNode, "k", "--", "true"}, "above the maximum TTL"},
		{[]string{"run", "--quarantine", "2h", deadNode, "k", "--", "true"}, "--quarantine 2h0m0s is above the maximum TTL"},
		{[]string{"doctor", "--quarantine", "2h", deadNode}, "--quarantine 2h0m0s is above the maximum TTL"},
		{[]string{"demo", "--ttl", "2h"}, "above the maximum TTL"},
		{[]string{"run", "--ttl", "0s", deadNode, "k", "--", "true"}, "--ttl 0s must be positive"},
		{[]string{"run", "--ttl", "1ms", deadNode, "k", "--", "true"}, "TTL 1ms"},
		{[]string{"run", "--ttl", "soon", "k", "--", "true"}, `invalid argument "soon" for "--ttl"`},
		{[]string{"run", "--wait", "-1s", deadNode, "k", "--", "true"}, "--wait -1s is negative"},
		{[]string{"run", "--kill-grace", "-1s", deadNode, "k", "--", "true"}, "--kill-grace -1s is negative"},
		{[]string{"run", "--nodes", "ftp://127.0.0.1:1", "k", "--", "true"}, `node URL 1 of --nodes, "ftp://127.0.0.1:1", is not valid: scheme ftp://`},
		{[]string{"run", "--nodes", "127.0.0.1:6379", "k", "--", "true"}, "a node URL starts with redis://, rediss:// or unix://, as in redis://127.0.0.1:6379"},
		{[]string{"run", "--nodes", "redis://h:1?pool_size=-5", "k", "--", "true"}, `pool_size="-5": want an integer from 0 to 10000`},
		{[]string{"run", "--nodes", "redis://h:1", "--nodes-file", "/dev/null", "k", "--", "true"}, "--nodes and --nodes-file both name the nodes"},
		{[]string{"run", "--nodes-file", "/dev/null", "k", "--", "true"}, "--nodes-file: read /dev/null: not a regular file"},
		{[]string{"run", "--nodes", " , ", "k", "--", "true"}, "no node URLs in --nodes"},
		{[]string{"run", "--nodes", "redis://127.0.0.1:1,redis://127.0.0.1:1", "k", "--", "true"}, "given twice"},
		{[]string{"run", "--quarantine", "1s", "--no-quarantine", deadNode, "k", "--", "true"}, "contradict"},
		{[]string{"run", deadNode, "redlock:node", "--", "true"}, "reserved"},
		{[]string{"status"}, "exactly one KEY"},
		{[]string{"status", "a", "b"}, "exactly one KEY"},
		{[]string{"status", deadNode, "redlock:fence:x"}, "reserved"},
		{[]string{"status", "--timeout", "0s", deadNode, "k"}, "--timeout 0s must be positive"},
		{[]string{"inspect"}, "exactly one KEY"},
		{[]string{"inspect", deadNode, ""}, "empty"},
		{[]string{"inspect", deadNode, "redlock:node:x"}, "reserved"},
		{[]string{"inspect", deadNode, "redlock:term:x"}, "reserved"},
		{[]string{"inspect", deadNode, "redlock:permit:0:x"}, "reserved"},
		{[]string{"inspect", "--permits", "2", deadNode, "redlock:term:x"}, "reserved"},
		{[]string{"release", deadNode, "k"}, "only with --force"},
		{[]string{"release", "--force", deadNode, "k"}, "give --yes"},
		{[]string{"release", "--force", "--yes"}, "exactly one KEY"},
		{[]string{"release", "--force", "--yes", deadNode, "redlock:fence:k"}, "reserved"},
		{[]string{"release", "--force", "--yes", deadNode, "redlock:term:x"}, "reserved"},
		{[]string{"release", "--force", "--yes", deadNode, "redlock:permit:0:x"}, "reserved"},
		{[]string{"release", "--force", deadNode, "redlock:term:x"}, "reserved"}, // before asking for --yes
		{[]string{"release", "--force", "--yes", "--permits", "2", "--slot", "0", deadNode, "redlock:permit:0:x"}, "reserved"},
		{[]string{"run", "--owner", strings.Repeat("x", 65), deadNode, "k", "--", "true"}, "--owner is 65 bytes long"},
		{[]string{"run", "--owner", "a\tb", deadNode, "k", "--", "true"}, "control characters"},
		{[]string{"run", "--permits", "0", deadNode, "k", "--", "true"}, "--permits 0: a semaphore has from 1 to 128 permits"},
		{[]string{"run", "--permits", "129", deadNode, "k", "--", "true"}, "--permits 129"},
		{[]string{"run", "--permits", "two", "k", "--", "true"}, `invalid argument "two" for "--permits"`},
		{[]string{"run", "--permits", "2", deadNode, "redlock:node", "--", "true"}, "reserved"},
		{[]string{"elect"}, "missing KEY and COMMAND"},
		{[]string{"elect", "k", "--"}, "missing COMMAND: redlock elect"},
		{[]string{"elect", "--ttl", "0s", deadNode, "k", "--", "true"}, "--ttl 0s must be positive"},
		{[]string{"elect", "--value", strings.Repeat("x", 65), deadNode, "k", "--", "true"}, "--value is 65 bytes long"},
		{[]string{"elect", "--value", "a\nb", deadNode, "k", "--", "true"}, "--value"},
		{[]string{"elect", deadNode, "redlock:fence:k", "--", "true"}, "reserved"},
		{[]string{"leader"}, "exactly one KEY"},
		{[]string{"leader", deadNode, "redlock:node"}, "reserved"},
		{[]string{"leader", "--timeout", "0s", deadNode, "k"}, "--timeout 0s must be positive"},
		{[]string{"doctor", "extra"}, "doctor takes no arguments"},
		{[]string{"demo", "--workers", "0"}, "at least one worker"},
		{[]string{"demo", "--ttl", "1ms"}, "--ttl"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			r := run(t, tc.args...)
			if len(tc.args) == 0 {
				expect(t, r, 0, "Usage:", "Available Commands:")
				return
			}
			expect(t, r, exitUsage, "redlock: ", tc.want, "--help' for usage")
		})
	}
}

func TestVersionHelpAndCompletion(t *testing.T) {
	t.Parallel()
	r := run(t, "--version")
	expect(t, r, 0, "redlock ")
	if strings.Count(strings.TrimSpace(r.stdout), "\n") != 0 {
		t.Fatalf("--version prints more than a line:\n%s", r)
	}
	for _, cmd := range []string{"", "run", "elect", "leader", "inspect", "status", "release", "doctor", "demo"} {
		args := strings.Fields(cmd + " --help")
		r := run(t, args...)
		expect(t, r, 0, "Usage:", "Examples:")
	}
	expect(t, fullHelp(t, "run"), 0, "REDLOCK_FENCE", "REDLOCK_LOCK_ID", "--owner", "--kill-grace", "--no-quarantine", "75", "76", "69", "77", "78", "WRONGPASS", "READONLY")
	expect(t, fullHelp(t, "run"), 0, "--permits", "REDLOCK_SLOT", "REDLOCK_PERMITS", "--permits 4")
	expect(t, fullHelp(t, "elect"), 0, "--value", "REDLOCK_TERM", "REDLOCK_VALUE", "REDLOCK_FENCE", "REDLOCK_LOCK_ID", "--kill-grace", "75", "76", "69", "77", "78", "redlock leader")
	expect(t, fullHelp(t, "leader"), 0, "--json", "--quiet", "value", "term", "nobody leads", "69", "77", "78")
	// What redlock --help said of TLS and of the node URLs is in the topics.
	expect(t, run(t, "help", "tls"), 0, "--cacert FILE", "$REDLOCK_CACERT", "--cacertdir DIR", "$REDLOCK_CACERTDIR", "--cert FILE", "$REDLOCK_CERT",
		"--key FILE", "$REDLOCK_CERT_KEY", "--sni NAME", "$REDLOCK_SNI", "--insecure", "$REDLOCK_INSECURE", "rotated")
	expect(t, fullHelp(t, "nodes"), 0, "?cluster=true", "--nodes-file", "REDLOCK_NODES_FILE", "ps", "%2C", "%20", "starts with redis://")
	expect(t, run(t, "help", "environment"), 0, "REDLOCK_NODES_FILE", "do not pass on", "REDLOCK_NODES, REDLOCK_NODES_FILE, REDLOCK_CERT, REDLOCK_CERT_KEY")
	expect(t, fullHelp(t, "doctor"), 0, "TLS version", "a warning under 14", "promoted", "CLUSTER INFO", "--cacert")
	expect(t, fullHelp(t, "inspect"), 0, "HELD", "FREE", "SPLIT", "UNKNOWN", "REDLOCK_LOCK_ID", "--json", "69", "77", "78")
	expect(t, fullHelp(t, "release"), 0, "--force", "--yes", "redlock run", "fence", "69", "77", "78")
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		r := run(t, "completion", shell)
		expect(t, r, 0, "redlock")
		if len(r.stdout) < 200 {
			t.Fatalf("completion %s is too short:\n%s", shell, r)
		}
	}
	// The completion script's helper completes subcommands and flags.
	r = run(t, "__complete", "st")
	expect(t, r, 0, "status")
	r = run(t, "__complete", "run", "--k")
	expect(t, r, 0, "--kill-grace")
	expect(t, run(t, "__complete", "in"), 0, "inspect")
	expect(t, run(t, "__complete", "rel"), 0, "release")
	expect(t, run(t, "__complete", "release", "--"), 0, "--force", "--yes", "--json")
	expect(t, run(t, "__complete", "run", "--o"), 0, "--owner")
	expect(t, run(t, "__complete", "el"), 0, "elect")
	expect(t, run(t, "__complete", "le"), 0, "leader")
	expect(t, run(t, "__complete", "run", "--p"), 0, "--permits")
	expect(t, run(t, "__complete", "elect", "--v"), 0, "--value")
	expect(t, run(t, "__complete", "elect", "--k"), 0, "--kill-grace")
	expect(t, run(t, "__complete", "leader", "--"), 0, "--json", "--quiet", "--timeout")
	expect(t, run(t, "__complete", "elect", ""), 0, "NoFileComp") // the election's key
	r = run(t, "__complete", "inspect", "")
	expect(t, r, 0, "NoFileComp") // a lock key: no file names
}

// A password in a node URL never appears in any output: not from run,
// status or doctor, not in errors, not from REDLOCK_NODES.
func TestPasswordsNeverPrinted(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-Pa55"
	srv := redistest.Start(t, redistest.Config{})
	srv.MustDo(t, "ACL", "SETUSER", "alice", "on", ">"+secret, "~*", "&*", "+@all")
	good := "redis://alice:" + secret + "@" + srv.Addr()
	wrong := "redis://alice:" + secret + "x@" + srv.Addr()
	bad := "redis://alice:" + secret + "@" + srv.Addr() + ":notaport"

	var all []result
	check := func(code int, r result, want ...string) {
		t.Helper()
		expect(t, r, code, want...)
		all = append(all, r)
	}
	check(0, run(t, "run", "--no-quarantine", "--nodes", good, "pw", "--", "echo", "ran"), "ran")
	// The run recorded its TTL on the fresh server, which is therefore in
	// quarantine for a client that has it on.
	check(0, run(t, "status", "--no-quarantine", "--nodes", good, "pw"), "FREE")
	check(0, run(t, "status", "--json", "--nodes", good, "pw"), `"state": "free"`, "quarantined")
	check(0, run(t, "doctor", "--no-quarantine", "--nodes", good), "HEALTHY", "redis://xxxxx@")
	check(0, run(t, "doctor", "--no-quarantine", "--json", "--nodes", good), `"verdict": "healthy"`)
	check(0, runIn(t, t.TempDir(), []string{"REDLOCK_NODES=" + good}, "doctor", "--no-quarantine"), "HEALTHY")
	check(exitNoPerm, run(t, "run", "--no-quarantine", "--wait", "0s", "--nodes", wrong, "pw", "--", "true"), "WRONGPASS")
	check(exitNoPerm, run(t, "run", "--no-quarantine", "--nodes", wrong, "pw", "--", "true"), "WRONGPASS")
	check(0, run(t, "inspect", "--nodes", good, "pw"), "FREE")
	check(0, run(t, "release", "--force", "--yes", "--nodes", good, "pw"), "nothing to remove")
	check(exitNoPerm, run(t, "status", "--nodes", wrong, "pw"), "WRONGPASS", "user name or password")
	check(exitNoPerm, run(t, "inspect", "--json", "--nodes", wrong, "pw"), "WRONGPASS")
	check(exitNoPerm, run(t, "release", "--force", "--yes", "--nodes", wrong, "pw"), "WRONGPASS", "not released")
	check(exitNoQuorum, run(t, "doctor", "--nodes", wrong), "WRONGPASS")
	check(exitUsage, run(t, "run", "--nodes", bad, "pw", "--", "true"), "node URL 1 of --nodes", "is not valid")
	check(exitUsage, run(t, "status", "--nodes", bad, "pw"), "is not valid")
	check(exitUsage, run(t, "doctor", "--nodes", bad), "is not valid")
	check(0, run(t, "run", "--help", "--nodes", good), "Usage:")
	check(exitUsage, run(t, "run", "--ttl", good, "pw", "--", "true"), "invalid argument")
	check(exitUsage, run(t, "status", "--nodes", good, "--timeout="+bad, "pw"), "invalid argument")
	for _, r := range all {
		if strings.Contains(r.stdout+r.stderr, secret) || strings.Contains(r.stdout+r.stderr, "s3cr3t") {
			t.Fatalf("the password was printed:\n%s", r)
		}
	}
}
