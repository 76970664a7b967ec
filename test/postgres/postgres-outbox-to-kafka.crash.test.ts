import { setTimeout as sleep } from "node:timers/promises";
import { createKafkaTopic, readCommittedKafkaRecords } from "@onceflow/testkit";
import { sharedKafka, usePrivatePostgres } from "@onceflow/testkit/vitest";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { type FixtureRun, runFixture } from "./crash-helpers.js";

/**
 * The transactional outbox exactly once under SIGKILL: an application writes outbox rows in its
 * transactions; a PostgresChangesSource → exactly-once KafkaSink job, killed again and again,
 * must put every outbox row in Kafka exactly once (as a read_committed consumer sees it), in
 * commit order per key. The outbox table itself is the independent history.
 */

const KILLS = 5;

async function query<R extends pg.QueryResultRow>(
  url: string,
  text: string,
  values: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/** Transactions of 1–4 outbox rows for random aggregates until `stop()`. */
function startApplication(url: string): { stop(): Promise<void> } {
  let running = true;
  const done = (async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      while (running) {
        await client.query("begin");
        const rows = 1 + Math.floor(Math.random() * 4);
        for (let i = 0; i < rows; i++) {
          await client.query("insert into outbox (aggregate_id, payload) values ($1, $2)", [
            `order-${Math.floor(Math.random() * 20)}`,
            JSON.stringify({ at: Date.now(), n: i }),
          ]);
        }
        await client.query("commit");
        await sleep(5);
      }
    } finally {
      await client.end();
    }
  })();
  return {
    async stop() {
      running = false;
      await done;
    },
  };
}

async function kill(run: FixtureRun): Promise<void> {
  run.child.kill("SIGKILL");
  await run.exited;
}

describe("PostgreSQL outbox → Kafka, exactly once across SIGKILLs", () => {
  const postgres = usePrivatePostgres({ walLevel: "logical", provider: "local" });

  it(`puts every outbox row in Kafka once, in commit order per key, through ${KILLS} kills`, async () => {
    const url = postgres().connectionString;
    const brokers = [...sharedKafka().brokers];
    const topic = `outbox-${Date.now().toString(36)}`;
    await createKafkaTopic(brokers, topic, { partitions: 3 });
    await query(
      url,
      "create table outbox (id bigserial primary key, aggregate_id text not null, payload jsonb not null)",
    );
    const env = {
      PG_URL: url,
      BROKERS: brokers.join(","),
      TOPIC: topic,
      JOB_ID: "outbox-relay",
      OUTBOX: "outbox",
    };

    let run = runFixture(env, "outbox-to-kafka.ts");
    try {
      await run.waitFor("ONCEFLOW-COMMITTED", 120_000);
      const application = startApplication(url);
      for (let k = 0; k < KILLS; k++) {
        await sleep(400 + Math.floor(Math.random() * 1000));
        await kill(run);
        run = runFixture(env, "outbox-to-kafka.ts");
        await run.waitFor("ONCEFLOW-COMMITTED", 120_000);
      }
      await application.stop();
      const outbox = await query<{ id: string; aggregate_id: string }>(
        url,
        "select id::text, aggregate_id from outbox order by id",
      );
      expect(outbox.length).toBeGreaterThan(0);

      let records = await readCommittedKafkaRecords(brokers, topic, { isolation: "read_committed" });
      for (let i = 0; i < 300 && records.length < outbox.length; i++) {
        await sleep(200);
        records = await readCommittedKafkaRecords(brokers, topic, { isolation: "read_committed" });
      }
      // Several more checkpoint intervals: a duplicate written late would show up in them.
      await sleep(1500);
      await kill(run);
      records = await readCommittedKafkaRecords(brokers, topic, { isolation: "read_committed" });

      const delivered = records.map((record) => (JSON.parse(record.value ?? "{}") as { id: string }).id);
      expect(new Set(delivered).size, "no outbox row twice").toBe(delivered.length);
      expect([...delivered].sort()).toEqual(outbox.map((row) => row.id).sort());
      // Per key, Kafka's order (offsets within the key's partition) is the commit order (outbox ids).
      const byKey = new Map<string, bigint[]>();
      for (const record of [...records].sort(
        (a, b) => a.partition - b.partition || Number(BigInt(a.offset) - BigInt(b.offset)),
      )) {
        const id = BigInt((JSON.parse(record.value ?? "{}") as { id: string }).id);
        byKey.set(record.key ?? "", [...(byKey.get(record.key ?? "") ?? []), id]);
      }
      for (const [key, ids] of byKey) {
        expect(ids, `order of ${key}`).toEqual([...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
      }
    } finally {
      if (run.child.exitCode === null && run.child.signalCode === null) await kill(run);
    }
  });
});
