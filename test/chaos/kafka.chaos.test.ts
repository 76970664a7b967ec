import { describe, expect, it } from "vitest";
import { runSeededChaos } from "./chaos-runner.js";
import { runKafkaChaos } from "./kafka-chaos-runner.js";
import { sharedKafkaBrokers as kafkaBrokers, sharedPostgresUrl as postgresUrl } from "./kafka-services.js";

// The short CI configuration of the Kafka → Kafka and Kafka → PostgreSQL chaos runs against the
// shared broker and PostgreSQL (the long ones: `npm run chaos -- --pipeline kafka-to-kafka|kafka-to-postgres`).
// ONCEFLOW_CHAOS_SEED=<seed> replays a kill schedule.

describe.each([
  { title: "Kafka → Kafka", sink: "kafka" },
  { title: "Kafka → PostgreSQL", sink: "postgres" },
] as const)("chaos: $title under repeated SIGKILL", ({ sink }) => {
  it("commits every input exactly once, in order per key, after 20 random kills", {
    timeout: 150_000,
  }, async () => {
    const report = await runSeededChaos((seed, log) =>
      runKafkaChaos({
        sink,
        ...(sink === "postgres" ? { postgresUrl: postgresUrl() } : {}),
        seed,
        kills: 20,
        records: 3000,
        recordsPerSecond: 150,
        minKillDelayMs: 400,
        maxKillDelayMs: 2600,
        brokers: kafkaBrokers(),
        log,
      }),
    );
    expect(report.kills).toBe(20);
    expect(report.committed).toBe(3000);
  });
});
