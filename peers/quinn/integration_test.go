package quinn_test

import (
	"testing"

	"github.com/quicbench/quicbench/cli/clitest"
	"github.com/quicbench/quicbench/peers/quinn"

	_ "modernc.org/sqlite"
)

func TestMain(m *testing.M) { clitest.Main(m) }

// TestRunAcrossTestbed runs quinn as the server and as the client over a
// lossy link under Cubic and NewReno (clitest.NativeAcrossTestbed).
func TestRunAcrossTestbed(t *testing.T) { clitest.NativeAcrossTestbed(t, quinn.Name, 7) }
