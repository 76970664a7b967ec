#!/bin/sh
# Writes server.properties from the KAFKA_* environment (as the apache/kafka image does), formats
# the KRaft storage once, then runs the broker in the foreground with its log on stdout.
set -eu
config=/opt/kafka/server.properties
: >"$config"
env | grep '^KAFKA_' | while IFS='=' read -r name value; do
  case "$name" in
    KAFKA_HEAP_OPTS | KAFKA_OPTS | KAFKA_JVM_PERFORMANCE_OPTS | KAFKA_LOG4J_OPTS) continue ;;
  esac
  key=$(printf '%s' "${name#KAFKA_}" | tr 'A-Z' 'a-z' | sed 's/___/-/g; s/__/@/g; s/_/./g; s/@/_/g')
  printf '%s=%s\n' "$key" "$value" >>"$config"
done
version=$(cat /opt/kafka/version)
case "$version" in
  3.*) logging="-Dlog4j.configuration=file:/opt/kafka/log4j.properties" ;;
  *) logging="-Dlog4j2.configurationFile=/opt/kafka/log4j2.properties" ;;
esac
heap=${KAFKA_HEAP_OPTS:--Xms128m -Xmx512m}
run() {
  # shellcheck disable=SC2086
  java $heap -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
    $logging -cp '/opt/kafka/libs/*' "$@"
}
run kafka.tools.StorageTool format -t "${CLUSTER_ID:-b25jZWZsb3ctdGVzdGtpdA}" -c "$config" --ignore-formatted >/dev/null
exec java $heap -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
  $logging -cp '/opt/kafka/libs/*' kafka.Kafka "$config"
