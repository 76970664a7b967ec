#!/usr/bin/env bash
# Builds the Java peers of bench/kafka/compare.mts from Maven Central (Java 17, Maven):
# compiles each project and writes its dependency classpath to classpath.txt.
set -euo pipefail
cd "$(dirname "$0")"
for project in kafka-java flink; do
  (cd "$project" && mvn -q -B compile dependency:build-classpath -Dmdep.outputFile=classpath.txt)
  echo "built bench/kafka/peers/$project"
done
