import { describe, expect, it } from "vitest";
import { runSeededChaos } from "./chaos-runner.js";
import { runKafkaChaos } from "./kafka-chaos-runner.js";
import { sharedKafkaBrokers as kafkaBrokers } from "./kafka-services.js";

// The short CI configuration of the Kafka → Kafka chaos run against the shared broker (the long one:
// `npm run chaos -- --pipeline kafka-to-kafka`). ONCEFLOW_CHAOS_SEED=<seed> replays its kill schedule.

describe("chaos: Kafka → Kafka under repeated SIGKILL", () => {
  it("commits every input exactly once, in order per key, after 20 random kills", {
    timeout: 150_000,
  }, async () => {
    const report = await runSeededChaos((seed, log) =>
      runKafkaChaos({
        sink: "kafka",
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
