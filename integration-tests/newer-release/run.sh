#!/usr/bin/env bash
# Smoke test of the plugin on a newer Pulsar release than the one it is built against
# (project issue 7, item 4). Maven Central serves no server distribution of it, so the
# standalone runs from the pulsar-broker jars.
#
#   1. builds the plugin from the repository this script lives in (mvn package -pl plugin);
#   2. resolves pulsar-broker $PULSAR_VERSION and its dependencies from Maven Central
#      (pom.xml beside this script), and the stock Java client of each $CLIENT_VERSIONS;
#   3. picks a JDK new enough for the broker's class files (Pulsar 5.0 needs Java 21:
#      the default java 17 is not enough, $NEWER_JAVA_HOME is used);
#   4. starts a standalone (ZooKeeper metadata, one bookie, no functions, no stream storage)
#      on free loopback ports with the plugin installed as install.sh installs it: jar on the
#      classpath, the same jar as protocols/txn-preserver.nar, the overlay keys;
#   5. SmokeTest.java with each client: commit one transaction and abort another, then retry
#      both ends: the true outcome comes back; kill -9 of the broker, restart, retry again;
#      checks the broker log (no error from io.github.txnpreserver.*, no linkage error) and
#      that persistent://pulsar/system/__terminated_txn_state_0 exists;
#   6. the counter case: the same jars with the plugin not installed; a retried commit or
#      abort gets TransactionNotFound, as stock Pulsar answers.
# Prints one "RESULT: PASS|FAIL ..." line; exit status 0 on PASS. Every process it starts is
# stopped by its PID when it exits (trap), never by name.
#
# Usage: integration-tests/newer-release/run.sh
# Environment (all optional):
#   PULSAR_VERSION   broker version                     (default 5.0.1)
#   CLIENT_VERSIONS  client versions, space separated   (default "5.0.1 4.0.8")
#   NEWER_JAVA_HOME  JDK for class files newer than the default java's
#                    (default /usr/lib/jvm/temurin-25-jdk-amd64)
#   WORK_DIR         where jars, broker data and logs go (default: a new /tmp/txn-preserver-newer.XXXXXX)
#   SKIP_BUILD=1     use the plugin jar already in plugin/target
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
PULSAR_VERSION="${PULSAR_VERSION:-5.0.1}"
CLIENT_VERSIONS="${CLIENT_VERSIONS:-5.0.1 4.0.8}"
NEWER_JAVA_HOME="${NEWER_JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}"
WORK_DIR="${WORK_DIR:-$(mktemp -d /tmp/txn-preserver-newer.XXXXXX)}"
mkdir -p "$WORK_DIR"
WORK_DIR="$(cd "$WORK_DIR" && pwd)"
MVN=(mvn -B -q -Dstyle.color=never)
mvn_quiet() {   # Maven with its output in $WORK_DIR/mvn.log, shown only if it fails
    if ! "${MVN[@]}" "$@" >> "$WORK_DIR/mvn.log" 2>&1; then
        tail -40 "$WORK_DIR/mvn.log" >&2; echo "mvn $* failed (full log: $WORK_DIR/mvn.log)" >&2; return 1
    fi
}
BROKER_HEAP=(-Xms256m -Xmx768m -XX:MaxDirectMemorySize=512m -XX:+UseSerialGC)
CLIENT_HEAP=(-Xms64m -Xmx256m -XX:+UseSerialGC)
START_TIMEOUT=240
started=$(date +%s)

log() { echo "[$(date +%H:%M:%S)] $*"; }
failures=()
fail() { failures+=("$*"); log "FAIL: $*"; }

# ---------------------------------------------------------------- processes, by PID only
broker_pid=""
cleanup() {
    local rc=$?
    if [ -n "$broker_pid" ] && kill -0 "$broker_pid" 2>/dev/null; then
        log "stopping broker (pid $broker_pid)"
        kill -TERM "$broker_pid" 2>/dev/null || true
        for _ in $(seq 1 40); do kill -0 "$broker_pid" 2>/dev/null || break; sleep 0.5; done
        kill -KILL "$broker_pid" 2>/dev/null || true
        wait "$broker_pid" 2>/dev/null || true
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_in_use() { ss -Htln 2>/dev/null | awk '{print $4}' | grep -Eq "[:.]$1\$"; }
pick_ports() {   # four free loopback ports, distinct
    local chosen=() p
    while [ ${#chosen[@]} -lt 4 ]; do
        p=$((20000 + RANDOM % 40000))
        port_in_use "$p" && continue
        case " ${chosen[*]-} " in *" $p "*) continue ;; esac
        chosen+=("$p")
    done
    echo "${chosen[@]}"
}
answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ---------------------------------------------------------------- 1. the plugin
if [ "${SKIP_BUILD:-}" != 1 ]; then
    log "building the plugin in $repo (mvn package -pl plugin -am, tests skipped)"
    (cd "$repo" && mvn_quiet -DskipTests package -pl plugin -am)
fi
shopt -s nullglob
plugin_jars=()
for jar in "$repo"/plugin/target/pulsar-txn-preserver-*.jar; do
    case "$jar" in *-sources.jar|*-javadoc.jar|*-tests.jar) continue ;; esac
    plugin_jars+=("$jar")
done
shopt -u nullglob
[ ${#plugin_jars[@]} -eq 1 ] || { echo "expected one plugin jar in $repo/plugin/target, found ${#plugin_jars[@]}" >&2; exit 1; }
plugin_jar="${plugin_jars[0]}"
log "plugin: $plugin_jar"

# ---------------------------------------------------------------- 2. jars from Maven Central
lib="$WORK_DIR/broker-lib"
if [ ! -f "$lib/.resolved-$PULSAR_VERSION" ]; then
    log "resolving org.apache.pulsar:pulsar-broker:$PULSAR_VERSION from Maven Central"
    rm -rf "$lib"
    mvn_quiet -f "$here/pom.xml" -Dpulsar.version="$PULSAR_VERSION" \
        org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$lib"
    # ZooKeeper: the version pulsar-metadata asks for, jars only (its parent pom is not on Central).
    mvn_quiet -f "$here/pom.xml" org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
        -Dartifact="org.apache.pulsar:pulsar-metadata:$PULSAR_VERSION:pom" -DoutputDirectory="$WORK_DIR"
    zk_version="$(awk '/<artifactId>zookeeper<\/artifactId>/ { f = 1 }
        f && /<version>/ { gsub(/.*<version>|<\/version>.*/, ""); print; exit }' "$WORK_DIR/pulsar-metadata-$PULSAR_VERSION.pom")"
    [ -n "$zk_version" ] || { echo "no zookeeper version in pulsar-metadata-$PULSAR_VERSION.pom" >&2; exit 1; }
    log "ZooKeeper $zk_version (the version pulsar-metadata $PULSAR_VERSION asks for): jars only"
    for artifact in zookeeper zookeeper-jute; do
        mvn_quiet -f "$here/pom.xml" org.apache.maven.plugins:maven-dependency-plugin:2.8:copy \
            -Dartifact="org.apache.zookeeper:$artifact:$zk_version" -DoutputDirectory="$lib"
    done
    touch "$lib/.resolved-$PULSAR_VERSION"
fi
log "broker classpath: $(ls "$lib" | wc -l) jars in $lib"

client_cp() {   # classpath of the stock Java client of version $1
    local v="$1" dir="$WORK_DIR/client-$1"
    if [ ! -f "$dir/pulsar-client-$v.jar" ] && [ ! -f "$dir/.broker-lib" ]; then
        rm -rf "$dir"; mkdir -p "$dir"
        if "${MVN[@]}" -f "$here/client-pom.xml" -Dpulsar.client.version="$v" \
                org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
                -DincludeScope=runtime -DoutputDirectory="$dir" >"$dir/resolve.log" 2>&1; then
            :
        elif [ "$v" = "$PULSAR_VERSION" ]; then
            # Central has no shaded org.apache.pulsar:pulsar-client:5.0.1 jar; the broker's jars
            # hold the same client unshaded (pulsar-client-original) with the versions it runs with.
            touch "$dir/.broker-lib"
        else
            echo "cannot resolve org.apache.pulsar:pulsar-client:$v (see $dir/resolve.log)" >&2
            return 1
        fi
    fi
    if [ -f "$dir/.broker-lib" ]; then echo "$lib/*"; else echo "$dir/*"; fi
}
client_desc() {
    if [ -f "$WORK_DIR/client-$1/.broker-lib" ]; then
        echo "pulsar-client-original-$1 (the shaded pulsar-client-$1 jar is not on Maven Central)"
    else
        echo "pulsar-client-$1"
    fi
}
declare -A client_cps
for v in $CLIENT_VERSIONS; do
    client_cps[$v]="$(client_cp "$v")"
done

# ---------------------------------------------------------------- 3. the JDK
class_major() { unzip -p "$1" "$2" | od -An -j6 -N2 -tu1 | awk '{print $1 * 256 + $2}'; }
java_feature() { "$1" -XshowSettings:properties -version 2>&1 | awk -F'= ' '/java.specification.version/{print $2}'; }
needed=$(( $(class_major "$lib/pulsar-broker-$PULSAR_VERSION.jar" org/apache/pulsar/PulsarStandaloneStarter.class) - 44 ))
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"
command -v "$JAVA" >/dev/null || JAVA=java
if [ "$(java_feature "$JAVA")" -lt "$needed" ]; then
    JAVA="$NEWER_JAVA_HOME/bin/java"
    [ -x "$JAVA" ] || { echo "Pulsar $PULSAR_VERSION needs Java $needed; $NEWER_JAVA_HOME has no java" >&2; exit 1; }
fi
java_version="$("$JAVA" -version 2>&1 | head -1)"
[ "$(java_feature "$JAVA")" -ge "$needed" ] || { echo "$JAVA is older than Java $needed" >&2; exit 1; }
log "Pulsar $PULSAR_VERSION needs Java $needed: using $JAVA ($java_version)"

# Module access the broker needs on Java 17+ (as bin/pulsar of the distribution).
JVM_OPENS=(--add-opens java.base/java.io=ALL-UNNAMED --add-opens java.base/java.util.zip=ALL-UNNAMED
    --add-opens java.management/sun.management=ALL-UNNAMED
    --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
    --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/jdk.internal.misc=ALL-UNNAMED
    --add-opens java.base/jdk.internal.platform=ALL-UNNAMED --enable-native-access=ALL-UNNAMED)
[ "$(java_feature "$JAVA")" -ge 24 ] && JVM_OPENS+=(--sun-misc-unsafe-memory-access=allow)

# ---------------------------------------------------------------- 4. one standalone broker
# broker_dir MODE: plugin | stock. Data, config and log of one broker; ports chosen once.
new_broker() {
    local mode="$1"
    bdir="$WORK_DIR/broker-$mode"
    rm -rf "$bdir"; mkdir -p "$bdir/tmp" "$bdir/protocols"
    read -r broker_port web_port zk_port bk_port < <(pick_ports)
    {
        cat "$here/standalone.conf"
        echo
        echo "# ---- run.sh: this broker ($mode) ----"
        echo "brokerServicePort=$broker_port"
        echo "webServicePort=$web_port"
        echo "transactionCoordinatorEnabled=true"
        echo "systemTopicEnabled=true"
        if [ "$mode" = plugin ]; then
            # As broker-conf-overlay/install.sh installs it (txn-preserver.conf, default values).
            cp "$plugin_jar" "$bdir/protocols/txn-preserver.nar"
            sed -e "s|@PROTOCOL_HANDLER_DIRECTORY@|$bdir/protocols|" \
                -e "s|@MESSAGING_PROTOCOLS@|txn-preserver|" \
                -e "s|@PERSIST_COUNT@|100|" \
                "$repo/broker-conf-overlay/txn-preserver.conf"
        fi
    } > "$bdir/standalone.conf"
    broker_mode="$mode"
}

start_broker() {
    local cp="$lib/*" n
    [ "$broker_mode" = plugin ] && cp="$plugin_jar:$cp"
    for p in "$broker_port" "$web_port" "$zk_port" "$bk_port"; do
        if answers "$p"; then fail "port $p answers before the $broker_mode broker starts"; return 1; fi
    done
    n=$(( $(grep -c '^===== start' "$bdir/broker.out" 2>/dev/null || true) + 1 ))
    echo "===== start $n at $(date -Is) =====" >> "$bdir/broker.out"
    PULSAR_STANDALONE_USE_ZOOKEEPER=1 "$JAVA" "${BROKER_HEAP[@]}" "${JVM_OPENS[@]}" -cp "$cp" \
        -Djava.net.preferIPv4Stack=true -Djute.maxbuffer=10485760 \
        -Dio.netty.tryReflectionSetAccessible=true -Dpulsar.allocator.exit_on_oom=true \
        -Dlog4j.configurationFile="$here/log4j2.xml" -Dlog4j2.is.webapp=false \
        -Djava.io.tmpdir="$bdir/tmp" -Dzookeeper.admin.enableServer=false \
        org.apache.pulsar.PulsarStandaloneStarter -c "$bdir/standalone.conf" \
        --no-stream-storage --no-functions-worker \
        --zookeeper-port "$zk_port" --bookkeeper-port "$bk_port" \
        --zookeeper-dir "$bdir/zookeeper" --bookkeeper-dir "$bdir/bookkeeper" \
        >> "$bdir/broker.out" 2>&1 &
    broker_pid=$!
    log "started $broker_mode broker (pid $broker_pid, pulsar://127.0.0.1:$broker_port, http :$web_port, log $bdir/broker.out)"
    local deadline=$(( $(date +%s) + START_TIMEOUT ))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        if ! kill -0 "$broker_pid" 2>/dev/null; then
            wait "$broker_pid" 2>/dev/null || true
            fail "the $broker_mode broker exited during start"; tail -40 "$bdir/broker.out"; broker_pid=""; return 1
        fi
        if grep -Eq "AbstractMethodError|NoSuchMethodError|NoSuchFieldError|IncompatibleClassChangeError|NoClassDefFoundError" "$bdir/broker.out"; then
            fail "linkage error in the $broker_mode broker log during start: $(grep -m1 -Eo '(AbstractMethodError|NoSuchMethodError|NoSuchFieldError|IncompatibleClassChangeError|NoClassDefFoundError).{0,200}' "$bdir/broker.out")"
            return 1
        fi
        if curl -fsS -m 5 "http://127.0.0.1:$web_port/admin/v2/brokers/health" 2>/dev/null | grep -q ok \
            && curl -fsS -m 5 "http://127.0.0.1:$web_port/admin/v2/namespaces/pulsar" 2>/dev/null | grep -q 'pulsar/system' \
            && curl -fsS -m 5 "http://127.0.0.1:$web_port/admin/v2/namespaces/public" 2>/dev/null | grep -q 'public/default'; then
            log "broker healthy after $(( $(date +%s) - deadline + START_TIMEOUT )) s"
            return 0
        fi
        sleep 1
    done
    fail "the $broker_mode broker was not healthy within $START_TIMEOUT s"; tail -40 "$bdir/broker.out"; return 1
}

kill9_broker() {
    log "kill -9 of the broker (pid $broker_pid)"
    kill -KILL "$broker_pid" 2>/dev/null || true
    wait "$broker_pid" 2>/dev/null || true
    broker_pid=""
    local p
    for _ in $(seq 1 60); do
        p=0; for port in "$broker_port" "$web_port" "$zk_port" "$bk_port"; do answers "$port" && p=1; done
        [ $p -eq 0 ] && return 0; sleep 0.5
    done
    fail "broker ports still answer after kill -9"; return 1
}

stop_broker() {
    [ -n "$broker_pid" ] || return 0
    log "stopping the $broker_mode broker (pid $broker_pid)"
    kill -TERM "$broker_pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$broker_pid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$broker_pid" 2>/dev/null || true
    wait "$broker_pid" 2>/dev/null || true
    broker_pid=""
}

# smoke PHASE EXPECT CLIENT_VERSION: SmokeTest.java with that client; failures recorded.
smoke() {
    local phase="$1" expect="$2" v="$3" out
    out="$bdir/smoke-$phase-$v.out"
    log "SmokeTest $phase ($expect) with $(client_desc "$v")"
    if timeout 600 "$JAVA" "${CLIENT_HEAP[@]}" "${JVM_OPENS[@]}" -cp "${client_cps[$v]}" \
            -Dlog4j.configurationFile="$here/log4j2.xml" -Dsmoke.log.level=warn \
            "$here/SmokeTest.java" "$phase" "pulsar://127.0.0.1:$broker_port" "$bdir/txns-$v.properties" "$expect" \
            > "$out" 2>&1; then
        { grep -E '^(committed|CHECK|      \()' "$out" || true; } | sed 's/^/    /'
    else
        { grep -E '^(committed|CHECK|      \()' "$out" || true; } | sed 's/^/    /'
        { tail -20 "$out" | grep -vE '^(CHECK|committed)' || true; } | sed 's/^/    | /'
        fail "SmokeTest $phase ($expect) with client $v (see $out)"
    fi
}

check_plugin_log() {
    local f="$bdir/broker.out" bad
    grep -q "Transaction outcome preserver configured" "$f" || fail "the plugin's protocol handler did not start (no 'Transaction outcome preserver configured' in $f)"
    grep -q "Opened state topic persistent://pulsar/system/__terminated_txn_state_0" "$f" \
        || fail "the plugin's coordinator store did not open its state topic (see $f)"
    bad="$(grep -E '(ERROR|WARN) +io\.github\.txnpreserver' "$f" || true)"
    [ -z "$bad" ] || { fail "the plugin logged errors/warnings:"; echo "$bad" | head -20; }
    bad="$(grep -E 'AbstractMethodError|NoSuchMethodError|NoSuchFieldError|IncompatibleClassChangeError|NoClassDefFoundError|ClassNotFoundException: io\.github' "$f" || true)"
    [ -z "$bad" ] || { fail "linkage errors in the broker log:"; echo "$bad" | head -20; }
    log "broker log: $(grep -c ' ERROR ' "$f" || true) ERROR lines in all, by logger and message (the broker logs each"
    log "  refused conflicting retry as 'End transaction fail!' and 'Send response error', as stock Pulsar does):"
    { grep -E '^[^ ]+ \[[^]]+\] ERROR ' "$f" || true; } | sed -E 's/^[^ ]+ \[[^]]+\] ERROR +//; s/ \{.*//' \
        | sort | uniq -c | sort -rn | head -10 | sed 's/^/    /'
    log "broker log: plugin lines (INFO):"
    { grep -E 'INFO +io\.github\.txnpreserver' "$f" || true; } | sed -E 's/^(.{220}).*/\1.../; s/^/    /'
}

check_state_topic() {
    local topics
    topics="$(curl -fsS -m 10 "http://127.0.0.1:$web_port/admin/v2/persistent/pulsar/system?includeSystemTopic=true" || true)"
    if echo "$topics" | grep -q 'persistent://pulsar/system/__terminated_txn_state_0'; then
        log "state topic persistent://pulsar/system/__terminated_txn_state_0 exists"
    else
        fail "no persistent://pulsar/system/__terminated_txn_state_0 among $topics"
    fi
}

# ---------------------------------------------------------------- 5. with the plugin
echo
log "=== Pulsar $PULSAR_VERSION standalone WITH txn-preserver ==="
if new_broker plugin && start_broker; then
    for v in $CLIENT_VERSIONS; do smoke first plugin "$v"; done
    check_state_topic
    if kill9_broker && start_broker; then
        for v in $CLIENT_VERSIONS; do smoke restart plugin "$v"; done
        check_state_topic
    fi
    check_plugin_log
fi
stop_broker

# ---------------------------------------------------------------- 6. without the plugin
echo
log "=== Pulsar $PULSAR_VERSION standalone WITHOUT the plugin (same jars): retries must get TransactionNotFound ==="
first_client="${CLIENT_VERSIONS%% *}"
if new_broker stock && start_broker; then
    smoke first stock "$first_client"
    if grep -q "io.github.txnpreserver" "$bdir/broker.out"; then fail "the stock broker loaded the plugin"; fi
fi
stop_broker

# ---------------------------------------------------------------- summary
elapsed=$(( $(date +%s) - started ))
echo
clients=""; for v in $CLIENT_VERSIONS; do clients="$clients${clients:+, }$(client_desc "$v" | cut -d' ' -f1)"; done
if [ ${#failures[@]} -eq 0 ]; then
    echo "RESULT: PASS - txn-preserver on Pulsar $PULSAR_VERSION standalone (from Maven Central jars), $java_version;" \
        "clients: $clients; retried commit/abort answered with the true outcome, also after kill -9 + restart;" \
        "without the plugin: TransactionNotFound. ${elapsed}s. Logs: $WORK_DIR"
    exit 0
else
    echo "RESULT: FAIL - txn-preserver on Pulsar $PULSAR_VERSION, $java_version: ${#failures[@]} failure(s), ${elapsed}s. Logs: $WORK_DIR"
    for f in "${failures[@]}"; do echo "  - $f"; done
    exit 1
fi
