import { kafkaMajor } from "./kafka-versions.js";

/**
 * The single-node settings every testkit broker gets, whatever runs it (local JVM or container).
 *
 * @example
 * ```ts
 * testBrokerSettings("3.9.1")["transaction.max.timeout.ms"]; // "900000"
 * ```
 */
export function testBrokerSettings(version: string): Record<string, string> {
  const settings: Record<string, string> = {
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    // The broker default cap; the Kafka connector validates its transaction timeout against it.
    "transaction.max.timeout.ms": "900000",
    // Timed-out transactions are aborted within a second, so timeout tests do not wait a minute.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "auto.create.topics.enable": "false",
    // A broker killed and started again cannot register until the controller expires its old
    // session; the 9 s default would make every crash test wait that long.
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "log.flush.interval.messages": "9223372036854775807",
  };
  if (kafkaMajor(version) >= 4) {
    // 4.x creates the share-group state topic with replication 3 unless told otherwise.
    settings["share.coordinator.state.topic.replication.factor"] = "1";
    settings["share.coordinator.state.topic.min.isr"] = "1";
  }
  return settings;
}

/**
 * Where a local broker listens and keeps its data.
 *
 * @example
 * ```ts
 * const address: BrokerAddress = { host: "127.0.0.1", port: 41234, controllerPort: 41235, logDir: "/tmp/k/data" };
 * ```
 */
export interface BrokerAddress {
  host: string;
  port: number;
  controllerPort: number;
  logDir: string;
  /** A second client listener, SASL_PLAINTEXT with mechanism PLAIN ({@link SASL_PLAIN_USER}). */
  saslPort?: number;
}

/**
 * The one user of a testkit broker's SASL_PLAINTEXT listener (mechanism PLAIN).
 *
 * @example
 * ```ts
 * new Kafka({ brokers, sasl: { mechanism: "plain", ...SASL_PLAIN_USER } });
 * ```
 */
export const SASL_PLAIN_USER = { username: "onceflow", password: "onceflow-secret" } as const;

/**
 * The `server.properties` of a single-node KRaft broker (combined broker + controller) for tests.
 *
 * @example
 * ```ts
 * await writeFile("server.properties", brokerProperties("3.9.1", { host: "127.0.0.1", port: 9092, controllerPort: 9093, logDir: "/tmp/k" }));
 * ```
 */
export function brokerProperties(version: string, address: BrokerAddress): string {
  const { host, port, controllerPort, logDir, saslPort } = address;
  const sasl = saslPort === undefined ? "" : `,SASL_PLAINTEXT://${host}:${saslPort}`;
  const settings: Record<string, string> = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.quorum.voters": `1@${host}:${controllerPort}`,
    listeners: `PLAINTEXT://${host}:${port},CONTROLLER://${host}:${controllerPort}${sasl}`,
    "advertised.listeners": `PLAINTEXT://${host}:${port}${sasl}`,
    "listener.security.protocol.map": `PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT${sasl === "" ? "" : ",SASL_PLAINTEXT:SASL_PLAINTEXT"}`,
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "log.dirs": logDir,
    ...testBrokerSettings(version),
  };
  if (saslPort !== undefined) {
    // Brokers and the controller keep talking PLAINTEXT; only clients of this listener authenticate.
    settings["sasl.enabled.mechanisms"] = "PLAIN";
    settings["listener.name.sasl_plaintext.plain.sasl.jaas.config"] =
      "org.apache.kafka.common.security.plain.PlainLoginModule required " +
      `user_${SASL_PLAIN_USER.username}="${SASL_PLAIN_USER.password}";`;
  }
  return `${Object.entries(settings)
    .map(([key, value]) => `${key}=${value}`)
    .join("\n")}\n`;
}

/**
 * The logging configuration for a broker writing to stdout (which the testkit sends to a file):
 * `log4j.properties` for reload4j (3.x), `log4j2.properties` for log4j2 (4.x).
 *
 * @example
 * ```ts
 * const { fileName, content, systemProperty } = brokerLogging("4.1.1", "/tmp/k");
 * ```
 */
export function brokerLogging(
  version: string,
  dir: string,
): { fileName: string; content: string; systemProperty: string } {
  if (kafkaMajor(version) >= 4) {
    const fileName = "log4j2.properties";
    return {
      fileName,
      systemProperty: `-Dlog4j2.configurationFile=${dir}/${fileName}`,
      content: [
        "status = warn",
        "appender.stdout.type = Console",
        "appender.stdout.name = STDOUT",
        "appender.stdout.layout.type = PatternLayout",
        "appender.stdout.layout.pattern = [%d] %p %m (%c)%n",
        "rootLogger.level = INFO",
        "rootLogger.appenderRef.stdout.ref = STDOUT",
        "logger.state.name = state.change.logger",
        "logger.state.level = WARN",
        "",
      ].join("\n"),
    };
  }
  const fileName = "log4j.properties";
  return {
    fileName,
    systemProperty: `-Dlog4j.configuration=file:${dir}/${fileName}`,
    content: [
      "log4j.rootLogger=INFO, stdout",
      "log4j.appender.stdout=org.apache.log4j.ConsoleAppender",
      "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout",
      "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n",
      "log4j.logger.state.change.logger=WARN",
      "",
    ].join("\n"),
  };
}
