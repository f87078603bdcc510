package main

import (
	"testing"

	"github.com/quorumlock/redlock/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }
