// Command quicbench measures when and why QUIC beats TCP over an emulated
// network. See the README for a quick start.
package main

import (
	"os"

	"github.com/quicbench/quicbench/cli"
)

func main() {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	os.Exit(cli.Main(&cli.Env{
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Args:   os.Args[1:],
		Getenv: os.Getenv,
		Exe:    exe,
	}))
}
