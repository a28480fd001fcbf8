#!/bin/sh
# A stack for quicbench's tests of the endpoint contract: ngtcp2's example
# HTTP/3 programs (Debian's gtlsserver and gtlsclient) behind the
# quic-interop-runner's run_endpoint.sh interface, as the runner's own
# images wrap an implementation. quicbench knows nothing of it but this
# file: ROLE, TESTCASE, REQUESTS, PORT, QLOGDIR and the directories /www,
# /downloads, /certs and /logs.
PATH=$PATH:/usr/sbin
case "$TESTCASE" in
http3) ;;
*) exit 127 ;; # the contract's "test case not supported"
esac
windows="--max-data=15M --max-window=15M --max-stream-data-bidi-local=6M --max-stream-data-bidi-remote=6M --max-stream-window=6M --max-streams-bidi=1000"
case "$ROLE" in
server)
	# shellcheck disable=SC2086
	exec gtlsserver -q -d /www --qlog-dir "$QLOGDIR" $windows '*' "${PORT:-443}" /certs/priv.key /certs/cert.pem
	;;
client)
	# every request goes to one server: its host and port from the first
	first=${REQUESTS%% *}
	hostport=${first#https://}
	hostport=${hostport%%/*}
	# shellcheck disable=SC2086
	exec gtlsclient -q --exit-on-all-streams-close --download /downloads --qlog-dir "$QLOGDIR" $windows \
		"${hostport%:*}" "${hostport##*:}" $REQUESTS
	;;
esac
echo "run_endpoint.sh: unknown ROLE $ROLE" >&2
exit 1
