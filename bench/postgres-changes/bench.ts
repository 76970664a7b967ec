/**
 * PostgreSQL change data capture into Kafka: onceflow's PostgresChangesSource → KafkaSink against
 * Debezium's PostgreSQL connector (embedded engine → KafkaProducer, debezium/), on one throwaway
 * PostgreSQL (wal_level=logical) and one broker, one candidate at a time, rounds in rotated order:
 *
 *   (o) onceflow, exactly-once (Kafka transactions, checkpoints every 1000 ms)
 *   (a) onceflow, at-least-once (the same job, plain producer)
 *   (d) Debezium 3.6 PostgreSQL connector (pgoutput), at-least-once (its guarantee)
 *
 * Each candidate gets a new replication slot and an empty topic (3 partitions); a consumer
 * (read_committed) counts what reaches the topic. Once a first row came through, WARMUP rows
 * (default 20,000) are inserted and drained (JIT compilation), then:
 *
 *   throughput  N rows inserted as fast as the server takes them (transactions of 1000 rows,
 *               `insert … select generate_series`); changes/s = N / (arrival of the last of them
 *               in Kafka − start of the inserts). "drain" is how long after the last insert
 *               committed the last change arrived.
 *   lag         a steady write load of RATE rows/s (a transaction every 50 ms) for SECONDS; per row,
 *               arrival in Kafka − the row's clock_timestamp() at insert: p50 / p99 / max.
 *
 * Every inserted id must arrive (onceflow exactly-once: exactly once); duplicates are counted.
 * CPU-s per 100k changes of the candidate's process (Node or the JVM) over the throughput window.
 *
 *   npm run build -w @onceflow/core -w @onceflow/connector-kafka -w @onceflow/connector-postgres
 *   bench/postgres-changes/build.sh     # the Debezium peer, from Maven Central
 *   flock /work/helpers/bench.lock npx tsx bench/postgres-changes/bench.ts --changes 200000 --rounds 2
 *   # --runs o,a,d picks candidates; --rate 2000 --seconds 15 the lag load; --warmup 20000
 *   # ONCEFLOW_KAFKA_BROKERS=… uses that broker instead of starting one
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { createKafkaTopic, type KafkaService, startKafka, startPostgres } from "@onceflow/testkit";
import { Kafka, logLevel } from "kafkajs";
import pg from "pg";
import { cpuSecondsIfAlive } from "../process-cpu.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "../..");

const { values } = parseArgs({
  options: {
    changes: { type: "string", default: "200000" },
    rounds: { type: "string", default: "2" },
    runs: { type: "string", default: "o,a,d" },
    rate: { type: "string", default: "2000" },
    seconds: { type: "string", default: "15" },
    warmup: { type: "string", default: "20000" },
  },
});
const N = Number(values.changes);
const ROUNDS = Number(values.rounds);
const RATE = Number(values.rate);
const SECONDS = Number(values.seconds);
const WARMUP = Number(values.warmup);
const runs = (values.runs ?? "o,a,d").split(",") as Candidate[];

type Candidate = "o" | "a" | "d";
const names: Record<Candidate, string> = {
  o: "onceflow exactly-once",
  a: "onceflow at-least-once",
  d: "Debezium 3.6.1 (embedded)",
};

interface Result {
  readonly candidate: Candidate;
  readonly changesPerSecond: number;
  readonly insertSeconds: number;
  readonly drainSeconds: number;
  readonly cpuPer100k: number | undefined;
  readonly lagP50: number;
  readonly lagP99: number;
  readonly lagMax: number;
  readonly duplicates: number;
}

console.log(
  `load average before: ${loadavg()
    .map((n) => n.toFixed(2))
    .join(" ")}`,
);
const postgres = await startPostgres({ walLevel: "logical", provider: "local", faultInjection: true });
const givenBrokers = process.env.ONCEFLOW_KAFKA_BROKERS;
const kafkaService: KafkaService | undefined =
  givenBrokers !== undefined && givenBrokers !== "" ? undefined : await startKafka();
const brokers = kafkaService === undefined ? (givenBrokers ?? "").split(",") : [...kafkaService.brokers];
const url = postgres.connectionString;
const admin = new pg.Pool({ connectionString: url, max: 2 });
await admin.query(
  `create table bench_events (id bigint primary key, k text not null, payload text not null,
     created_ms bigint not null default (extract(epoch from clock_timestamp()) * 1000)::bigint)`,
);
await admin.query("create publication dbz_publication for table bench_events");
let nextId = 1;

/** Inserts rows `count` ids from `nextId` on, in transactions of at most `perTransaction`. */
async function insertRows(count: number, perTransaction: number): Promise<void> {
  for (let done = 0; done < count; done += perTransaction) {
    const n = Math.min(perTransaction, count - done);
    await admin.query(
      `insert into bench_events (id, k, payload) select g, 'k' || (g % 100), repeat('x', 100) from generate_series($1::bigint, $2::bigint) g`,
      [nextId, nextId + n - 1],
    );
    nextId += n;
  }
}

/** Counts what arrives in `topic`: ids (from the key, both candidates' keys hold the id) and arrival times. */
async function startCounting(topic: string) {
  const kafka = new Kafka({ brokers, clientId: "bench-counter", logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({
    groupId: `bench-${randomBytes(4).toString("hex")}`,
    readUncommitted: false,
  });
  const seen = new Map<number, number>();
  const lags: number[] = [];
  let lagFrom = Number.POSITIVE_INFINITY;
  let lastArrival = 0;
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    eachBatch: async ({ batch }) => {
      const now = Date.now();
      for (const message of batch.messages) {
        const id = Number((message.key?.toString() ?? "").replace(/\D/g, ""));
        if (!Number.isFinite(id)) continue;
        seen.set(id, (seen.get(id) ?? 0) + 1);
        lastArrival = now;
        if (id >= lagFrom && message.value !== null) {
          const created = /"created_ms":"?(\d+)/.exec(message.value.toString())?.[1];
          if (created !== undefined) lags.push(now - Number(created));
        }
      }
    },
  });
  return {
    seen,
    lags,
    lastArrival: () => lastArrival,
    measureLagFrom(id: number) {
      lagFrom = id;
    },
    countRange(from: number, to: number): { arrived: number; duplicates: number } {
      let arrived = 0;
      let duplicates = 0;
      for (let id = from; id < to; id++) {
        const count = seen.get(id) ?? 0;
        if (count > 0) arrived += 1;
        if (count > 1) duplicates += count - 1;
      }
      return { arrived, duplicates };
    },
    stop: () => consumer.disconnect(),
  };
}

function startCandidate(candidate: Candidate, topic: string, slot: string, workDir: string): ChildProcess {
  if (candidate === "d") {
    const peer = join(here, "debezium");
    const classpath = `${join(peer, "target/classes")}:${readFileSync(join(peer, "classpath.txt"), "utf8").trim()}`;
    return spawn(
      "java",
      [
        "-cp",
        classpath,
        "dev.onceflow.bench.DebeziumToKafka",
        postgres.host,
        String(postgres.port),
        postgres.user,
        postgres.database,
        "public.bench_events",
        slot,
        "dbz_publication",
        brokers.join(","),
        topic,
        join(workDir, "offsets.dat"),
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
  }
  return spawn(process.execPath, ["--import", "tsx", join(here, "onceflow-job.ts")], {
    cwd: root,
    env: {
      ...process.env,
      PG_URL: url,
      BROKERS: brokers.join(","),
      TOPIC: topic,
      TABLE: "public.bench_events",
      JOB_ID: slot,
      GUARANTEE: candidate === "o" ? "exactly-once" : "at-least-once",
      CHECKPOINT_MS: "1000",
      CHECKPOINT_DIR: workDir,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
}

async function waitUntil(done: () => boolean, timeoutMs: number, what: string, tick?: () => Promise<void>) {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await tick?.();
    await sleep(20);
  }
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length - 1) * p))] ?? Number.NaN;
}

async function runOnce(candidate: Candidate, round: number): Promise<Result> {
  const tag = `${candidate}${round}_${randomBytes(3).toString("hex")}`;
  const topic = `pgcdc-${tag}`;
  const slot = `bench_${tag}`;
  const workDir = await mkdtemp(join(tmpdir(), "pgcdc-bench-"));
  await createKafkaTopic(brokers, topic, { partitions: 3 });
  // Debezium reuses an existing slot; onceflow creates its own (named after the job) at first start.
  if (candidate === "d")
    await admin.query("select pg_create_logical_replication_slot($1, 'pgoutput')", [slot]);
  const counter = await startCounting(topic);
  const child = startCandidate(candidate, topic, slot, workDir);
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-20_000);
  });
  try {
    // Warm-up: a row every 300 ms until one came through (the slot exists and the pipeline runs).
    let lastWarm = 0;
    await waitUntil(
      () => counter.seen.size > 0,
      180_000,
      `${names[candidate]} to deliver a first change\n${output}`,
      async () => {
        if (child.exitCode !== null) throw new Error(`${names[candidate]} exited\n${output}`);
        if (Date.now() - lastWarm > 300) {
          lastWarm = Date.now();
          await insertRows(1, 1);
        }
      },
    );
    // Warm-up load, drained before measuring: the JVM's JIT and V8's compile the hot paths.
    const warmFrom = nextId;
    await insertRows(WARMUP, 1000);
    await waitUntil(
      () => counter.countRange(warmFrom, warmFrom + WARMUP).arrived === WARMUP,
      600_000,
      `${WARMUP} warm-up changes`,
    );
    await sleep(1500);

    // Throughput.
    const from = nextId;
    const cpuBefore = cpuSecondsIfAlive(child.pid);
    const began = Date.now();
    await insertRows(N, 1000);
    const inserted = Date.now();
    await waitUntil(() => counter.countRange(from, from + N).arrived === N, 600_000, `${N} changes`);
    const last = counter.lastArrival();
    const cpuAfter = cpuSecondsIfAlive(child.pid);
    const throughput = counter.countRange(from, from + N);

    // Lag under a steady load.
    await sleep(1000);
    const lagStart = nextId;
    counter.measureLagFrom(lagStart);
    const perTick = Math.max(1, Math.round(RATE / 20));
    const loadEnds = Date.now() + SECONDS * 1000;
    for (let tick = Date.now(); tick < loadEnds; tick += 50) {
      await insertRows(perTick, perTick);
      const wait = tick + 50 - Date.now();
      if (wait > 0) await sleep(wait);
    }
    const lagEnd = nextId;
    await waitUntil(
      () => counter.countRange(lagStart, lagEnd).arrived === lagEnd - lagStart,
      120_000,
      "the lag rows",
    );
    const lags = [...counter.lags].sort((a, b) => a - b);
    const duplicates = throughput.duplicates + counter.countRange(lagStart, lagEnd).duplicates;
    if (candidate === "o" && duplicates > 0)
      throw new Error(`onceflow exactly-once delivered ${duplicates} duplicates`);
    return {
      candidate,
      changesPerSecond: N / ((last - began) / 1000),
      insertSeconds: (inserted - began) / 1000,
      drainSeconds: Math.max(0, (last - inserted) / 1000),
      cpuPer100k:
        cpuBefore === undefined || cpuAfter === undefined
          ? undefined
          : ((cpuAfter - cpuBefore) / N) * 100_000,
      lagP50: percentile(lags, 0.5),
      lagP99: percentile(lags, 0.99),
      lagMax: lags[lags.length - 1] ?? Number.NaN,
      duplicates,
    };
  } finally {
    child.kill("SIGKILL");
    await new Promise((resolve) =>
      child.exitCode !== null || child.signalCode !== null ? resolve(undefined) : child.once("exit", resolve),
    );
    await counter.stop();
    for (let attempt = 0; attempt < 50; attempt++) {
      const dropped = await admin
        .query(
          "select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name like $1",
          [`%${tag}%`],
        )
        .then(
          () => true,
          () => false,
        );
      if (dropped) break;
      await sleep(200);
    }
    await rm(workDir, { recursive: true, force: true });
  }
}

const results: Result[] = [];
try {
  for (let round = 0; round < ROUNDS; round++) {
    const order = runs.map((_, i) => runs[(i + round) % runs.length] as Candidate);
    for (const candidate of order) {
      const result = await runOnce(candidate, round);
      results.push(result);
      console.log(
        `round ${round + 1} ${names[candidate]}: ${Math.round(result.changesPerSecond).toLocaleString("en")} changes/s (insert ${result.insertSeconds.toFixed(1)} s, drain ${result.drainSeconds.toFixed(1)} s, CPU ${result.cpuPer100k?.toFixed(2) ?? "?"} s/100k), lag p50 ${result.lagP50} ms p99 ${result.lagP99} ms max ${result.lagMax} ms, duplicates ${result.duplicates}`,
      );
    }
  }
} finally {
  await admin.end();
  await kafkaService?.stop();
  await postgres.stop();
}

const median = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};
const baseline = median(results.filter((r) => r.candidate === "d").map((r) => r.changesPerSecond));
console.log(
  `\n${N.toLocaleString("en")} changes per throughput run, ${ROUNDS} rounds, lag load ${RATE} rows/s for ${SECONDS} s (medians)`,
);
console.log(
  "| candidate | changes/s | / Debezium | CPU-s per 100k | lag p50 | lag p99 | lag max | duplicates |",
);
console.log("|---|---|---|---|---|---|---|---|");
for (const candidate of runs) {
  const mine = results.filter((r) => r.candidate === candidate);
  const rate = median(mine.map((r) => r.changesPerSecond));
  const cpu = mine.map((r) => r.cpuPer100k).filter((x): x is number => x !== undefined);
  console.log(
    `| ${names[candidate]} | ${Math.round(rate).toLocaleString("en")} | ${Number.isFinite(baseline) ? (rate / baseline).toFixed(2) : "—"} | ${cpu.length > 0 ? median(cpu).toFixed(2) : "—"} | ${median(mine.map((r) => r.lagP50))} ms | ${median(mine.map((r) => r.lagP99))} ms | ${median(mine.map((r) => r.lagMax))} ms | ${mine.reduce((sum, r) => sum + r.duplicates, 0)} |`,
  );
}
console.log(
  `load average after: ${loadavg()
    .map((n) => n.toFixed(2))
    .join(" ")}`,
);
