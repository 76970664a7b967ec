import { OnceflowError } from "@onceflow/core";

/**
 * A pgoutput message could not be turned into a change record (a tuple that does not match its
 * relation message, a change for an unannounced table). Code `RECORD_REJECTED`: the job stops at
 * once, since reading the same WAL again gives the same message; `details` name the relation.
 *
 * @example
 * ```ts
 * if (error instanceof PostgresChangeDecodingError) console.error(error.details.table);
 * ```
 */
export class PostgresChangeDecodingError extends OnceflowError {
  constructor(message: string, details: Record<string, unknown>) {
    super("RECORD_REJECTED", message, { details });
  }
}

/**
 * The replication connection failed or the server went away (a restart, a failover, a network
 * cut). Code `SERVICE_UNAVAILABLE`: the restart strategy restores the latest checkpoint and the
 * source reads on from the slot, which kept every change after it.
 *
 * @example
 * ```ts
 * if (error instanceof PostgresReplicationConnectionError) metrics.counter("cdc_reconnects", "").inc();
 * ```
 */
export class PostgresReplicationConnectionError extends OnceflowError {
  constructor(message: string, options: { cause?: unknown; details?: Record<string, unknown> } = {}) {
    super("SERVICE_UNAVAILABLE", message, options);
  }
}
