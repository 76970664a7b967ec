import { sharedKafka, usePrivatePostgres } from "@onceflow/testkit/vitest";
import { describe, expect, it } from "vitest";
import { runSeededChaos } from "./chaos-runner.js";
import { type PostgresChangesPipeline, runPostgresChangesChaos } from "./postgres-changes-chaos-runner.js";

// The short CI configuration of the change data capture chaos runs, each on a throwaway PostgreSQL
// with wal_level=logical that the run crashes (the long ones: `npm run chaos -- --pipeline
// outbox-to-kafka|changes-to-postgres`). ONCEFLOW_CHAOS_SEED=<seed> replays a schedule.

describe.each([
  { title: "PostgreSQL outbox → Kafka", pipeline: "outbox-to-kafka" },
  { title: "PostgreSQL changes → PostgreSQL", pipeline: "changes-to-postgres" },
] as const satisfies ReadonlyArray<{ title: string; pipeline: PostgresChangesPipeline }>)(
  "chaos: $title under SIGKILLs, PostgreSQL crashes and zombies",
  ({ pipeline }) => {
    const postgres = usePrivatePostgres({ walLevel: "logical", provider: "local" });

    it("puts every committed change in the output once, in commit order per key", {
      timeout: 300_000,
    }, async () => {
      const report = await runSeededChaos((seed, log) =>
        runPostgresChangesChaos({
          pipeline,
          seed,
          kills: 12,
          restarts: 1,
          zombies: 1,
          postgres: postgres(),
          ...(pipeline === "outbox-to-kafka" ? { brokers: [...sharedKafka().brokers] } : {}),
          maxKillDelayMs: 2000,
          log,
        }),
      );
      expect(report.violations).toEqual([]);
      expect(report.kills).toBe(12);
      expect(report.changes).toBeGreaterThan(0);
    });
  },
);
