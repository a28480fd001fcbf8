// Package all links the code of every built-in stack of the registry
// (package peers) into a program: importing it for its side effects
// registers each stack's server launcher, client and checks. quicbench's
// command line imports it; a program that needs only some stacks imports
// their packages instead.
package all

import (
	_ "github.com/quicbench/quicbench/peers/aioquic"
	_ "github.com/quicbench/quicbench/peers/caddy"
	_ "github.com/quicbench/quicbench/peers/chromium"
	_ "github.com/quicbench/quicbench/peers/contract"
	_ "github.com/quicbench/quicbench/peers/firefox"
	_ "github.com/quicbench/quicbench/peers/lighthouse"
	_ "github.com/quicbench/quicbench/peers/nginx"
	_ "github.com/quicbench/quicbench/peers/ngtcp2"
	_ "github.com/quicbench/quicbench/peers/quiche"
	_ "github.com/quicbench/quicbench/peers/quinn"
)
