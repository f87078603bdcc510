package gocronlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/gocronlock"
	"github.com/quorumlock/redlock/goredisnode"
)

// dial returns a Client over the example's nodes; close it, then the nodes,
// with the returned function.
func dial() (*redlock.Client, func()) {
	// exampleURLs holds the URLs of three independent Redis masters.
	var nodes []redlock.Node
	var conns []*goredisnode.Node
	for _, url := range exampleURLs {
		node, err := goredisnode.Dial(url)
		if err != nil {
			log.Fatal(err)
		}
		nodes, conns = append(nodes, node), append(conns, node)
	}
	locks, err := redlock.New(nodes, &redlock.Options{
		// The example's servers have just started and nothing was locked
		// on them before; real nodes need no such option.
		DisableQuarantine: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	return locks, func() {
		locks.Close()
		for _, n := range conns {
			n.Close()
		}
	}
}

// Two instances of a program, as two processes would be, each with its
// own Client and scheduler, schedule the same job at the same moment: one
// runs it, the other skips it.
func ExampleLocker() {
	var runs atomic.Int32
	over := make(chan struct{}, 2) // one per instance, when it has run or skipped the job
	at := time.Now().Add(1500 * time.Millisecond)

	for range 2 {
		locks, closeLocks := dial()
		defer closeLocks()
		locker, err := gocronlock.NewLocker(locks, &gocronlock.LockerOptions{
			// Longer than the job can run.
			TTL: time.Minute,
			// More than the instances' ticks can differ, and less than the
			// job's interval. Instances on different machines need more
			// than these, in one process.
			HoldAtLeast: time.Second,
		})
		if err != nil {
			log.Fatal(err)
		}
		s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
		if err != nil {
			log.Fatal(err)
		}
		defer s.Shutdown()
		_, err = s.NewJob(
			gocron.OneTimeJob(gocron.OneTimeJobStartDateTime(at)),
			gocron.NewTask(func() {
				runs.Add(1)
				over <- struct{}{}
			}),
			gocron.WithName("nightly-report"), // the same on every instance
			gocron.WithEventListeners(gocron.AfterLockError(func(_ uuid.UUID, job string, err error) {
				if errors.Is(err, redlock.ErrTaken) {
					fmt.Println(job, "skipped: another instance runs it")
				}
				over <- struct{}{}
			})),
		)
		if err != nil {
			log.Fatal(err)
		}
		s.Start()
	}

	<-over
	<-over
	fmt.Println("runs:", runs.Load())
	// Output:
	// nightly-report skipped: another instance runs it
	// runs: 1
}

// An instance campaigns to lead; its scheduler runs jobs while it leads.
func ExampleElector() {
	locks, closeLocks := dial()
	defer closeLocks()
	elector, err := gocronlock.NewElector(locks, "example:scheduler-leader", nil)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	campaign := make(chan error, 1)
	go func() { campaign <- elector.Run(ctx) }()

	term, err := elector.Elected(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leading")

	s, err := gocron.NewScheduler(gocron.WithDistributedElector(elector))
	if err != nil {
		log.Fatal(err)
	}
	ran := make(chan struct{})
	_, err = s.NewJob(
		gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
		gocron.NewTask(func() { close(ran) }),
	)
	if err != nil {
		log.Fatal(err)
	}
	s.Start()
	<-ran
	fmt.Println("the job ran on the leader")
	if err := s.Shutdown(); err != nil {
		log.Fatal(err)
	}

	stop() // Run gives the leadership up and returns
	<-campaign
	<-term.Context().Done()
	fmt.Println("term over:", context.Cause(term.Context()))
	// Output:
	// leading
	// the job ran on the leader
	// term over: gocronlock: leadership given up: context canceled
}
