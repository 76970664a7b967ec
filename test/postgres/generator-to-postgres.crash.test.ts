import { createKafkaTopic } from "@onceflow/testkit";
import { Kafka, logLevel } from "kafkajs";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runFixture } from "./crash-helpers.js";

/**
 * Exactly-once under SIGKILL: a generator → PostgresSink job is killed at each phase of the
 * protocol, then run again to completion; every input must be in the table exactly once, and no
 * prepared transaction or staging table of the sink may be left.
 */

const preparedUrl = (() => {
  const url = process.env.ONCEFLOW_POSTGRES_URL;
  if (!url)
    throw new Error("ONCEFLOW_POSTGRES_URL is not set (a PostgreSQL with max_prepared_transactions > 0)");
  return url;
})();
const stagingUrl = process.env.ONCEFLOW_POSTGRES_NO2PC_URL ?? "postgresql://postgres@127.0.0.1:5432/test";
const COUNT = 3000;

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

const phases = ["mid-write", "before-precommit", "after-precommit", "before-commit", "after-commit"] as const;
const modes = [
  { mode: "prepared", url: preparedUrl },
  { mode: "staging", url: stagingUrl },
] as const;
const tag = `${process.pid}_${Date.now().toString(36)}`;
const tables: Array<{ url: string; table: string }> = [];

afterAll(async () => {
  for (const { url, table } of tables) await query(url, `DROP TABLE IF EXISTS ${table}`);
});

async function crashThenRerun(
  mode: "prepared" | "staging",
  url: string,
  phase: (typeof phases)[number],
  source: Record<string, string>,
): Promise<void> {
  const variant = `${source.SOURCE === "kafka" ? "k" : ""}${source.BACKGROUND_COMMITS === "1" ? "bg" : ""}`;
  const name = `${variant}crash_${mode}_${phase.replace(/-/g, "_")}_${tag}`;
  const table = name;
  const jobId = name.replace(/_/g, "-");
  tables.push({ url, table });
  await query(url, `CREATE TABLE ${table} (id bigint NOT NULL, payload text NOT NULL)`);
  const env = { PG_URL: url, TABLE: table, MODE: mode, JOB_ID: jobId, COUNT: String(COUNT), ...source };

  const crashed = runFixture({ ...env, CRASH_AT: phase, CRASH_CHECKPOINT: "2" });
  const line = await crashed.waitFor("ONCEFLOW-PHASE");
  expect(line).toContain(phase);
  crashed.child.kill("SIGKILL");
  expect((await crashed.exited).signal).toBe("SIGKILL");

  const rerun = runFixture(env);
  const done = await rerun.waitFor("ONCEFLOW-DONE", 120_000).catch((error: unknown) => {
    throw new Error(`${String(error)}\n${rerun.output()}`);
  });
  expect((await rerun.exited).code, rerun.output()).toBe(0);
  expect(JSON.parse(done.slice("ONCEFLOW-DONE ".length)).restoredCheckpointId).toBeGreaterThanOrEqual(1);

  // A fresh connection reads the table: every input exactly once.
  const counts = await query<{ total: string; distinct_ids: string; min: string; max: string }>(
    url,
    `SELECT count(*) AS total, count(DISTINCT id) AS distinct_ids, min(id) AS min, max(id) AS max FROM ${table}`,
  );
  expect(counts[0]).toEqual({
    total: String(COUNT),
    distinct_ids: String(COUNT),
    min: "0",
    max: String(COUNT - 1),
  });
  const sinkId = `${jobId}.out`.replace(/[^A-Za-z0-9_.:]/g, "_");
  const leftovers = await query(url, "SELECT gid FROM pg_prepared_xacts WHERE gid LIKE $1", [`${sinkId}%`]);
  expect(leftovers).toEqual([]);
  const staged = await query<{ n: string }>(
    url,
    "SELECT count(*) AS n FROM onceflow_sink_epochs e JOIN pg_class c ON c.relname LIKE 'onceflow_stage_%' WHERE e.sink_id LIKE $1 AND c.relname LIKE 'onceflow_stage_' || left(encode(sha256(convert_to(e.sink_id, 'UTF8')), 'hex'), 12) || '%'",
    [`${sinkId}%`],
  );
  expect(staged[0]?.n).toBe("0");
}

describe.each(modes)("generator → PostgresSink ($mode mode) killed with SIGKILL", ({ mode, url }) => {
  beforeAll(async () => {
    await query(url, "SELECT 1");
  });

  it.each(phases)("at %s, then rerun: every input exactly once, nothing left prepared or staged", (phase) =>
    crashThenRerun(mode, url, phase, {}),
  );
});

describe("generator → PostgresSink (staging mode, backgroundCommits) killed with SIGKILL", () => {
  // The commit of checkpoint N runs while N + 1 is written: a kill in it must still recover N.
  it.each(phases)("at %s, then rerun: every input exactly once, nothing left staged", (phase) =>
    crashThenRerun("staging", stagingUrl, phase, { BACKGROUND_COMMITS: "1" }),
  );
});

describe("Kafka → PostgresSink (prepared mode) killed with SIGKILL", () => {
  const brokers = (process.env.ONCEFLOW_KAFKA_BROKERS ?? "").split(",").filter(Boolean);

  // The input is written once, before the job starts: the job reads it from the earliest offset.
  async function inputTopic(phase: string): Promise<string> {
    if (brokers.length === 0)
      throw new Error("ONCEFLOW_KAFKA_BROKERS is not set (the testkit's global setup sets it)");
    const topic = `crash-input-${phase}-${tag}`.replace(/_/g, "-");
    await createKafkaTopic(brokers, topic, { partitions: 3 });
    const producer = new Kafka({ brokers, clientId: "crash-input", logLevel: logLevel.NOTHING }).producer();
    await producer.connect();
    try {
      const messages = Array.from({ length: COUNT }, (_, id) => ({
        key: String(id),
        value: JSON.stringify({ id, payload: `row-${id}-${"x".repeat(40)}` }),
      }));
      await producer.send({ topic, messages });
    } finally {
      await producer.disconnect();
    }
    return topic;
  }

  it.each(phases)("at %s, then rerun: every input exactly once, nothing left prepared", async (phase) => {
    const topic = await inputTopic(phase);
    await crashThenRerun("prepared", preparedUrl, phase, {
      SOURCE: "kafka",
      BROKERS: brokers.join(","),
      TOPIC: topic,
      SLOW_MS: "20",
    });
  });
});
