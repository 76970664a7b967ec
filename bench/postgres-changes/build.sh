#!/usr/bin/env bash
# Builds the Debezium peer of bench/postgres-changes/bench.ts from Maven Central (Java 17, Maven):
# compiles it and writes its dependency classpath to debezium/classpath.txt.
set -euo pipefail
cd "$(dirname "$0")/debezium"
mvn -q -B compile dependency:build-classpath -Dmdep.outputFile=classpath.txt
echo "built bench/postgres-changes/debezium"
