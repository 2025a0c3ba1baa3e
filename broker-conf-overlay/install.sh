#!/usr/bin/env bash
# Installs the transaction outcome preserver into an unpacked Pulsar 4.0.x server
# distribution:
#   - the plugin jar into lib/ (the broker builds the coordinator store by class name,
#     so it must be on the broker's classpath);
#   - the same jar as txn-preserver.nar into the broker's protocol handler directory (the
#     plugin's entry point is a protocol handler that serves no protocol: the broker starts
#     it with itself, and it costs nothing on the message path), and into the additional
#     servlet directory if one is set elsewhere (the same archive serves the outcome query);
#   - the overlay (txn-preserver.conf beside this script) into conf/broker.conf and
#     conf/standalone.conf, between marker lines.
# Running it again replaces what an earlier run installed: the result is the same. An
# installation of a version that came in as a broker interceptor is replaced too (its
# archive in the interceptors directory is removed; its keys were in the marked block).
#
# Usage: broker-conf-overlay/install.sh PULSAR_HOME   (after: mvn -DskipTests package)
set -euo pipefail

BEGIN_MARK="# >>> txn-preserver overlay (managed by broker-conf-overlay/install.sh; edits here are replaced)"
END_MARK="# <<< txn-preserver overlay"
HANDLER_NAME="txn-preserver"
DEFAULT_PERSIST_COUNT=100

die() { echo "install.sh: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 PULSAR_HOME"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
[ -d "$1" ] || die "$1 is not a directory"
pulsar_home="$(cd "$1" && pwd)"

[ -x "$pulsar_home/bin/pulsar" ] && [ -d "$pulsar_home/lib" ] \
    && [ -f "$pulsar_home/conf/broker.conf" ] && [ -f "$pulsar_home/conf/standalone.conf" ] \
    || die "$pulsar_home is not a Pulsar server distribution (expected bin/pulsar, lib/, conf/broker.conf, conf/standalone.conf)"
ls "$pulsar_home"/lib/org.apache.pulsar-pulsar-broker-*.jar >/dev/null 2>&1 \
    || die "$pulsar_home/lib has no Pulsar broker jar: not a Pulsar server distribution"

shopt -s nullglob
jars=()
for jar in "$repo"/plugin/target/pulsar-txn-preserver-*.jar; do
    case "$jar" in *-sources.jar|*-javadoc.jar|*-tests.jar) continue ;; esac
    jars+=("$jar")
done
[ ${#jars[@]} -eq 1 ] || die "the plugin is not built (expected one plugin/target/pulsar-txn-preserver-*.jar, found ${#jars[@]}): run 'mvn -DskipTests package' in $repo first"
plugin_jar="${jars[0]}"
version="$(basename "$plugin_jar" .jar)"; version="${version#pulsar-txn-preserver-}"

# The value a key has in a config file, ignoring our own block; the last one wins, as in the broker.
effective_value() {
    local key="$1" file="$2"
    awk -v begin="$BEGIN_MARK" -v end="$END_MARK" -v key="$key" '
        $0 == begin { skip = 1; next }
        $0 == end { skip = 0; next }
        skip { next }
        {
            line = $0
            sub(/^[ \t]+/, "", line)
            if (index(line, key "=") == 1 || line ~ ("^" key "[ \t]*=")) {
                sub(/^[^=]*=[ \t]*/, "", line); sub(/[ \t\r]+$/, "", line); value = line; found = 1
            }
        }
        END { if (found) print value }' "$file"
}

# Protocol handler directory: the configured one (relative paths are relative to
# PULSAR_HOME, where bin/pulsar is normally started), written back as an absolute path so
# the broker finds it whatever its working directory.
absolute() {
    case "$1" in /*) echo "$1" ;; *) echo "$pulsar_home/${1#./}" ;; esac
}
handlers_dir="$(effective_value protocolHandlerDirectory "$pulsar_home/conf/broker.conf")"
handlers_dir="$(absolute "${handlers_dir:-./protocols}")"
# Additional servlet directory: the operator's, or the protocol handler directory (one archive).
servlets_dir="$(effective_value additionalServletDirectory "$pulsar_home/conf/broker.conf")"
servlets_dir="$(absolute "${servlets_dir:-$handlers_dir}")"

# lib/: replace any earlier version of the plugin.
rm -f "$pulsar_home"/lib/io.github.txnpreserver-pulsar-txn-preserver-*.jar
cp "$plugin_jar" "$pulsar_home/lib/io.github.txnpreserver-pulsar-txn-preserver-$version.jar"
mkdir -p "$handlers_dir"
cp "$plugin_jar" "$handlers_dir/$HANDLER_NAME.nar"
if [ "$servlets_dir" != "$handlers_dir" ]; then
    mkdir -p "$servlets_dir"
    cp "$plugin_jar" "$servlets_dir/$HANDLER_NAME.nar"
fi

# An earlier version's interceptor archive: loaded by nothing now (its keys were in the
# marked block), removed so that no old code stays beside the new.
interceptors_dir="$(effective_value brokerInterceptorsDirectory "$pulsar_home/conf/broker.conf")"
rm -f "$(absolute "${interceptors_dir:-./interceptors}")/$HANDLER_NAME.nar" "$pulsar_home/interceptors/$HANDLER_NAME.nar"

# A comma-separated list with our name in it once.
with_ours() {
    case ",$1," in
        *",$HANDLER_NAME,"*) echo "$1" ;;
        ",,") echo "$HANDLER_NAME" ;;
        *) echo "$1,$HANDLER_NAME" ;;
    esac
}

install_overlay() {
    local conf="$1" protocols servlets persist_count tmp
    protocols="$(with_ours "$(effective_value messagingProtocols "$conf")")"
    servlets="$(with_ours "$(effective_value additionalServlets "$conf")")"
    persist_count="$(effective_value transactionMetaPersistCount "$conf")"
    tmp="$(mktemp "$conf.XXXXXX")"
    # Drop our earlier block, and make sure the last line ends: the shipped files do not.
    awk -v begin="$BEGIN_MARK" -v end="$END_MARK" '
        $0 == begin { skip = 1; next }
        $0 == end { skip = 0; next }
        !skip { print }' "$conf" > "$tmp"
    {
        echo "$BEGIN_MARK"
        sed -e "s|@PROTOCOL_HANDLER_DIRECTORY@|$handlers_dir|" \
            -e "s|@MESSAGING_PROTOCOLS@|$protocols|" \
            -e "s|@ADDITIONAL_SERVLETS@|$servlets|" \
            -e "s|@ADDITIONAL_SERVLET_DIRECTORY@|$servlets_dir|" \
            -e "s|@PERSIST_COUNT@|${persist_count:-$DEFAULT_PERSIST_COUNT}|" \
            "$here/txn-preserver.conf"
        echo "$END_MARK"
    } >> "$tmp"
    cat "$tmp" > "$conf"
    rm -f "$tmp"
}

install_overlay "$pulsar_home/conf/broker.conf"
install_overlay "$pulsar_home/conf/standalone.conf"

echo "Installed pulsar-txn-preserver $version into $pulsar_home:"
echo "  lib/io.github.txnpreserver-pulsar-txn-preserver-$version.jar"
echo "  $handlers_dir/$HANDLER_NAME.nar"
[ "$servlets_dir" = "$handlers_dir" ] || echo "  $servlets_dir/$HANDLER_NAME.nar"
echo "  overlay in conf/broker.conf and conf/standalone.conf"
