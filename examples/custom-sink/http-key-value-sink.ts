import { randomUUID } from "node:crypto";
import { type CommitErrorClassification, TwoPhaseCommitSink } from "@onceflow/core";
import type { Entry } from "./kv-server.js";

/** The transaction handle stored in checkpoints: everything another process needs to commit it. */
export interface KeyValueTransaction {
  /** The idempotency key of the transaction at the server. */
  readonly id: string;
  /** Buffered until pre-commit (a real sink would cap this and stage in parts). */
  readonly entries: Entry[];
}

/** The server said the transaction is unknown: neither staged nor committed. Retrying cannot help. */
class TransactionGoneError extends Error {}

/**
 * An exactly-once sink for an HTTP key-value store with idempotency keys: records are buffered in
 * the transaction, staged under its id at the checkpoint barrier (`preCommit`), and published by an
 * idempotent commit call once the checkpoint completed. Flink's TwoPhaseCommitSinkFunction, in ~50 lines.
 */
export class HttpKeyValueSink extends TwoPhaseCommitSink<Entry, KeyValueTransaction> {
  constructor(private readonly baseUrl: string) {
    super({ name: "HttpKeyValueSink", commitRetry: { maxAttempts: 5, initialDelay: 50 } });
  }

  protected beginTransaction(): KeyValueTransaction {
    return { id: randomUUID(), entries: [] };
  }

  protected invoke(transaction: KeyValueTransaction, value: Entry): void {
    transaction.entries.push(value);
  }

  protected async preCommit(transaction: KeyValueTransaction): Promise<void> {
    if (transaction.entries.length === 0) return; // empty transactions cost no request
    await this.call("PUT", `/transactions/${transaction.id}`, transaction.entries);
  }

  protected async commit(transaction: KeyValueTransaction): Promise<void> {
    if (transaction.entries.length === 0) return;
    // Idempotent at the server: committing twice (after a crash or a lost answer) publishes once.
    const status = await this.call("POST", `/transactions/${transaction.id}/commit`);
    if (status === 404)
      throw new TransactionGoneError(`transaction ${transaction.id} is unknown to the server`);
  }

  protected async abort(transaction: KeyValueTransaction): Promise<void> {
    await this.call("DELETE", `/transactions/${transaction.id}`);
  }

  protected override classifyCommitError(error: unknown): CommitErrorClassification {
    return error instanceof TransactionGoneError ? "fatal" : "retry";
  }

  private async call(method: string, path: string, json?: unknown): Promise<number> {
    const response = await fetch(`${this.baseUrl}${path}`, {
      method,
      ...(json === undefined
        ? {}
        : { body: JSON.stringify(json), headers: { "content-type": "application/json" } }),
    });
    if (response.status >= 500) throw new Error(`${method} ${path}: HTTP ${response.status}`);
    return response.status;
  }
}
