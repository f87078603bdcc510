package rueidisnode_test

import (
	"log"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/driver/tlsfiles"
	"github.com/quorumlock/redlock/rueidisnode"
)

// Mutual TLS with a private certificate authority, as Redis runs it by
// default (tls-auth-clients yes): the server's certificate is verified
// against ca.crt, and the client presents client.crt. An agent such as
// cert-manager may replace the files at any time: new connections read
// them again, and locks held through the open ones are not disturbed.
func ExampleWithTLSFiles() {
	files := tlsfiles.Files{
		CACert: "/etc/redlock/tls/ca.crt",
		Cert:   "/etc/redlock/tls/client.crt",
		Key:    "/etc/redlock/tls/client.key",
	}
	var nodes []redlock.Node
	for _, url := range []string{"rediss://10.0.0.1:6380", "rediss://10.0.0.2:6380", "rediss://10.0.0.3:6380"} {
		node, err := rueidisnode.Dial(url, rueidisnode.WithTLSFiles(files))
		if err != nil {
			log.Fatal(err) // a file is missing or broken
		}
		defer node.Close()
		nodes = append(nodes, node)
	}
	locks, err := redlock.New(nodes, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()
	// A certificate that fails verification, or a client certificate that
	// a server asks for or refuses, makes Lock return ErrRefused at once.
}
