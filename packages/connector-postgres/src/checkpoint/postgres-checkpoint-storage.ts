import { createHash, randomBytes } from "node:crypto";
import {
  CheckpointError,
  type CheckpointHistoryEntry,
  type CheckpointMetadata,
  type CheckpointStorage,
  type ClaimIncarnationOptions,
  type CompletedCheckpoint,
  ConfigurationError,
  fencingScopeOf,
  type IncarnationSeries,
  type Logger,
  silentLogger,
  supersededError,
} from "@onceflow/core";
import type pg from "pg";
import { asConfigurationProblem } from "../errors/permanent-errors.js";
import { type TableName, tableName } from "../sql/identifiers.js";
import { SqlState, sqlState } from "../sql/pg-errors.js";
import { openPool, type PoolHandle, type PostgresConnectionOptions, withClient } from "../sql/pool.js";
import { asPermissionError } from "../sql/table-schema.js";
import { historyTableStatement, readHistoryRows, recordHistoryRow } from "./postgres-checkpoint-history.js";

/**
 * Settings of {@link PostgresCheckpointStorage}.
 *
 * @example
 * ```ts
 * const options: PostgresCheckpointStorageOptions = { connection: process.env.DATABASE_URL, table: "job_checkpoints" };
 * ```
 */
export interface PostgresCheckpointStorageOptions extends PostgresConnectionOptions {
  /** Schema of the tables (default `public`). */
  readonly schema?: string;
  /**
   * Table of checkpoint metadata (default `onceflow_checkpoints`); states go to `<table>_state`,
   * the newest incarnation of each scope (see `claimIncarnation`) to `<table>_owner`, and the
   * checkpoint history (see `recordHistory`) to `<table>_log`.
   */
  readonly table?: string;
  /** Create the tables when missing (default `true`). Turn off when the role may not run DDL. */
  readonly createTables?: boolean;
  /** Where to log pool errors (default: nothing). */
  readonly logger?: Logger;
}

// The same rule as core's storages, so a job id that works with `filesystem` works here too.
const SAFE_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}$/;
/** The `<table>_owner` row that holds a job's incarnation series: no scope name starts with a dot. */
const SERIES_SCOPE = ".series";

function validateEntryNames(entry: CheckpointHistoryEntry): void {
  assertName("jobId", entry.jobId);
  assertName("scope", entry.scope);
}

function assertName(setting: "jobId" | "scope", name: string): void {
  if (typeof name !== "string" || !SAFE_NAME.test(name)) {
    throw new ConfigurationError(
      setting,
      `${JSON.stringify(name)} cannot be used as a checkpoint name: use 1–200 letters, digits, '.', '_' or '-', not starting with '.'`,
    );
  }
}

function assertId(checkpointId: number): void {
  if (!Number.isSafeInteger(checkpointId) || checkpointId < 0) {
    throw new ConfigurationError(
      "checkpointId",
      `must be a non-negative integer, got ${String(checkpointId)}`,
    );
  }
}

const sha256 = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex");

function describe(at: Pick<CheckpointMetadata, "jobId" | "scope" | "checkpointId">): string {
  return `checkpoint ${at.checkpointId} of job ${at.jobId} (scope ${at.scope})`;
}

/** Checks state buffers against the metadata entries: same subtasks, sizes and SHA-256. */
function verifyStates(
  metadata: CheckpointMetadata,
  states: ReadonlyMap<number, Uint8Array>,
  code: "CHECKPOINT_FAILED" | "CHECKPOINT_CORRUPT",
): void {
  const fail = (problem: string): never => {
    throw new CheckpointError(code, `${describe(metadata)}: ${problem}`, {
      checkpointId: metadata.checkpointId,
    });
  };
  if (!Array.isArray(metadata.subtasks)) fail("metadata.subtasks is not an array");
  const seen = new Set<number>();
  for (const entry of metadata.subtasks) {
    if (seen.has(entry.subtaskIndex)) fail(`subtask ${entry.subtaskIndex} is listed twice in the metadata`);
    seen.add(entry.subtaskIndex);
    const bytes = states.get(entry.subtaskIndex);
    if (bytes === undefined) {
      fail(`the state of subtask ${entry.subtaskIndex} is missing`);
      continue;
    }
    if (bytes.length !== entry.stateBytes) {
      fail(
        `the state of subtask ${entry.subtaskIndex} has ${bytes.length} bytes, the metadata says ${entry.stateBytes}`,
      );
    }
    if (sha256(bytes) !== entry.sha256)
      fail(`the state of subtask ${entry.subtaskIndex} fails its SHA-256 check`);
  }
  for (const subtaskIndex of states.keys()) {
    if (!seen.has(subtaskIndex))
      fail(`there is state for subtask ${subtaskIndex} that the metadata does not list`);
  }
}

/**
 * Keeps completed checkpoints in PostgreSQL, for jobs that run where no durable disk is (containers):
 * a restarted job restores from the database. Two tables: `<table>` (job id, scope, checkpoint id,
 * metadata as jsonb) and `<table>_state` (one bytea row per subtask). A checkpoint is stored in one
 * transaction, so `list` shows it whole or not at all; `load` checks every state's SHA-256 against
 * the metadata and throws `CHECKPOINT_CORRUPT` on a difference; `discard` deletes one checkpoint
 * (used by retention).
 *
 * @example
 * ```ts
 * import { Job } from "@onceflow/core";
 * import { PostgresCheckpointStorage } from "@onceflow/connector-postgres";
 *
 * const storage = new PostgresCheckpointStorage({ connection: process.env.DATABASE_URL });
 * const job = new Job({ jobId: "orders", checkpointing: { interval: 5000, storage } });
 * ```
 */
export class PostgresCheckpointStorage implements CheckpointStorage {
  /** Shown in logs, for example `postgres:db:5432/app/public.onceflow_checkpoints`. */
  readonly description: string;
  private readonly handle: PoolHandle;
  private readonly checkpoints: TableName;
  private readonly states: TableName;
  /** The newest incarnation of each scope, and (scope `''`) the last number handed out per job. */
  private readonly owners: TableName;
  /** The checkpoint history: completed, failed and restored checkpoints, kept past retention. */
  private readonly history: TableName;
  private readonly createTables: boolean;
  private ready: Promise<void> | undefined;

  constructor(options: PostgresCheckpointStorageOptions) {
    this.handle = openPool(options, options.logger ?? silentLogger);
    const schema = options.schema ?? "public";
    const table = options.table ?? "onceflow_checkpoints";
    if (table.length > 57) {
      throw new ConfigurationError(
        "table",
        `must be at most 57 bytes (it gets a '_state' suffix), got ${table.length}`,
      );
    }
    this.checkpoints = tableName(schema, table);
    this.states = tableName(schema, `${table}_state`);
    this.owners = tableName(schema, `${table}_owner`);
    this.history = tableName(schema, `${table}_log`);
    this.createTables = options.createTables ?? true;
    this.description = `postgres:${this.handle.where}/${schema}.${table}`;
  }

  /** The pool the storage uses. */
  get pool(): pg.Pool {
    return this.handle.pool;
  }

  /**
   * Stores a checkpoint in one transaction. Refuses (with `CHECKPOINT_FAILED`, storing nothing)
   * state that does not match the metadata and a checkpoint that already exists.
   *
   * @example
   * ```ts
   * await storage.store({ metadata, subtaskStates: new Map([[0, state]]) });
   * ```
   */
  async store(checkpoint: CompletedCheckpoint): Promise<void> {
    const { metadata, subtaskStates } = checkpoint;
    assertName("jobId", metadata.jobId);
    assertName("scope", metadata.scope);
    assertId(metadata.checkpointId);
    let json: string;
    try {
      json = JSON.stringify(metadata);
    } catch (cause) {
      throw new CheckpointError(
        "CHECKPOINT_FAILED",
        `${describe(metadata)}: its metadata cannot be written as JSON (summary values must be JSON)`,
        { checkpointId: metadata.checkpointId, cause },
      );
    }
    verifyStates(metadata, subtaskStates, "CHECKPOINT_FAILED");
    await this.ensureTables();
    try {
      await withClient(this.handle.pool, async (client) => {
        await client.query("BEGIN");
        try {
          await this.checkNotSuperseded(client, metadata);
          await client.query(
            `INSERT INTO ${this.checkpoints.sql} (job_id, scope, checkpoint_id, metadata) VALUES ($1, $2, $3, $4::jsonb)`,
            [metadata.jobId, metadata.scope, metadata.checkpointId, json],
          );
          const subtasks = [...subtaskStates.keys()];
          await client.query(
            `INSERT INTO ${this.states.sql} (job_id, scope, checkpoint_id, subtask, state)
             SELECT $1, $2, $3, s, d FROM unnest($4::int[], $5::bytea[]) AS u(s, d)`,
            [
              metadata.jobId,
              metadata.scope,
              metadata.checkpointId,
              subtasks,
              subtasks.map((index) => Buffer.from(subtaskStates.get(index) as Uint8Array)),
            ],
          );
          await client.query("COMMIT");
        } catch (error) {
          await client.query("ROLLBACK").catch(() => {});
          throw error;
        }
      });
    } catch (error) {
      if (sqlState(error) === SqlState.uniqueViolation) {
        throw new CheckpointError("CHECKPOINT_FAILED", `${describe(metadata)} already exists`, {
          checkpointId: metadata.checkpointId,
          cause: error,
        });
      }
      throw this.failed(error, "CHECKPOINT_FAILED", `storing ${describe(metadata)}`, metadata.checkpointId);
    }
  }

  /**
   * Inside the storing transaction: holds the scope's fence in shared mode (a claim takes it
   * exclusively, so it waits for this store to end, or this store waits for the claim and then sees
   * it) and refuses a checkpoint of an incarnation older than the scope's newest.
   */
  private async checkNotSuperseded(client: pg.PoolClient, metadata: CheckpointMetadata): Promise<void> {
    // A base checkpoint is fenced with the scope of the process that writes it.
    const fencing = fencingScopeOf(metadata);
    await client.query("SELECT pg_advisory_xact_lock_shared($1, $2)", this.fenceKey(metadata.jobId, fencing));
    if (metadata.incarnation === undefined) return;
    const newest = await this.newestIncarnation(client, metadata.jobId, fencing);
    if (newest !== undefined && metadata.incarnation < newest) {
      throw supersededError({ ...metadata, scope: fencing }, newest);
    }
  }

  /**
   * Completed checkpoints of a job, every scope, ordered by checkpoint id then scope.
   *
   * @example
   * ```ts
   * const latest = (await storage.list("orders")).at(-1);
   * ```
   */
  async list(jobId: string): Promise<CheckpointMetadata[]> {
    assertName("jobId", jobId);
    await this.ensureTables();
    const result = await this.handle.pool
      .query<{ metadata: CheckpointMetadata; id: string; scope: string }>(
        // Ordered by the bigint column (not its text), then scope in byte order as core compares them.
        `SELECT metadata, checkpoint_id::text AS id, scope FROM ${this.checkpoints.sql}
          WHERE job_id = $1 ORDER BY checkpoint_id, scope COLLATE "C"`,
        [jobId],
      )
      .catch((error: unknown) => {
        throw this.failed(error, "CHECKPOINT_FAILED", `listing the checkpoints of job ${jobId}`);
      });
    return result.rows.map((row) => {
      const metadata = row.metadata;
      if (
        typeof metadata !== "object" ||
        metadata === null ||
        metadata.checkpointId !== Number(row.id) ||
        metadata.scope !== row.scope ||
        metadata.jobId !== jobId
      ) {
        throw new CheckpointError(
          "CHECKPOINT_CORRUPT",
          `checkpoint ${row.id} of job ${jobId} (scope ${row.scope}): its metadata does not match its row`,
          { checkpointId: Number(row.id) },
        );
      }
      return metadata;
    });
  }

  /**
   * Loads one checkpoint and verifies every state against the SHA-256 in its metadata.
   *
   * @throws CheckpointError `CHECKPOINT_NOT_FOUND` or `CHECKPOINT_CORRUPT`.
   * @example
   * ```ts
   * const checkpoint = await storage.load("orders", "all", 12);
   * ```
   */
  async load(jobId: string, scope: string, checkpointId: number): Promise<CompletedCheckpoint> {
    assertName("jobId", jobId);
    assertName("scope", scope);
    assertId(checkpointId);
    await this.ensureTables();
    const at = { jobId, scope, checkpointId };
    try {
      return await withClient(this.handle.pool, (client) => this.loadWith(client, at));
    } catch (error) {
      throw this.failed(error, "CHECKPOINT_FAILED", `loading ${describe(at)}`, checkpointId);
    }
  }

  private async loadWith(
    client: pg.PoolClient,
    at: { jobId: string; scope: string; checkpointId: number },
  ): Promise<CompletedCheckpoint> {
    const { jobId, scope, checkpointId } = at;
    try {
      // One snapshot for both reads, so a concurrent discard cannot split them.
      await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
      const found = await client.query<{ metadata: CheckpointMetadata }>(
        `SELECT metadata FROM ${this.checkpoints.sql} WHERE job_id = $1 AND scope = $2 AND checkpoint_id = $3`,
        [jobId, scope, checkpointId],
      );
      const metadata = found.rows[0]?.metadata;
      if (metadata === undefined) {
        await client.query("COMMIT");
        throw new CheckpointError(
          "CHECKPOINT_NOT_FOUND",
          `${describe(at)} does not exist in ${this.description}`,
          {
            checkpointId,
          },
        );
      }
      const rows = await client.query<{ subtask: number; state: Buffer }>(
        `SELECT subtask, state FROM ${this.states.sql} WHERE job_id = $1 AND scope = $2 AND checkpoint_id = $3`,
        [jobId, scope, checkpointId],
      );
      await client.query("COMMIT");
      if (metadata.jobId !== jobId || metadata.scope !== scope || metadata.checkpointId !== checkpointId) {
        throw new CheckpointError(
          "CHECKPOINT_CORRUPT",
          `${describe(at)}: its metadata names another checkpoint`,
          {
            checkpointId,
          },
        );
      }
      const subtaskStates = new Map<number, Buffer>();
      for (const row of rows.rows) subtaskStates.set(row.subtask, row.state);
      verifyStates(metadata, subtaskStates, "CHECKPOINT_CORRUPT");
      return { metadata, subtaskStates };
    } catch (error) {
      await client.query("ROLLBACK").catch(() => {});
      throw error;
    }
  }

  /**
   * Registers a new incarnation of `scope` and fences the older ones (see
   * `CheckpointStorage.claimIncarnation`). In one transaction: takes the scope's fence exclusively
   * (waiting for stores in flight, which hold it shared), takes the next number of the job (its
   * counter row in `<table>_owner`, scope `''`, serializes the job's claims), checks `after`, and
   * records the number as the scope's newest.
   *
   * @throws CheckpointError `SUPERSEDED` when `after` is given and is no longer the scope's newest.
   * @example
   * ```ts
   * const incarnation = await storage.claimIncarnation("orders", "subtask-0-of-2");
   * const next = await storage.claimIncarnation("orders", "subtask-0-of-2", { after: incarnation });
   * ```
   */
  async claimedScopes(jobId: string): Promise<string[]> {
    assertName("jobId", jobId);
    await this.ensureTables();
    try {
      const result = await withClient(this.handle.pool, (client) =>
        client.query<{ scope: string }>(
          `SELECT scope FROM ${this.owners.sql} WHERE job_id = $1 AND scope <> '' AND scope <> '${SERIES_SCOPE}' ORDER BY scope`,
          [jobId],
        ),
      );
      return result.rows.map((row) => row.scope);
    } catch (error) {
      throw this.failed(error, "CHECKPOINT_FAILED", `listing the claimed scopes of job '${jobId}'`);
    }
  }

  /**
   * The job's incarnation series and newest incarnation (see
   * `CheckpointStorage.describeIncarnations`). The series is a random number kept in
   * `<table>_owner` as the row of scope `.series` (no scope name starts with a dot), made when
   * first asked for: deleting the job's rows (a reset) makes a new one.
   *
   * @example
   * ```ts
   * const { series, newest } = await storage.describeIncarnations("orders");
   * ```
   */
  async describeIncarnations(jobId: string): Promise<IncarnationSeries> {
    assertName("jobId", jobId);
    await this.ensureTables();
    try {
      return await withClient(this.handle.pool, async (client) => {
        // A random 48-bit number; concurrent makers agree on the first (DO NOTHING, then read).
        await client.query(
          `INSERT INTO ${this.owners.sql} (job_id, scope, incarnation) VALUES ($1, '${SERIES_SCOPE}', $2)
           ON CONFLICT (job_id, scope) DO NOTHING`,
          [jobId, randomBytes(6).readUIntBE(0, 6)],
        );
        const rows = await client.query<{ scope: string; incarnation: string }>(
          `SELECT scope, incarnation::text FROM ${this.owners.sql} WHERE job_id = $1 AND scope IN ('', '${SERIES_SCOPE}')`,
          [jobId],
        );
        const value = (scope: string): string | undefined =>
          rows.rows.find((row) => row.scope === scope)?.incarnation;
        return { series: `pg-${value(SERIES_SCOPE) ?? "0"}`, newest: Number(value("") ?? 0) };
      });
    } catch (error) {
      throw this.failed(error, "CHECKPOINT_FAILED", `reading the incarnation series of job '${jobId}'`);
    }
  }

  async claimIncarnation(
    jobId: string,
    scope: string,
    options: ClaimIncarnationOptions = {},
  ): Promise<number> {
    assertName("jobId", jobId);
    assertName("scope", scope);
    const after = options.after;
    if (after !== undefined && !Number.isSafeInteger(after)) {
      throw new ConfigurationError("after", `must be an incarnation number, got ${String(after)}`);
    }
    await this.ensureTables();
    try {
      return await withClient(this.handle.pool, async (client) => {
        await client.query("BEGIN");
        try {
          await client.query("SELECT pg_advisory_xact_lock($1, $2)", this.fenceKey(jobId, scope));
          const newest = await this.newestIncarnation(client, jobId, scope);
          if (after !== undefined && newest !== after)
            throw supersededError({ jobId, scope }, newest ?? 0, after);
          const counter = await client.query<{ incarnation: string }>(
            `INSERT INTO ${this.owners.sql} AS o (job_id, scope, incarnation) VALUES ($1, '', 1)
             ON CONFLICT (job_id, scope) DO UPDATE SET incarnation = o.incarnation + 1, claimed_at = now()
             RETURNING incarnation::text`,
            [jobId],
          );
          const incarnation = Number(counter.rows[0]?.incarnation);
          await client.query(
            `INSERT INTO ${this.owners.sql} AS o (job_id, scope, incarnation) VALUES ($1, $2, $3)
             ON CONFLICT (job_id, scope) DO UPDATE SET incarnation = EXCLUDED.incarnation, claimed_at = now()`,
            [jobId, scope, incarnation],
          );
          await client.query("COMMIT");
          return incarnation;
        } catch (error) {
          await client.query("ROLLBACK").catch(() => {});
          throw error;
        }
      });
    } catch (error) {
      throw this.failed(error, "CHECKPOINT_FAILED", `claiming an incarnation of job ${jobId} scope ${scope}`);
    }
  }

  /**
   * Deletes one checkpoint (metadata and states, in one statement). A missing one is not an error.
   *
   * @example
   * ```ts
   * await storage.discard("orders", "all", 9);
   * ```
   */
  async discard(jobId: string, scope: string, checkpointId: number): Promise<void> {
    assertName("jobId", jobId);
    assertName("scope", scope);
    assertId(checkpointId);
    await this.ensureTables();
    await this.handle.pool
      .query(`DELETE FROM ${this.checkpoints.sql} WHERE job_id = $1 AND scope = $2 AND checkpoint_id = $3`, [
        jobId,
        scope,
        checkpointId,
      ])
      .catch((error: unknown) => {
        throw this.failed(
          error,
          "CHECKPOINT_FAILED",
          `discarding ${describe({ jobId, scope, checkpointId })}`,
        );
      });
  }

  /**
   * Records a history entry in `<table>_log` and deletes the scope's entries beyond the newest
   * `keep`, in one statement. See {@link CheckpointStorage.recordHistory}.
   *
   * @example
   * ```ts
   * await storage.recordHistory({ kind: "restored", jobId: "orders", scope: "all", checkpointId: 9, at: Date.now(), lineage: 0 }, 100);
   * ```
   */
  async recordHistory(entry: CheckpointHistoryEntry, keep: number): Promise<void> {
    validateEntryNames(entry);
    await this.ensureTables();
    await recordHistoryRow(this.handle.pool, this.history, entry, keep).catch((error: unknown) => {
      throw this.failed(error, "CHECKPOINT_FAILED", `recording the checkpoint history of job ${entry.jobId}`);
    });
  }

  /**
   * The job's checkpoint history from `<table>_log`, oldest first. See {@link CheckpointStorage.readHistory}.
   *
   * @example
   * ```ts
   * const history = await storage.readHistory("orders");
   * ```
   */
  async readHistory(jobId: string): Promise<CheckpointHistoryEntry[]> {
    assertName("jobId", jobId);
    await this.ensureTables();
    return readHistoryRows(this.handle.pool, this.history, jobId).catch((error: unknown) => {
      // Tables made by hand before the history existed (createTables: false): no history yet.
      if (sqlState(error) === SqlState.undefinedTable) return [];
      throw this.failed(error, "CHECKPOINT_FAILED", `reading the checkpoint history of job ${jobId}`);
    });
  }

  /**
   * Ends the pool when the storage created it.
   *
   * @example
   * ```ts
   * await storage.close();
   * ```
   */
  async close(): Promise<void> {
    await this.handle.close();
  }

  private async newestIncarnation(
    client: pg.PoolClient,
    jobId: string,
    scope: string,
  ): Promise<number | undefined> {
    const result = await client.query<{ incarnation: string }>(
      `SELECT incarnation::text FROM ${this.owners.sql} WHERE job_id = $1 AND scope = $2`,
      [jobId, scope],
    );
    const newest = result.rows[0]?.incarnation;
    return newest === undefined ? undefined : Number(newest);
  }

  /** The advisory lock of a (job, scope) of this table: stores take it shared, claims exclusively. */
  private fenceKey(jobId: string, scope: string): [number, number] {
    const digest = createHash("sha256").update(`${this.checkpoints.sql}/${jobId}`).digest();
    const scopeDigest = createHash("sha256").update(scope).digest();
    return [digest.readInt32BE(0), scopeDigest.readInt32BE(0)];
  }

  private ensureTables(): Promise<void> {
    this.ready ??= this.createTablesIfMissing().catch((error: unknown) => {
      this.ready = undefined;
      throw this.failed(error, "CHECKPOINT_FAILED", `creating the tables ${this.checkpoints.sql}`);
    });
    return this.ready;
  }

  private async createTablesIfMissing(): Promise<void> {
    if (!this.createTables) return;
    const statements = [
      `CREATE TABLE IF NOT EXISTS ${this.checkpoints.sql} (
         job_id text NOT NULL, scope text NOT NULL, checkpoint_id bigint NOT NULL,
         metadata jsonb NOT NULL, stored_at timestamptz NOT NULL DEFAULT now(),
         PRIMARY KEY (job_id, scope, checkpoint_id))`,
      `CREATE TABLE IF NOT EXISTS ${this.states.sql} (
         job_id text NOT NULL, scope text NOT NULL, checkpoint_id bigint NOT NULL, subtask integer NOT NULL,
         state bytea NOT NULL,
         PRIMARY KEY (job_id, scope, checkpoint_id, subtask),
         FOREIGN KEY (job_id, scope, checkpoint_id) REFERENCES ${this.checkpoints.sql} ON DELETE CASCADE)`,
      `CREATE TABLE IF NOT EXISTS ${this.owners.sql} (
         job_id text NOT NULL, scope text NOT NULL, incarnation bigint NOT NULL,
         claimed_at timestamptz NOT NULL DEFAULT now(),
         PRIMARY KEY (job_id, scope))`,
      historyTableStatement(this.history),
    ];
    for (const statement of statements) {
      try {
        await this.handle.pool.query(statement);
      } catch (error) {
        const state = sqlState(error);
        if (state === SqlState.uniqueViolation || state === SqlState.duplicateTable) continue;
        throw asPermissionError(error, "table", `creating ${this.checkpoints.sql}`);
      }
    }
  }

  private failed(error: unknown, code: "CHECKPOINT_FAILED", doing: string, checkpointId?: number): unknown {
    if (error instanceof CheckpointError || error instanceof ConfigurationError) return error;
    const configuration = asConfigurationProblem(error, this.handle.owned ? "connection" : "pool");
    if (configuration !== undefined && sqlState(error) !== SqlState.insufficientPrivilege)
      return configuration;
    const permission = asPermissionError(error, "table", doing);
    if (permission !== error) return permission;
    return new CheckpointError(
      code,
      `${this.description}: ${doing} failed: ${error instanceof Error ? error.message : String(error)}`,
      { ...(checkpointId === undefined ? {} : { checkpointId }), cause: error },
    );
  }
}
