package goredisnode_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/goredisnode"
)

func ExampleDial() {
	// exampleURL is a URL such as "redis://10.0.0.7:6379/0".
	node, err := goredisnode.Dial(exampleURL)
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()

	// A lock client runs the redlock scripts on each of its nodes.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	acquire := redlock.Scripts()[0]
	reply, err := node.Eval(ctx, acquire, []string{"example:lock"}, []string{"token-1", "10000"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(acquire.Name(), reply)
	// Output: acquire [1 0]
}
