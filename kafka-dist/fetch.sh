#!/usr/bin/env bash
# Fetch the Apache Kafka releases the tests run (one kafka-dist/<series>/pom.xml each) with Maven,
# once, into the project folder: .cache/kafka/<version>/lib/*.jar (or
# $COORDKIT_KAFKA_HOME/<version>).
# (The folder is not named kafka/: mypy, run from the project root, would take a kafka/ folder for
# kafka-python's package `kafka`.)
#
#   bash kafka-dist/fetch.sh            fetch what is missing; a complete cache costs no network
#   bash kafka-dist/fetch.sh --verify   also check every cached jar against its recorded SHA-256
#
# A version's cache is complete when its manifest (lib.manifest: size, SHA-256 and name of every
# jar, written last) is there and matches the pom it was fetched from. A cache whose jars differ
# from the manifest (missing, truncated, extra) is reported and fetched again. Anything this
# script cannot do ends with one line naming what and where, and exit status 2.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${COORDKIT_KAFKA_HOME:-$ROOT/.cache/kafka}
MANIFEST=lib.manifest
VERIFY=0
JAVA_HINT="Kafka needs Java 17 or newer: apt-get install openjdk-17-jdk-headless"

say() { printf '[kafka-dist/fetch.sh] %s\n' "$*" >&2; }
fail() { printf 'kafka-dist/fetch.sh: %s\n' "$*" >&2; exit 2; }

case "${1:-}" in
    "") ;;
    --verify) VERIFY=1 ;;
    *) fail "unknown argument '$1' (usage: bash kafka-dist/fetch.sh [--verify])" ;;
esac

require_tools() {
    command -v java >/dev/null 2>&1 || fail "java is not installed; $JAVA_HINT"
    # `java -version` says e.g. openjdk version "17.0.15" (or "1.8.0_392" before Java 9).
    local version major
    version=$(java -version 2>&1 | sed -n 's/.* version "\([^"]*\)".*/\1/p' | head -n 1)
    major=${version%%.*}
    [ "$major" = 1 ] && major=$(echo "$version" | cut -d. -f2)
    [[ "$major" =~ ^[0-9]+$ ]] \
        || fail "cannot read the Java version from '$(command -v java) -version'; $JAVA_HINT"
    [ "$major" -ge 17 ] || fail "java $(command -v java) is Java $version; $JAVA_HINT"
    command -v mvn >/dev/null 2>&1 \
        || fail "mvn is not installed; it fetches Kafka's jars from Maven Central: apt-get install maven"
}

pom_version() {
    # The one <kafka.version> line of a pom (the poms keep it on one line for this).
    local version
    version=$(sed -n 's:.*<kafka.version>\([^<]*\)</kafka.version>.*:\1:p' "$1" | head -n 1)
    [ -n "$version" ] || fail "$1 names no <kafka.version>"
    echo "$version"
}

pom_digest() { sha256sum "$1" | cut -d' ' -f1; }

cache_damage() {
    # Empty when $1/lib holds exactly the jars of $1/$MANIFEST at their recorded sizes (SHA-256 too
    # with --verify); otherwise what is wrong, on one line.
    local dir=$1 size digest name actual listed
    listed=$(mktemp)
    while read -r size digest name; do
        case "$size" in pom:*) continue ;; esac
        echo "$name" >>"$listed"
        if [ ! -f "$dir/lib/$name" ]; then
            echo "lib/$name is missing"; rm -f "$listed"; return
        fi
        actual=$(stat -c %s "$dir/lib/$name")
        if [ "$actual" != "$size" ]; then
            echo "lib/$name is $actual bytes, $size were fetched"; rm -f "$listed"; return
        fi
        if [ "$VERIFY" = 1 ] && [ "$(sha256sum "$dir/lib/$name" | cut -d' ' -f1)" != "$digest" ]; then
            echo "lib/$name does not match its SHA-256"; rm -f "$listed"; return
        fi
    done <"$dir/$MANIFEST"
    for name in $(cd "$dir/lib" && ls); do
        if ! grep -qxF "$name" "$listed"; then
            echo "lib/$name is not one of the fetched jars"; rm -f "$listed"; return
        fi
    done
    rm -f "$listed"
}

fetch() {
    local pom=$1 version=$2 dir=$3
    local partial="$dir.partial" log="$CACHE/fetch-$version.log" started seconds jars bytes
    rm -rf "$partial"
    mkdir -p "$partial/lib"
    say "fetching Apache Kafka $version ($pom) with Maven into ${dir#"$ROOT"/}/lib"
    started=$(date +%s)
    # -B: no progress bars in a CI log; Maven's own output goes to a log named if it fails.
    if ! mvn -B -f "$pom" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$partial/lib" >"$log" 2>&1; then
        rm -rf "$partial"
        local error
        error=$(grep -m1 '^\[ERROR\]' "$log" || echo 'see its log')
        fail "Maven could not fetch Apache Kafka $version ($pom): $error (whole output: $log)"
    fi
    (
        cd "$partial/lib"
        echo "pom:$(pom_digest "$ROOT/$pom") $pom"
        for jar in *.jar; do
            echo "$(stat -c %s "$jar") $(sha256sum "$jar" | cut -d' ' -f1) $jar"
        done
    ) >"$partial/$MANIFEST.tmp"
    # The manifest last, renamed into place: a fetch cut short leaves no complete-looking cache.
    mv "$partial/$MANIFEST.tmp" "$partial/$MANIFEST"
    rm -rf "$dir"
    mv "$partial" "$dir"
    rm -f "$log"
    seconds=$(($(date +%s) - started))
    jars=$(find "$dir/lib" -name '*.jar' | wc -l)
    bytes=$(du -sb "$dir/lib" | cut -f1)
    say "fetched Apache Kafka $version: $jars jars, $((bytes / 1048576)) MiB in ${seconds}s"
}

require_tools
mkdir -p "$CACHE"
# One fetch at a time per cache (two test runs started together share it).
exec 9>"$CACHE/.lock"
flock 9

poms=(kafka-dist/*/pom.xml)
[ -f "${poms[0]}" ] || fail "no kafka-dist/*/pom.xml in $ROOT"
for pom in "${poms[@]}"; do
    version=$(pom_version "$pom")
    dir="$CACHE/$version"
    if [ -f "$dir/$MANIFEST" ]; then
        recorded=$(sed -n 's/^pom:\([0-9a-f]*\) .*/\1/p' "$dir/$MANIFEST")
        if [ "$recorded" != "$(pom_digest "$pom")" ]; then
            say "$pom changed since Apache Kafka $version was fetched: fetching it again"
        else
            damage=$(cache_damage "$dir")
            if [ -z "$damage" ]; then
                say "Apache Kafka $version: cached in ${dir#"$ROOT"/} ($(du -sh "$dir/lib" | cut -f1))"
                continue
            fi
            say "the cache of Apache Kafka $version in ${dir#"$ROOT"/} is damaged ($damage):" \
                "fetching it again"
        fi
    fi
    fetch "$pom" "$version" "$dir"
    damage=$(cache_damage "$dir")
    [ -z "$damage" ] \
        || fail "the cache of Apache Kafka $version in $dir is damaged right after fetching it ($damage)"
done
