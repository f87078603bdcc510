package drivertest

import (
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/tlsfilestest"
)

// testTLS runs the scripts over rediss:// against a redis-server with a
// TLS port, and checks that the server certificate is verified.
func testTLS[N Node](t *testing.T, a Adapter[N]) {
	srv := tlsfilestest.StartRedis(t, tlsfilestest.RedisConfig{CA: tlsfilestest.NewCA(t, "drivertest CA"), AuthClients: "no"})
	addUser(t, srv.Server)
	hostPort := srv.TLSAddr

	// The client does not trust the server's CA, so verification is
	// skipped here.
	n := dial(t, a, "rediss://"+ACLUser+":"+ACLPassword+"@"+hostPort+"/2?skip_verify=true")
	CheckName(t, n.Name(), hostPort+"/2")
	run(t, n, scriptSteps("lock:tls"))
	if !inDB(t, srv.Server, 2, "lock:tls") {
		t.Error("key is not in database 2")
	}

	// With verification, the certificate of an unknown CA is refused.
	n = dial(t, a, "rediss://"+hostPort)
	_, err := eval(ctxTimeout(t, 5*time.Second), n, acquireStep("lock:tls2", "tok", "1000", nil))
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Eval with an unverifiable certificate: %v, want a certificate error", err)
	}
}
