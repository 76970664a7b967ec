import { ConfigurationError } from "@onceflow/core";
import { describe, expect, it } from "vitest";
import { brokerProperties, SASL_PLAIN_USER } from "./broker-properties.js";
import { kafkaArtifacts, resolveKafkaVersion } from "./kafka-versions.js";

describe("resolveKafkaVersion", () => {
  it("defaults to 3.9.1", () => {
    expect(resolveKafkaVersion(undefined, {})).toBe("3.9.1");
  });

  it("takes ONCEFLOW_KAFKA_VERSION, and the option over it", () => {
    expect(resolveKafkaVersion(undefined, { ONCEFLOW_KAFKA_VERSION: "4.2.0" })).toBe("4.2.0");
    expect(resolveKafkaVersion("3.9.0", { ONCEFLOW_KAFKA_VERSION: "4.2.0" })).toBe("3.9.0");
  });

  it("resolves the aliases of the two tested lines", () => {
    expect(resolveKafkaVersion("4", {})).toBe("4.1.1");
    expect(resolveKafkaVersion("4.x", {})).toBe("4.1.1");
    expect(resolveKafkaVersion("3.9", {})).toBe("3.9.1");
  });

  it("refuses what is not a version, naming the setting", () => {
    expect(() => resolveKafkaVersion(undefined, { ONCEFLOW_KAFKA_VERSION: "latest" })).toThrow(
      ConfigurationError,
    );
    expect(() => resolveKafkaVersion(undefined, { ONCEFLOW_KAFKA_VERSION: "latest" })).toThrow(
      /ONCEFLOW_KAFKA_VERSION/,
    );
    expect(() => resolveKafkaVersion("2.8.2", {})).toThrow(/KRaft/);
  });
});

describe("what a broker needs", () => {
  it("3.x logs through reload4j, 4.x through log4j2", () => {
    expect(kafkaArtifacts("3.9.1").map((a) => a.artifactId)).toEqual([
      "kafka_2.13",
      "reload4j",
      "slf4j-reload4j",
    ]);
    expect(kafkaArtifacts("4.1.1").map((a) => a.artifactId)).toEqual([
      "kafka_2.13",
      "log4j-api",
      "log4j-core",
      "log4j-slf4j-impl",
    ]);
  });

  it("the broker configuration has the transaction settings the connector tests rely on", () => {
    const address = { host: "127.0.0.1", port: 1, controllerPort: 2, logDir: "/tmp/x" };
    const v3 = brokerProperties("3.9.1", address);
    expect(v3).toContain("transaction.max.timeout.ms=900000\n");
    expect(v3).toContain("transaction.abort.timed.out.transaction.cleanup.interval.ms=1000\n");
    expect(v3).toContain("advertised.listeners=PLAINTEXT://127.0.0.1:1\n");
    expect(v3).not.toContain("share.coordinator");
    expect(brokerProperties("4.1.1", address)).toContain(
      "share.coordinator.state.topic.replication.factor=1\n",
    );
    expect(v3).not.toContain("SASL");
  });

  it("a SASL port adds a SASL_PLAINTEXT listener with PLAIN and the testkit's one user", () => {
    const address = { host: "127.0.0.1", port: 1, controllerPort: 2, logDir: "/tmp/x", saslPort: 3 };
    const properties = brokerProperties("3.9.1", address);
    expect(properties).toContain(
      "listeners=PLAINTEXT://127.0.0.1:1,CONTROLLER://127.0.0.1:2,SASL_PLAINTEXT://127.0.0.1:3\n",
    );
    expect(properties).toContain(
      "advertised.listeners=PLAINTEXT://127.0.0.1:1,SASL_PLAINTEXT://127.0.0.1:3\n",
    );
    expect(properties).toContain(
      "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT\n",
    );
    expect(properties).toContain("sasl.enabled.mechanisms=PLAIN\n");
    expect(properties).toContain(`user_${SASL_PLAIN_USER.username}="${SASL_PLAIN_USER.password}";\n`);
    expect(properties).toContain("inter.broker.listener.name=PLAINTEXT\n");
  });
});
