#!/bin/sh
# A test stack's command (never run by the plan tests): the endpoint
# contract's entry point.
exit 127
