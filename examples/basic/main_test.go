package main

import (
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }
