package main

import (
	"testing"

	"github.com/quorumlock/redlock/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }
