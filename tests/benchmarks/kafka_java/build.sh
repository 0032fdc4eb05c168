#!/usr/bin/env bash
# Build the Kafka side of `run.py kafka_java`: Kafka's own assignors, compiled from Kafka's source
# with javac (the clients' RangeAssignor, RoundRobinAssignor, StickyAssignor and
# CooperativeStickyAssignor, the group coordinator's UniformAssignor, and what they use), plus the
# timing harness beside this script.
#
#   tests/benchmarks/kafka_java/build.sh KAFKA_SOURCE [REV]
#
# KAFKA_SOURCE: a Kafka git checkout or bare repository (the files are read with `git show`/`git
# archive`, nothing in it is modified). REV: the tag or commit to build, default 3.8.0.
# Needs: git, javac 11+ and an slf4j-api jar (found in ~/.m2, or set SLF4J_JAR).
# Output: tests/benchmarks/kafka_java/build/{classes,kafka-rev,classpath}.
#
# javac reads Kafka's sources as a source path and compiles only the classes the assignors reach.
# Seven classes of that closure would pull in Jackson, compression libraries and the protocol and
# record classes Kafka generates at build time; shim/ replaces them with the few constants or
# signatures the closure names (none is on an assignor's code path; see each file).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
if [[ $# -lt 1 || $# -gt 2 ]]; then
    echo "usage: $0 KAFKA_SOURCE [REV]   (REV defaults to 3.8.0)" >&2
    exit 2
fi
source_repo="$1"
rev="${2:-3.8.0}"
if [[ -d "$source_repo/.git" ]]; then
    git_dir="$source_repo/.git"
elif [[ -f "$source_repo/HEAD" && -d "$source_repo/objects" ]]; then
    git_dir="$source_repo"
else
    echo "$0: $source_repo is not a git checkout or bare repository of Kafka" >&2
    exit 2
fi
if ! git --git-dir="$git_dir" rev-parse --verify --quiet "$rev^{commit}" >/dev/null; then
    echo "$0: $source_repo has no revision $rev (try a tag such as 3.8.0)" >&2
    exit 2
fi
command -v javac >/dev/null || { echo "$0: javac not found (install a JDK, 11 or newer)" >&2; exit 2; }

slf4j="${SLF4J_JAR:-}"
if [[ -z "$slf4j" ]]; then
    slf4j="$(find "$HOME/.m2/repository/org/slf4j/slf4j-api" -name 'slf4j-api-1.7.*.jar' 2>/dev/null | sort -V | tail -1 || true)"
fi
if [[ -z "$slf4j" || ! -f "$slf4j" ]]; then
    echo "$0: no slf4j-api jar found in ~/.m2; set SLF4J_JAR=/path/to/slf4j-api-1.7.x.jar" >&2
    exit 2
fi

build="$here/build"
rm -rf "$build"
mkdir -p "$build/kafka-src" "$build/classes"
git --git-dir="$git_dir" archive "$rev" clients/src/main/java group-coordinator/src/main/java \
    group-coordinator/group-coordinator-api/src/main/java server-common/src/main/java |
    tar -x -C "$build/kafka-src"
git --git-dir="$git_dir" rev-parse "$rev^{commit}" >"$build/kafka-rev"
echo "$rev" >>"$build/kafka-rev"

src="$build/kafka-src"
javac -nowarn -encoding UTF-8 -d "$build/classes" \
    -sourcepath "$here/shim:$src/clients/src/main/java:$src/group-coordinator/src/main/java:$src/group-coordinator/group-coordinator-api/src/main/java:$src/server-common/src/main/java" \
    -cp "$slf4j" \
    "$here/src/org/apache/kafka/clients/consumer/KafkaAssignorBench.java"
rm -rf "$build/kafka-src"
echo "$build/classes:$slf4j" >"$build/classpath"
echo "built Kafka $rev assignors ($(find "$build/classes" -name '*.class' | wc -l) classes) into $build"
