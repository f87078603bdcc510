// Package wire is the protocol between a redlock.Client and its nodes: the
// Lua scripts the client runs, the keys and arguments of each call, the
// decoding of their replies, the names of the records and channels the
// scripts use besides the lock keys, and the Redis Cluster slot math that
// keeps every call's keys in one hash slot.
//
// Users of locks never need it. It is for the redlock command, the tests
// of adapters (package drivertest) and the project's fault suite and
// benchmarks, which look at what the scripts leave on a node. It follows
// the version of the redlock module.
package wire
