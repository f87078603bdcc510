// Package admin is the operators' API of a redlock.Client, kept apart
// from the API of lock users as etcd keeps Maintenance apart from KV.
//
// An operator reads what every node holds for a key (Inspect, and
// InspectSemaphore for a semaphore's slots), what the client knows of
// each node's health (States, and Probe, which asks the nodes afresh),
// and removes a lock whose owner is gone (ForceRelease, and
// ForceReleasePermit for one permit of a semaphore). None of these ever
// shows a holder's token. The redlock command's inspect, status, doctor
// and release subcommands are built on it.
//
//	ops := admin.New(locks) // locks is a *redlock.Client
//	ins, err := ops.Inspect(ctx, "orders")
//	if err == nil && ins.State == admin.KeyHeld {
//		fmt.Println("held by", ins.Owner, "until", ins.Ends)
//	}
package admin
