package rueidisnode_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/rueidisnode"
)

func Example() {
	// exampleURLs holds the URLs of three independent Redis masters, such
	// as "redis://10.0.0.1:6379", "redis://10.0.0.2:6379" and
	// "redis://10.0.0.3:6379".
	var nodes []redlock.Node
	for _, url := range exampleURLs {
		node, err := rueidisnode.Dial(url)
		if err != nil {
			log.Fatal(err)
		}
		defer node.Close()
		nodes = append(nodes, node)
	}
	locks, err := redlock.New(nodes, nil)
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	l, err := locks.Lock(ctx, "example:invoice:42", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held", l.Key())

	// While it is held, nobody else obtains it.
	if _, err := locks.TryLock(ctx, "example:invoice:42", 10*time.Second); errors.Is(err, redlock.ErrTaken) {
		fmt.Println("a second owner is refused")
	}

	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released")
	// Output:
	// held example:invoice:42
	// a second owner is refused
	// released
}
