package admin_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
)

// nodes stands for the nodes a program builds with an adapter, such as
// package goredisnode (whose examples run this against redis-server).
var nodes []redlock.Node

// An operator reads who holds a lock, and removes it if its owner is gone.
func Example() {
	locks, err := redlock.New(nodes, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()
	ops := admin.New(locks)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ins, err := ops.Inspect(ctx, "orders")
	if err != nil {
		log.Fatal(err)
	}
	switch ins.State {
	case admin.KeyHeld:
		fmt.Printf("held by %s until %s, fence %d\n", ins.Owner, ins.Ends.Format(time.TimeOnly), ins.Fence)
		if _, err := ops.ForceRelease(ctx, "orders"); err != nil {
			log.Fatal(err)
		}
	case admin.KeyUnknown:
		fmt.Println("too few nodes answered:", ins.Err)
	}
	for _, st := range ops.States() {
		fmt.Println(st.Node, st.Health)
	}
}
