import {
  createMemoryLogger,
  createMemoryMetrics,
  type SourceReader,
  type SourceReaderContext,
} from "@onceflow/core";
import { usePrivatePostgres } from "@onceflow/testkit/vitest";
import pg from "pg";
import {
  type PostgresChange,
  PostgresChangesSource,
  type PostgresChangesSourceOptions,
  type PostgresChangesSplit,
} from "../../src/index.js";

/** A throwaway PostgreSQL with wal_level=logical, from the installed server binaries. */
export function useLogicalPostgres() {
  return usePrivatePostgres({ walLevel: "logical", provider: "local" });
}

export async function sql<R extends pg.QueryResultRow = pg.QueryResultRow>(
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

export type Reader = SourceReader<PostgresChange, PostgresChangesSplit>;

/** A reader of the source's single split (or of `splits` when restoring). */
export async function openReader(
  options: PostgresChangesSourceOptions,
  jobId: string,
  restored?: PostgresChangesSplit[],
): Promise<{
  reader: Reader;
  context: SourceReaderContext;
  metrics: ReturnType<typeof createMemoryMetrics>;
  logger: ReturnType<typeof createMemoryLogger>;
}> {
  const source = new PostgresChangesSource(options);
  const logger = createMemoryLogger();
  const metrics = createMemoryMetrics();
  const splits = restored ?? (await source.discoverSplits({ jobId, parallelism: 1, logger }));
  const context: SourceReaderContext = {
    jobId,
    operatorUid: "changes",
    subtaskIndex: 0,
    parallelism: 1,
    isRestored: restored !== undefined,
    checkpointingInterval: 1000,
    logger,
    metrics,
  };
  const reader = await source.createReader(context);
  await reader.addSplits(splits);
  return { reader, context, metrics, logger };
}

/** Polls until `count` records came, or `idleRounds` polls in a row gave nothing. */
export async function readRecords(
  reader: Reader,
  count: number,
  idleRounds = 200,
): Promise<PostgresChange[]> {
  const out: PostgresChange[] = [];
  for (let idle = 0; out.length < count && idle < idleRounds; ) {
    await Promise.race([reader.isAvailable(), new Promise((resolve) => setTimeout(resolve, 50))]);
    const batch = await reader.pollNext();
    // Gives up only after `idleRounds` empty polls in a row: a slow server still makes progress.
    if (batch === undefined || batch.records.length === 0) idle += 1;
    else {
      idle = 0;
      out.push(...batch.records);
    }
  }
  return out;
}
