#!/bin/sh
# A contract stack that supports no test case: it exits 127, as the
# quic-interop-runner's endpoints do for an unknown TESTCASE.
exit 127
