import { usePrivateKafka } from "@onceflow/testkit/vitest";
import { describe, expect, it } from "vitest";
import { runSeededChaos } from "./chaos-runner.js";
import { runKafkaChaos } from "./kafka-chaos-runner.js";

// Kafka → Kafka chaos with the broker SIGKILLed and restarted halfway (a private broker: the shared
// one is never killed) during one of the runs between random SIGKILLs of the job. The run restarts itself in-process
// while the broker is away (fixed-delay restarts), as it would in production.
const kafka = usePrivateKafka();

describe("chaos: Kafka → Kafka with a broker crash during a run", () => {
  it("commits every input exactly once, in order per key, across 6 job kills and one broker kill", {
    timeout: 150_000,
  }, async () => {
    const report = await runSeededChaos((seed, log) =>
      runKafkaChaos({
        sink: "kafka",
        seed,
        kills: 6,
        records: 1000,
        recordsPerSecond: 150,
        // Longer runs than the plain chaos: most of them get past startup on a machine busy with a private service.
        minKillDelayMs: 1500,
        maxKillDelayMs: 3500,
        brokers: [...kafka().brokers],
        fault: {
          kill: 3,
          inject: async () => {
            await kafka().kill();
            await new Promise((resolve) => setTimeout(resolve, 1000));
            await kafka().start();
          },
        },
        log,
      }),
    );
    expect(report.kills).toBe(6);
    expect(report.committed).toBe(1000);
  });
});
