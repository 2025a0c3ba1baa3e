#!/usr/bin/env bash
# Builds the plugin, fetches the Pulsar 4.0.8 server distribution through Maven, installs
# the plugin with broker-conf-overlay/install.sh, starts a standalone broker on loopback and
# shows, through the stock Java client, that retried commits and aborts get the real
# outcome, also after a kill -9 of the broker. Ctrl-C stops everything it started.
#   ./demo.sh                 run the demo, then stop the broker
#   ./demo.sh --keep-running  leave the broker up after the demo, until Ctrl-C
set -euo pipefail
cd "$(dirname "$0")"
echo "Building the plugin and fetching the Pulsar distribution (first run: a few minutes)..."
# One reactor build: the demo finds the plugin module's jar in the build itself, so nothing
# needs to be installed in the local Maven repository beforehand.
exec mvn -B -q -DskipTests package exec:java -pl integration-tests -am -Dexec.args="$*"
