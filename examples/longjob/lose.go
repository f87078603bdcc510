package main

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// deleteOnMajority returns a function that deletes a key on a majority of
// the nodes at urls, the first N/2+1 of them, with clients of its own: to
// the lock's owner, the key is gone as if those nodes had failed over to
// replicas that never saw it, or had been flushed.
func deleteOnMajority(urls []string) func(ctx context.Context, key string) error {
	return func(ctx context.Context, key string) error {
		for _, u := range urls[:len(urls)/2+1] {
			if err := deleteKey(ctx, u, key); err != nil {
				return err
			}
		}
		return nil
	}
}

// deleteKey deletes key on the node at rawURL.
func deleteKey(ctx context.Context, rawURL, key string) error {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return fmt.Errorf("node URL: %w", err)
	}
	c := redis.NewClient(opt)
	delErr := c.Del(ctx, key).Err()
	closeErr := c.Close()
	switch {
	case delErr != nil:
		return fmt.Errorf("deleting %q on %s: %w", key, opt.Addr, delErr)
	case closeErr != nil:
		return fmt.Errorf("closing the client of %s: %w", opt.Addr, closeErr)
	}
	return nil
}
