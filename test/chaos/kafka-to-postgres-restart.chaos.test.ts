import { usePrivatePostgres } from "@onceflow/testkit/vitest";
import { describe, expect, it } from "vitest";
import { runSeededChaos } from "./chaos-runner.js";
import { runKafkaChaos } from "./kafka-chaos-runner.js";
import { sharedKafkaBrokers as kafkaBrokers } from "./kafka-services.js";

// Kafka → PostgreSQL chaos with PostgreSQL crashed (`pg_ctl -m immediate`, recovery on start)
// during one of the runs between random SIGKILLs of the job: prepared transactions survive the crash and are
// committed or rolled back by the next run. A private PostgreSQL: the shared one is never restarted.
const postgres = usePrivatePostgres();

describe("chaos: Kafka → PostgreSQL with a PostgreSQL crash during a run", () => {
  it("commits every input exactly once, in order per key, across 8 job kills and one immediate restart", {
    timeout: 150_000,
  }, async () => {
    const report = await runSeededChaos((seed, log) =>
      runKafkaChaos({
        sink: "postgres",
        seed,
        kills: 8,
        records: 1500,
        recordsPerSecond: 150,
        // Longer runs than the plain chaos: most of them get past startup on a machine busy with a private service.
        minKillDelayMs: 1500,
        maxKillDelayMs: 3500,
        brokers: kafkaBrokers(),
        postgresUrl: postgres().connectionString,
        fault: { kill: 5, inject: () => postgres().restart({ immediate: true }) },
        log,
      }),
    );
    expect(report.kills).toBe(8);
    expect(report.committed).toBe(1500);
  });
});
