#!/usr/bin/env bash
# Installs the transaction outcome preserver into an unpacked Pulsar server distribution:
#   - the plugin jar into lib/ (the broker builds the coordinator store by class name, so it
#     must be on the broker's classpath);
#   - the same jar as txn-preserver.nar into the broker's protocol handler directory (the
#     plugin's entry point is a protocol handler that serves no protocol: the broker starts it
#     with itself, and it costs nothing on the message path), and into the additional servlet
#     directory if that is another one (the same archive serves the outcome query);
#   - the overlay (txn-preserver.conf beside this script) into conf/broker.conf and
#     conf/standalone.conf, between marker lines.
#
# It never overrides a value the operator set. In its block it writes the two keys that
# switch the plugin on, txn-preserver added to the protocol and servlet lists already set,
# the directories only where none is set, and of the tuning keys only those set nowhere else
# in the file (transactionMetaPersistCount=100, the others as commented defaults). A key set
# outside the block is left there; a value set inside the block (an edited or uncommented
# line) is carried into the new block. Running it again (the upgrade step) gives the same
# result and keeps every value set. An installation of a version that came in as a broker
# interceptor is replaced too (its archive in the interceptors directory is removed).
#
# Usage: install.sh PULSAR_HOME
#   from a release bundle (the jar beside this script), or from a source tree after
#   `mvn -DskipTests package` (the jar in plugin/target/).
set -euo pipefail

BEGIN_MARK="# >>> txn-preserver overlay (managed by install.sh: values set here are kept when it runs again)"
OLD_BEGIN_MARK="# >>> txn-preserver overlay (managed by broker-conf-overlay/install.sh; edits here are replaced)"
END_MARK="# <<< txn-preserver overlay"
HANDLER_NAME="txn-preserver"

die() { echo "install.sh: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 PULSAR_HOME"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ -d "$1" ] || die "$1 is not a directory"
pulsar_home="$(cd "$1" && pwd)"

[ -x "$pulsar_home/bin/pulsar" ] && [ -d "$pulsar_home/lib" ] \
    && [ -f "$pulsar_home/conf/broker.conf" ] && [ -f "$pulsar_home/conf/standalone.conf" ] \
    || die "$pulsar_home is not a Pulsar server distribution (expected bin/pulsar, lib/, conf/broker.conf, conf/standalone.conf)"
ls "$pulsar_home"/lib/org.apache.pulsar-pulsar-broker-*.jar >/dev/null 2>&1 \
    || die "$pulsar_home/lib has no Pulsar broker jar: not a Pulsar server distribution"
[ -f "$here/txn-preserver.conf" ] || die "no txn-preserver.conf beside $0"

# The jar: beside this script (a release bundle), else in the source tree's plugin/target/.
shopt -s nullglob
find_jars() {
    local jar
    for jar in "$1"/pulsar-txn-preserver-*.jar; do
        case "$jar" in *-sources.jar|*-javadoc.jar|*-tests.jar) continue ;; esac
        echo "$jar"
    done
}
mapfile -t jars < <(find_jars "$here")
if [ ${#jars[@]} -eq 0 ]; then
    mapfile -t jars < <(find_jars "$(dirname "$here")/plugin/target")
fi
[ ${#jars[@]} -eq 1 ] || die "expected one pulsar-txn-preserver-*.jar beside this script (a release bundle) or in $(dirname "$here")/plugin/target (a source tree: run 'mvn -DskipTests package' first), found ${#jars[@]}"
plugin_jar="${jars[0]}"
version="$(basename "$plugin_jar" .jar)"; version="${version#pulsar-txn-preserver-}"

# A key's value in a config file as the broker reads it (java.util.Properties: the key ends at
# the first '=', ':' or blank; a line ending in a backslash goes on on the next line; the last
# occurrence wins). Prints "inside=value" or "outside=value" for where that last occurrence is
# (inside our block or not), nothing if the key is set nowhere.
lookup() {
    local key="$1" file="$2"
    awk -v begin="$BEGIN_MARK" -v old_begin="$OLD_BEGIN_MARK" -v end="$END_MARK" -v key="$key" '
        function marker(text) { sub(/[ \t\r]+$/, "", text); return text }
        {
            line = $0
            sub(/\r$/, "", line)
            if (pending != "") { sub(/^[ \t]+/, "", line); line = pending line; pending = "" }
            if (line !~ /^[ \t]*[#!]/ && line ~ /(^|[^\\])(\\\\)*\\$/) { pending = substr(line, 1, length(line) - 1); next }
        }
        marker(line) == begin || marker(line) == old_begin { inside = 1; next }
        marker(line) == end { inside = 0; next }
        {
            sub(/^[ \t]+/, "", line)
            if (substr(line, 1, length(key)) != key) next
            rest = substr(line, length(key) + 1)
            if (rest ~ /^[ \t]*[=:]/) sub(/^[ \t]*[=:][ \t]*/, "", rest)
            else if (rest ~ /^[ \t]+/ || rest == "") sub(/^[ \t]+/, "", rest)
            else next
            sub(/[ \t]+$/, "", rest)
            value = rest; where = inside ? "inside" : "outside"; found = 1
        }
        END { if (found) print where "=" value }' "$file"
}

# The value of a lookup, without where it is.
value_of() { echo "${1#*=}"; }

# Relative paths are relative to PULSAR_HOME, where bin/pulsar is normally started.
absolute() {
    case "$1" in /*) echo "$1" ;; *) echo "$pulsar_home/${1#./}" ;; esac
}

# A directory key: the value in force (the operator's, or one edited into our block), made
# absolute, else ours.
directory() {
    local key="$1" conf="$2" default="$3" found
    found="$(lookup "$key" "$conf")"
    if [ -n "$found" ] && [ -n "$(value_of "$found")" ]; then absolute "$(value_of "$found")"; else echo "$default"; fi
}

# A comma-separated list: the values set outside the block and inside it, and ours, each once.
merged_list() {
    local key="$1" conf="$2"
    printf '%s,%s,%s' "$(lookup_everywhere "$key" outside "$conf")" "$(lookup_everywhere "$key" inside "$conf")" \
        "$HANDLER_NAME" | tr ',' '\n' | sed -e 's/^[ \t]*//' -e 's/[ \t]*$//' | awk 'NF && !seen[$0]++' | paste -sd, -
}

# The last value of a key among the lines outside our block, or inside it.
lookup_everywhere() {
    local key="$1" where="$2" file="$3" tmp found
    tmp="$(mktemp)"
    awk -v begin="$BEGIN_MARK" -v old_begin="$OLD_BEGIN_MARK" -v end="$END_MARK" -v where="$where" '
        function marker(text) { sub(/[ \t\r]+$/, "", text); return text }
        marker($0) == begin || marker($0) == old_begin { inside = 1; next }
        marker($0) == end { inside = 0; next }
        (where == "inside") == (inside == 1) { print }' "$file" > "$tmp"
    found="$(lookup "$key" "$tmp")"
    rm -f "$tmp"
    value_of "$found"
}

# Our block's marker lines, compared as the broker would not care: trailing blanks and a CR
# ignored. A begin marker without its end would make the rest of the file look like our block:
# refused, the file unchanged.
check_markers() {
    awk -v begin="$BEGIN_MARK" -v old_begin="$OLD_BEGIN_MARK" -v end="$END_MARK" -v file="$1" '
        function marker(text) { sub(/[ \t\r]+$/, "", text); return text }
        marker($0) == begin || marker($0) == old_begin { if (open) bad = "two begin markers"; open = 1; opened = NR; next }
        marker($0) == end { if (!open) bad = "an end marker without a begin marker"; open = 0; next }
        END {
            if (open) bad = "its begin marker at line " opened " has no end marker (\"" end "\")"
            if (bad != "") { print "install.sh: " file ": the txn-preserver block is damaged: " bad "; repair it by hand (or delete the block) and run install.sh again" > "/dev/stderr"; exit 1 }
        }' "$1"
}

# Directories from broker.conf (the broker's own file; standalone.conf is handled alike below).
handlers_dir="$(directory protocolHandlerDirectory "$pulsar_home/conf/broker.conf" "$pulsar_home/protocols")"
servlets_dir="$(directory additionalServletDirectory "$pulsar_home/conf/broker.conf" "$handlers_dir")"

# Both files checked before anything is changed.
check_markers "$pulsar_home/conf/broker.conf" || exit 1
check_markers "$pulsar_home/conf/standalone.conf" || exit 1

# lib/: replace any earlier version of the plugin.
rm -f "$pulsar_home"/lib/io.github.txnpreserver-pulsar-txn-preserver-*.jar "$pulsar_home/lib/io.github.txnpreserver-pulsar-txn-preserver.jar"
cp "$plugin_jar" "$pulsar_home/lib/io.github.txnpreserver-pulsar-txn-preserver-$version.jar"

# The block of one config file, from the overlay: see the rules at the top.
block() {
    local conf="$1" line key found
    while IFS= read -r line || [ -n "$line" ]; do
        if [[ "$line" =~ ^#?([A-Za-z][A-Za-z0-9]*)=(.*)$ ]]; then
            key="${BASH_REMATCH[1]}"
        else
            echo "$line"; continue
        fi
        found="$(lookup "$key" "$conf")"
        case "$key" in
            transactionCoordinatorEnabled|transactionMetadataStoreProviderClassName)
                echo "$line" ;;
            messagingProtocols|additionalServlets)
                echo "$key=$(merged_list "$key" "$conf")" ;;
            protocolHandlerDirectory|additionalServletDirectory)
                if [ "${found%%=*}" = outside ]; then
                    echo "# $key: set elsewhere in this file ($(value_of "$found")); install.sh leaves it there"
                elif [ "$key" = protocolHandlerDirectory ]; then
                    echo "$key=$(directory "$key" "$conf" "$pulsar_home/protocols")"
                else
                    echo "$key=$(directory "$key" "$conf" "$(directory protocolHandlerDirectory "$conf" "$pulsar_home/protocols")")"
                fi ;;
            *)
                # The value in force stays in force: the operator's line outside the block if it
                # is the last one, else the block's own (edited or uncommented) line.
                if [ "${found%%=*}" = outside ]; then
                    echo "# $key: set elsewhere in this file ($(value_of "$found")); install.sh leaves it there"
                elif [ -n "$found" ]; then
                    echo "$key=$(value_of "$found")"
                else
                    echo "$line"
                fi ;;
        esac
    done < "$here/txn-preserver.conf"
}

install_overlay() {
    local conf="$1" tmp dir
    for dir in "$(directory protocolHandlerDirectory "$conf" "$pulsar_home/protocols")" \
               "$(directory additionalServletDirectory "$conf" "$(directory protocolHandlerDirectory "$conf" "$pulsar_home/protocols")")"; do
        mkdir -p "$dir"
        cp "$plugin_jar" "$dir/$HANDLER_NAME.nar"
    done
    tmp="$(mktemp "$conf.XXXXXX")"
    {
        # The file without our earlier block; its last line ended (the shipped files' last does not).
        awk -v begin="$BEGIN_MARK" -v old_begin="$OLD_BEGIN_MARK" -v end="$END_MARK" '
            function marker(text) { sub(/[ \t\r]+$/, "", text); return text }
            marker($0) == begin || marker($0) == old_begin { skip = 1; next }
            marker($0) == end { skip = 0; next }
            !skip { print }' "$conf"
        echo "$BEGIN_MARK"
        block "$conf"
        echo "$END_MARK"
    } > "$tmp"
    cat "$tmp" > "$conf"
    rm -f "$tmp"
}

# An earlier version's interceptor archive: loaded by nothing now (its keys were in the
# marked block), removed so that no old code stays beside the new.
interceptors_dir="$(lookup_everywhere brokerInterceptorsDirectory outside "$pulsar_home/conf/broker.conf")"
rm -f "$(absolute "${interceptors_dir:-./interceptors}")/$HANDLER_NAME.nar" "$pulsar_home/interceptors/$HANDLER_NAME.nar"

install_overlay "$pulsar_home/conf/broker.conf"
install_overlay "$pulsar_home/conf/standalone.conf"

echo "Installed pulsar-txn-preserver $version into $pulsar_home:"
echo "  lib/io.github.txnpreserver-pulsar-txn-preserver-$version.jar"
echo "  $handlers_dir/$HANDLER_NAME.nar"
[ "$servlets_dir" = "$handlers_dir" ] || echo "  $servlets_dir/$HANDLER_NAME.nar"
echo "  the overlay in conf/broker.conf and conf/standalone.conf (values set there kept)"
