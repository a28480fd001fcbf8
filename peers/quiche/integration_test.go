package quiche_test

import (
	"testing"

	"github.com/quicbench/quicbench/cli/clitest"
	"github.com/quicbench/quicbench/peers/quiche"

	_ "modernc.org/sqlite"
)

func TestMain(m *testing.M) { clitest.Main(m) }

// TestRunAcrossTestbed runs quiche as the server and as the client over a
// lossy link under Cubic and NewReno (clitest.NativeAcrossTestbed).
func TestRunAcrossTestbed(t *testing.T) { clitest.NativeAcrossTestbed(t, quiche.Name, 9) }
