import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createKafkaTopic } from "@onceflow/testkit";
import pg from "pg";
import { chaosKafkaClient } from "./chaos-input.js";
import type { ChaosOutput } from "./committed-output.js";
import { withPostgres } from "./committed-output.js";

// What one multi-process chaos run creates and removes: its input and output topics (or output
// table), its checkpoint folder or schema, and, afterwards, any prepared transaction of its sink
// (rolled back once recorded, so that the shared PostgreSQL keeps its prepared-transaction slots).

export interface ChaosResourcesOptions {
  /** Unique in the run: topic, table, schema and sink names derive from it. */
  readonly name: string;
  readonly sink: "kafka" | "postgres";
  readonly storage: "filesystem" | "postgres";
  readonly brokers: readonly string[];
  readonly postgresUrl: string | undefined;
  /** The same PostgreSQL as the job reaches it, when that differs (a container network). */
  readonly jobPostgresUrl?: string;
  /** The job runs as another user (a container's): its checkpoint folder is writable by all. */
  readonly sharedCheckpointFolder?: boolean;
  readonly partitions: number;
  /** The output table's columns besides `pos bigserial` (default the chaos record's `id, key, seq`). */
  readonly tableColumns?: string;
}

export interface ChaosResources {
  readonly inputTopic: string;
  readonly output: ChaosOutput;
  /** The PostgresSink's `sinkId` (its gids start with `<sinkId>-`). */
  readonly sinkId: string;
  /** The job's environment for the sink and the checkpoint storage. */
  readonly env: Readonly<Record<string, string>>;
  remove(): Promise<void>;
}

function requiredUrl(url: string | undefined): string {
  if (url === undefined || url === "")
    throw new Error("a PostgreSQL URL is required for this pipeline or storage");
  return url;
}

/** Creates the run's topics, table, schema and folder. */
export async function createChaosResources(options: ChaosResourcesOptions): Promise<ChaosResources> {
  const sqlName = options.name.replaceAll("-", "_");
  const inputTopic = `${options.name}-in`;
  const work = await mkdtemp(join(tmpdir(), "onceflow-chaos-per-subtask-"));
  const sinkId = `${sqlName}.out`;
  const schema = `${sqlName}_ckpt`;
  await createKafkaTopic([...options.brokers], inputTopic, { partitions: options.partitions });
  let output: ChaosOutput;
  const env: Record<string, string> = { CHAOS_SINK: options.sink, CHAOS_STORAGE: options.storage };
  if (options.sink === "kafka") {
    const topic = `${options.name}-out`;
    await createKafkaTopic([...options.brokers], topic, { partitions: options.partitions });
    output = { sink: "kafka", brokers: options.brokers, topic };
    env.CHAOS_OUTPUT_TOPIC = topic;
  } else {
    const postgresUrl = requiredUrl(options.postgresUrl);
    await withPostgres(postgresUrl, (client) =>
      client.query(
        `CREATE TABLE ${pg.escapeIdentifier(sqlName)} (pos bigserial PRIMARY KEY, ${options.tableColumns ?? "id integer NOT NULL, key text NOT NULL, seq integer NOT NULL"})`,
      ),
    );
    output = { sink: "postgres", postgresUrl, table: sqlName };
    Object.assign(env, {
      CHAOS_POSTGRES_URL: options.jobPostgresUrl ?? postgresUrl,
      CHAOS_TABLE: sqlName,
      CHAOS_POSTGRES_MODE: "prepared",
      CHAOS_SINK_ID: sinkId,
    });
  }
  if (options.storage === "postgres") {
    const postgresUrl = requiredUrl(options.postgresUrl);
    await withPostgres(postgresUrl, (client) => client.query(`CREATE SCHEMA ${pg.escapeIdentifier(schema)}`));
    Object.assign(env, {
      CHAOS_CHECKPOINT_POSTGRES_URL: options.jobPostgresUrl ?? postgresUrl,
      CHAOS_CHECKPOINT_SCHEMA: schema,
    });
  } else {
    env.CHAOS_CHECKPOINT_DIR = join(work, "checkpoints");
    // A job container runs as another user (the image's "node"): it shares this folder.
    if (options.sharedCheckpointFolder === true) await chmod(work, 0o777);
  }
  const remove = async () => {
    await rm(work, { recursive: true, force: true });
    const admin = chaosKafkaClient(options.brokers).admin();
    await admin.connect();
    const topics = output.sink === "kafka" ? [inputTopic, output.topic] : [inputTopic];
    await admin.deleteTopics({ topics, timeout: 5000 }).finally(() => admin.disconnect());
    if (options.postgresUrl === undefined) return;
    await withPostgres(options.postgresUrl, async (client) => {
      const left = await client.query<{ gid: string }>(
        "SELECT gid FROM pg_prepared_xacts WHERE left(gid, length($1)) = $1 AND database = current_database()",
        [`${sinkId}-`],
      );
      for (const { gid } of left.rows) await client.query(`ROLLBACK PREPARED ${pg.escapeLiteral(gid)}`);
      if (output.sink === "postgres")
        await client.query(`DROP TABLE IF EXISTS ${pg.escapeIdentifier(sqlName)}`);
      if (options.storage === "postgres")
        await client.query(`DROP SCHEMA IF EXISTS ${pg.escapeIdentifier(schema)} CASCADE`);
    });
  };
  return { inputTopic, output, sinkId, env, remove };
}
