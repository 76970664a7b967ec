import { setTimeout as sleep } from "node:timers/promises";
import { createKafkaTopic, type PostgresService, readCommittedKafkaRecords } from "@onceflow/testkit";
import { type FixtureRun, runFixture } from "../postgres/crash-helpers.js";
import { seededRandom } from "./chaos-runner.js";
import {
  createOrdersWithHistory,
  createOutbox,
  query,
  startOrdersWriter,
  startOutboxApplication,
  type TableWriter,
} from "./postgres-changes-input.js";

// Seeded chaos for change data capture: a PostgresChangesSource job (the fixtures of the crash
// tests: outbox → exactly-once KafkaSink, or orders → PostgresSink) runs as a child process while
// an application writes the captured table. Events, in a seeded order:
//
// - kill: SIGKILL of the job process at a seeded moment (startup, slot handover, mid-checkpoint),
//   then a new process restores the last checkpoint;
// - restart: PostgreSQL stopped with `pg_ctl -m immediate` (a crash) and started again; the job
//   fails on its lost connections and restarts in its process;
// - zombie: the job process is SIGSTOPped, a new one takes over (the server ends the stopped one's
//   replication connection after wal_sender_timeout), then the old one is resumed and runs next to
//   the new one for a while — its commits must be fenced — before it is killed.
//
// Then the writer stops, a last process catches up, and an independent reader compares the output
// with the captured table's history: every committed change once, in commit order per key.

export type PostgresChangesPipeline = "outbox-to-kafka" | "changes-to-postgres";

export interface PostgresChangesChaosOptions {
  readonly pipeline: PostgresChangesPipeline;
  readonly seed: number;
  readonly kills: number;
  /** PostgreSQL crash restarts (default kills / 20, at least 1). */
  readonly restarts?: number;
  /** Zombies (default kills / 20, at least 1). */
  readonly zombies?: number;
  /** A throwaway server with wal_level=logical and prepared transactions, which the run may crash. */
  readonly postgres: PostgresService;
  /** The broker, for `outbox-to-kafka`. */
  readonly brokers?: readonly string[];
  /** Longest time from a process start to its kill, ms (default 2500; the shortest is 0). */
  readonly maxKillDelayMs?: number;
  /** How long a resumed zombie runs next to its successor, at most, ms (default 3000). */
  readonly maxZombieMs?: number;
  readonly log?: (line: string) => void;
}

export interface PostgresChangesChaosReport {
  readonly pipeline: PostgresChangesPipeline;
  readonly seed: number;
  readonly kills: number;
  readonly restarts: number;
  readonly zombies: number;
  /** Kills that landed before the killed process committed anything. */
  readonly killsBeforeFirstCommit: number;
  /** Processes that ended on their own (their restart attempts used up), replaced by the runner. */
  readonly selfExits: number;
  readonly transactions: number;
  /** Changes in the captured table's history (outbox rows, or order changes). */
  readonly changes: number;
  readonly durationMs: number;
  readonly violations: readonly string[];
}

type ChaosEvent = "kill" | "restart" | "zombie";

function schedule(random: () => number, kills: number, restarts: number, zombies: number): ChaosEvent[] {
  const events: ChaosEvent[] = [
    ...Array<ChaosEvent>(kills).fill("kill"),
    ...Array<ChaosEvent>(restarts).fill("restart"),
    ...Array<ChaosEvent>(zombies).fill("zombie"),
  ];
  for (let i = events.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [events[i], events[j]] = [events[j] as ChaosEvent, events[i] as ChaosEvent];
  }
  return events;
}

function isRunning(run: FixtureRun): boolean {
  return run.child.exitCode === null && run.child.signalCode === null;
}

async function kill(run: FixtureRun): Promise<void> {
  if (isRunning(run)) run.child.kill("SIGKILL");
  await run.exited;
}

/** Resolves with whether `prefix` was printed within `ms`. */
async function printedWithin(run: FixtureRun, prefix: string, ms: number): Promise<boolean> {
  return run.waitFor(prefix, ms).then(
    () => true,
    () => false,
  );
}

/** Runs the chaos and returns what the independent reader found (`violations` empty when exactly once). */
export async function runPostgresChangesChaos(
  options: PostgresChangesChaosOptions,
): Promise<PostgresChangesChaosReport> {
  const began = Date.now();
  const log = options.log ?? (() => undefined);
  const random = seededRandom(options.seed);
  const restarts = options.restarts ?? Math.max(1, Math.round(options.kills / 20));
  const zombies = options.zombies ?? Math.max(1, Math.round(options.kills / 20));
  const maxKillDelayMs = options.maxKillDelayMs ?? 2500;
  const maxZombieMs = options.maxZombieMs ?? 3000;
  const url = options.postgres.connectionString;
  const suffix = options.seed.toString(36);

  // A stopped zombie's replication connection is ended after this, freeing the slot for its successor.
  await query(url, "alter system set wal_sender_timeout = '2s'");
  await query(url, "select pg_reload_conf()");

  let env: Record<string, string>;
  let fixture: string;
  let startWriter: () => TableWriter;
  if (options.pipeline === "outbox-to-kafka") {
    const brokers = options.brokers ?? [];
    if (brokers.length === 0) throw new Error("outbox-to-kafka needs brokers");
    const topic = `cdc-chaos-${suffix}-${Date.now().toString(36)}`;
    await createKafkaTopic([...brokers], topic, { partitions: 3 });
    await createOutbox(url);
    env = {
      PG_URL: url,
      BROKERS: brokers.join(","),
      TOPIC: topic,
      JOB_ID: `outbox-${suffix}`,
      OUTBOX: "outbox",
    };
    fixture = "outbox-to-kafka.ts";
    startWriter = () => startOutboxApplication(url, random);
  } else {
    await createOrdersWithHistory(url);
    await query(
      url,
      "create table order_changes (xid bigint, commit_lsn text, change_index int, kind text, id int, v int)",
    );
    env = {
      PG_URL: url,
      JOB_ID: `orders-${suffix}`,
      ORDERS: "public.orders",
      CHANGES_TABLE: "order_changes",
    };
    fixture = "changes-to-postgres.ts";
    startWriter = () => startOrdersWriter(url, random);
  }

  let selfExits = 0;
  let killsBeforeFirstCommit = 0;
  const start = () => runFixture(env, fixture);
  let run = start();
  // The slot exists and a checkpoint completed: from here on no committed change may be missed.
  await run.waitFor("ONCEFLOW-COMMITTED", 180_000);
  const writer = startWriter();
  const events = schedule(random, options.kills, restarts, zombies);
  const done = { kill: 0, restart: 0, zombie: 0 };
  try {
    for (const [index, event] of events.entries()) {
      if (!isRunning(run)) {
        selfExits += 1;
        log(`process ended on its own before event ${index}: ${run.output().slice(-600)}`);
        run = start();
      }
      if (event === "kill") {
        // Every fourth kill waits for a commit first, so the run also makes progress on a slow machine.
        const committed = index % 4 === 0 ? await printedWithin(run, "ONCEFLOW-COMMITTED", 120_000) : false;
        const delay = Math.floor(random() * maxKillDelayMs);
        const committedMeanwhile = printedWithin(run, "ONCEFLOW-COMMITTED", delay);
        await sleep(delay);
        if (!committed && !(await committedMeanwhile)) killsBeforeFirstCommit += 1;
        await kill(run);
        run = start();
      } else if (event === "restart") {
        await sleep(Math.floor(random() * maxKillDelayMs));
        await options.postgres.restart({ immediate: true });
        await printedWithin(run, "ONCEFLOW-COMMITTED", 120_000);
      } else {
        await printedWithin(run, "ONCEFLOW-COMMITTED", 120_000);
        const zombie = run;
        zombie.child.kill("SIGSTOP");
        run = start();
        const tookOver = await printedWithin(run, "ONCEFLOW-COMMITTED", 120_000);
        zombie.child.kill("SIGCONT");
        await sleep(Math.floor(random() * maxZombieMs));
        await kill(zombie);
        if (!tookOver) log(`zombie ${done.zombie}: the successor committed nothing within 120 s`);
      }
      done[event] += 1;
      if ((index + 1) % 10 === 0 || index === events.length - 1)
        log(
          `${index + 1}/${events.length} events (${done.kill} kills, ${done.restart} restarts, ${done.zombie} zombies)`,
        );
    }
    const transactions = await writer.stop();
    if (!isRunning(run)) {
      selfExits += 1;
      run = start();
    }
    const verify =
      options.pipeline === "outbox-to-kafka"
        ? () => verifyOutbox(url, options.brokers ?? [], env.TOPIC as string)
        : () => verifyOrderChanges(url);
    // The last process catches up; then several more checkpoint intervals, so a late duplicate shows.
    let result = await verify();
    // Gives up on what is missing only after a minute without progress: a slow machine still finishes.
    for (
      let lastProgress = Date.now(), missing = result.missing;
      result.missing > 0 && Date.now() - lastProgress < 60_000;
    ) {
      if (!isRunning(run)) {
        selfExits += 1;
        run = start();
      }
      await sleep(300);
      result = await verify();
      if (result.missing < missing) {
        missing = result.missing;
        lastProgress = Date.now();
      }
    }
    await sleep(1500);
    await kill(run);
    result = await verify();
    return {
      pipeline: options.pipeline,
      seed: options.seed,
      kills: done.kill,
      restarts: done.restart,
      zombies: done.zombie,
      killsBeforeFirstCommit,
      selfExits,
      transactions,
      changes: result.changes,
      durationMs: Date.now() - began,
      violations: result.violations,
    };
  } finally {
    await writer.stop();
    await kill(run);
  }
}

interface Verification {
  /** Changes in the history. */
  readonly changes: number;
  /** History entries not (yet) in the output. */
  readonly missing: number;
  readonly violations: string[];
}

function describeList(label: string, items: readonly string[]): string {
  return `${label} (${items.length}): ${items.slice(0, 10).join(", ")}${items.length > 10 ? ", …" : ""}`;
}

/** Every outbox row once in the topic (read_committed), and per key in commit (id) order. */
async function verifyOutbox(url: string, brokers: readonly string[], topic: string): Promise<Verification> {
  const outbox = await query<{ id: string; aggregate_id: string }>(
    url,
    "select id::text, aggregate_id from outbox order by id",
  );
  const records = await readCommittedKafkaRecords(brokers, topic, { isolation: "read_committed" });
  const violations: string[] = [];
  const delivered = new Map<string, number>();
  const byKey = new Map<string, bigint[]>();
  for (const record of [...records].sort(
    (a, b) => a.partition - b.partition || Number(BigInt(a.offset) - BigInt(b.offset)),
  )) {
    const id = (JSON.parse(record.value ?? "{}") as { id: string }).id;
    delivered.set(id, (delivered.get(id) ?? 0) + 1);
    byKey.set(record.key ?? "", [...(byKey.get(record.key ?? "") ?? []), BigInt(id)]);
  }
  const expected = new Map(outbox.map((row) => [row.id, row.aggregate_id]));
  const missing = outbox.filter((row) => !delivered.has(row.id)).map((row) => row.id);
  const twice = [...delivered].filter(([, count]) => count > 1).map(([id, count]) => `${id}×${count}`);
  const unknown = [...delivered.keys()].filter((id) => !expected.has(id));
  if (missing.length > 0) violations.push(describeList("outbox rows missing from Kafka", missing));
  if (twice.length > 0) violations.push(describeList("outbox rows in Kafka more than once", twice));
  if (unknown.length > 0) violations.push(describeList("records of rows not in the outbox", unknown));
  for (const [key, ids] of byKey) {
    const outOfOrder = ids.findIndex((id, i) => i > 0 && id <= (ids[i - 1] as bigint));
    if (outOfOrder > 0)
      violations.push(`key ${key}: ${ids[outOfOrder]} after ${ids[outOfOrder - 1]}: not in commit order`);
    for (const id of ids) {
      const owner = expected.get(String(id));
      if (owner !== undefined && owner !== key)
        violations.push(`outbox row ${id} of ${owner} under key ${key}`);
    }
  }
  return { changes: outbox.length, missing: missing.length, violations };
}

/** Every change of `orders` (its trigger history) once in `order_changes`, per id in commit order. */
async function verifyOrderChanges(url: string): Promise<Verification> {
  const history = await query<{ xid: string; op: string; id: number; v: number | null }>(
    url,
    "select xid::text, op, id, v from orders_history order by seq",
  );
  const changes = await query<{
    xid: string;
    kind: string;
    id: number;
    v: number | null;
    commit_lsn: string;
    change_index: number;
  }>(
    url,
    "select xid::text, kind, id, v, commit_lsn, change_index from order_changes order by commit_lsn::pg_lsn, change_index",
  );
  const violations: string[] = [];
  const text = (row: { xid: string; id: number; v: number | null }, kind: string) =>
    `${row.xid}|${kind}|${row.id}|${row.v}`;
  const counts = new Map<string, number>();
  for (const row of changes) counts.set(text(row, row.kind), (counts.get(text(row, row.kind)) ?? 0) + 1);
  const positions = changes.map((row) => `${row.commit_lsn}#${row.change_index}`);
  const twicePositions = positions.filter((position, i) => positions.indexOf(position) !== i);
  if (twicePositions.length > 0)
    violations.push(describeList("changes written more than once", twicePositions));
  const expected = new Map<string, number>();
  for (const row of history) expected.set(text(row, row.op), (expected.get(text(row, row.op)) ?? 0) + 1);
  const missing = [...expected].filter(([key, count]) => (counts.get(key) ?? 0) < count).map(([key]) => key);
  const extra = [...counts].filter(([key, count]) => count > (expected.get(key) ?? 0)).map(([key]) => key);
  if (missing.length > 0) violations.push(describeList("committed changes missing from the sink", missing));
  if (extra.length > 0) violations.push(describeList("changes in the sink more often than committed", extra));
  // Per id, the sink's order (commit LSN, index in the transaction) must be the history's order.
  const perId = (rows: Array<{ id: number; text: string }>) => {
    const map = new Map<number, string[]>();
    for (const row of rows) map.set(row.id, [...(map.get(row.id) ?? []), row.text]);
    return map;
  };
  const want = perId(history.map((row) => ({ id: row.id, text: text(row, row.op) })));
  const got = perId(changes.map((row) => ({ id: row.id, text: text(row, row.kind) })));
  if (missing.length === 0 && extra.length === 0) {
    for (const [id, sequence] of want) {
      if (JSON.stringify(got.get(id)) !== JSON.stringify(sequence))
        violations.push(
          `order ${id}: changes in the sink ${JSON.stringify(got.get(id))}, committed ${JSON.stringify(sequence)}`,
        );
    }
  }
  return { changes: history.length, missing: missing.length, violations };
}
