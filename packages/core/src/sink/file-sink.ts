import { randomBytes } from "node:crypto";
import { type FileHandle, mkdir, open, readdir, readFile, rename, stat, unlink } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { FunctionSnapshotContext } from "../api/checkpointed-function.js";
import { ConfigurationError } from "../errors/onceflow-error.js";
import { exists, isCode, syncDirectory } from "../files/durable-files.js";
import { jsonSerializer } from "../state/serializer.js";
import type { SinkContext } from "./sink.js";
import type { CommitErrorClassification, CommitRetryOptions } from "./two-phase-commit-options.js";
import { TwoPhaseCommitSink } from "./two-phase-commit-sink.js";

/**
 * The handle of one {@link FileSink} transaction, as stored in checkpoints (plain JSON).
 *
 * @example
 * ```ts
 * const transaction: FileTransaction = { id: "9f2c4e1a0b3d5f67", stagingFile: "part-0-4-i7-9f2c4e1a0b3d5f67.staging",
 *   committedFile: "part-0-4-9f2c4e1a0b3d5f67.jsonl", byteLength: 120, recordCount: 3 };
 * ```
 */
export interface FileTransaction {
  /** The random part of both file names (16 hex digits). */
  readonly id: string;
  /** The file the records go to, inside `<directory>/.staging/`. */
  readonly stagingFile: string;
  /** The file published by the commit, inside `<directory>`; named at pre-commit. */
  committedFile?: string;
  /** Bytes written so far (final at pre-commit). 0: an empty transaction, which publishes nothing. */
  byteLength: number;
  recordCount: number;
}

/**
 * Settings of a {@link FileSink}.
 *
 * @example
 * ```ts
 * const options: FileSinkOptions<Order> = { directory: "out/orders", encoder: (order) => `${order.id},${order.total}\n`, fileSuffix: ".csv" };
 * ```
 */
export interface FileSinkOptions<IN> {
  /** Where committed files go; created when missing. Staging files live in its `.staging` folder. */
  readonly directory: string;
  /** Turns a record into the bytes written for it (default: its JSON and a newline). */
  readonly encoder?: (value: IN) => string | Buffer;
  /** Start of every file name (default `part`). Sinks sharing a directory need different prefixes. */
  readonly filePrefix?: string;
  /** End of committed file names (default `.jsonl`). */
  readonly fileSuffix?: string;
  /** Shown in logs and errors (default `FileSink`). */
  readonly name?: string;
  readonly commitRetry?: CommitRetryOptions;
}

/** Buffered records not yet written to the staging file, and the file once opened. */
interface StagingWriter {
  handle: FileHandle | undefined;
  parts: Array<string | Buffer>;
  bufferedBytes: number;
  onlyStrings: boolean;
  /** The chain of writes to the file, in order. */
  writing: Promise<void>;
}

/** Written in one go once this much is buffered: bounds memory, keeps syscalls few. */
const flushThreshold = 256 * 1024;

const stagingFolder = ".staging";

/** The commit found neither the staging file nor the published one: the data is gone. */
class MissingStagingFileError extends Error {}

const defaultEncoder = (value: unknown): string => `${JSON.stringify(value)}\n`;

/**
 * An exactly-once file sink: each checkpoint publishes, per subtask, one file with exactly the
 * records of that checkpoint, or nothing.
 *
 * Each transaction writes (buffered) to a staging file
 * `<directory>/.staging/<prefix>-<subtask>-<n>-i<incarnation>-<random>.staging`, where `n` is the id of the
 * checkpoint the transaction began after, plus one. Pre-commit flushes, fsyncs and closes it; the
 * commit renames it atomically to `<directory>/<prefix>-<subtask>-<checkpointId>-<random><suffix>`
 * and fsyncs the directory. The commit is idempotent: a missing staging file with the published
 * file present means it was already committed. Abort deletes the staging file.
 *
 * An empty transaction (no record) creates no staging file and publishes nothing: readers never
 * see empty files.
 *
 * After a restore, the restored pending transactions are committed and, in
 * `finishRecoveringTransactions`, every remaining staging file of the subtasks this one recovered
 * (its own index and, after scaling in, the old indexes `s` with `s % parallelism` equal to it) is
 * deleted: nothing will ever commit it — except files of a newer incarnation, which a zombie's start
 * (a process frozen after its incarnation claim, resuming after a newer one started) must leave to
 * the newer process. A fresh start deletes all of this subtask's staging files.
 *
 * Readers must ignore the `.staging` folder ({@link readCommittedFiles} does). Two sinks or jobs
 * writing to one directory must use different `filePrefix`es.
 *
 * @example
 * ```ts
 * job.fromSource(orders).sinkTo(() => new FileSink<Order>({ directory: "out/orders" }));
 * const written = await readCommittedFiles<Order>("out/orders");
 * ```
 */
export class FileSink<IN> extends TwoPhaseCommitSink<IN, FileTransaction> {
  /** The absolute directory committed files go to. */
  readonly directory: string;
  private readonly stagingDirectory: string;
  private readonly encoder: (value: IN) => string | Buffer;
  private readonly filePrefix: string;
  private readonly fileSuffix: string;
  private readonly writers = new Map<string, StagingWriter>();
  private directoriesReady: Promise<void> | undefined;

  constructor(options: FileSinkOptions<IN>) {
    super({
      name: options.name ?? "FileSink",
      transactionSerializer: jsonSerializer<FileTransaction>(),
      commitRetry: options.commitRetry,
    });
    if (typeof options.directory !== "string" || options.directory.length === 0) {
      throw new ConfigurationError("directory", "give the folder committed files are written to");
    }
    const prefix = options.filePrefix ?? "part";
    if (prefix.length === 0 || prefix.startsWith(".") || /[/\\]/.test(prefix)) {
      throw new ConfigurationError(
        "filePrefix",
        `must be a non-empty file name part without '/' or '\\' that does not start with '.', got '${prefix}'`,
      );
    }
    const suffix = options.fileSuffix ?? ".jsonl";
    if (/[/\\]/.test(suffix)) {
      throw new ConfigurationError("fileSuffix", `must not contain '/' or '\\', got '${suffix}'`);
    }
    this.directory = resolve(options.directory);
    this.stagingDirectory = join(this.directory, stagingFolder);
    this.encoder = options.encoder ?? (defaultEncoder as (value: IN) => string);
    this.filePrefix = prefix;
    this.fileSuffix = suffix;
  }

  protected async beginTransaction(): Promise<FileTransaction> {
    this.directoriesReady ??= mkdir(this.stagingDirectory, { recursive: true }).then(
      () => undefined,
      (error: unknown) => {
        this.directoriesReady = undefined; // let a later attempt try again
        throw error;
      },
    );
    await this.directoriesReady;
    const id = randomBytes(8).toString("hex");
    const { subtaskIndex, incarnation } = this.runtimeContext;
    // The incarnation in the name keeps a zombie's start from deleting a newer process's files.
    const stagingFile = `${this.filePrefix}-${subtaskIndex}-${this.lastCheckpointId + 1}-i${incarnation}-${id}.staging`;
    this.writers.set(stagingFile, {
      handle: undefined,
      parts: [],
      bufferedBytes: 0,
      onlyStrings: true,
      writing: Promise.resolve(),
    });
    return { id, stagingFile, byteLength: 0, recordCount: 0 };
  }

  protected invoke(transaction: FileTransaction, value: IN, _context: SinkContext): Promise<void> | void {
    const writer = this.writerOf(transaction);
    this.append(transaction, writer, value);
    if (writer.bufferedBytes >= flushThreshold) return this.flush(transaction, writer);
  }

  protected override invokeBatch(
    transaction: FileTransaction,
    values: readonly IN[],
    _context: SinkContext,
  ): Promise<void> | void {
    const writer = this.writerOf(transaction);
    for (const value of values) this.append(transaction, writer, value);
    if (writer.bufferedBytes >= flushThreshold) return this.flush(transaction, writer);
  }

  protected async preCommit(
    transaction: FileTransaction,
    checkpoint: FunctionSnapshotContext,
  ): Promise<void> {
    const writer = this.writers.get(transaction.stagingFile);
    if (writer !== undefined) {
      await this.flush(transaction, writer);
      if (writer.handle !== undefined) {
        await writer.handle.sync();
        await writer.handle.close();
        writer.handle = undefined;
        // The staging file's directory entry must survive a power loss once the checkpoint says it exists.
        await syncDirectory(this.stagingDirectory);
      }
      this.writers.delete(transaction.stagingFile);
    }
    const { subtaskIndex } = this.runtimeContext;
    transaction.committedFile = `${this.filePrefix}-${subtaskIndex}-${checkpoint.checkpointId}-${transaction.id}${this.fileSuffix}`;
  }

  protected async commit(transaction: FileTransaction): Promise<void> {
    const { committedFile } = transaction;
    if (committedFile === undefined) {
      throw new MissingStagingFileError(`transaction ${transaction.stagingFile} was never pre-committed`);
    }
    const staging = join(this.stagingDirectory, transaction.stagingFile);
    if (transaction.byteLength === 0) {
      // Empty transactions publish nothing; remove a staging file if one exists after all.
      await unlinkIfExists(staging);
      return;
    }
    const target = join(this.directory, committedFile);
    try {
      await rename(staging, target);
    } catch (error) {
      if (!isCode(error, "ENOENT")) throw error;
      if (await exists(target)) return; // committed before (a crash came between rename and notification)
      throw new MissingStagingFileError(
        `neither the staging file ${staging} nor the committed file ${target} exists: the ${transaction.recordCount} records of this transaction are gone (was the .staging folder cleaned by hand, or does another sink or job use the prefix '${this.filePrefix}' in this directory?)`,
      );
    }
    await syncDirectory(this.directory);
  }

  protected async abort(transaction: FileTransaction): Promise<void> {
    const writer = this.writers.get(transaction.stagingFile);
    this.writers.delete(transaction.stagingFile);
    if (writer !== undefined) {
      writer.parts = [];
      writer.bufferedBytes = 0;
      // A failed write is moot now: the file is deleted anyway.
      await writer.writing.catch(() => undefined);
      await writer.handle?.close().catch(() => undefined);
    }
    await unlinkIfExists(join(this.stagingDirectory, transaction.stagingFile));
  }

  protected override async finishRecoveringTransactions(): Promise<void> {
    const { subtaskIndex, parallelism, incarnation } = this.runtimeContext;
    const recovered = new Set(this.recoveredSubtaskIndexes());
    // File names also reveal old subtasks that a checkpoint did not mention (none of their state).
    const owned = (index: number) =>
      recovered.has(index) || (index >= parallelism && index % parallelism === subtaskIndex);
    let names: string[];
    try {
      names = await readdir(this.stagingDirectory);
    } catch (error) {
      if (isCode(error, "ENOENT")) return;
      throw error;
    }
    const deleted: string[] = [];
    const kept: string[] = [];
    for (const name of names) {
      const parsed = this.parseStagingName(name);
      if (parsed === undefined || !owned(parsed.subtaskIndex)) continue;
      // A newer incarnation's file: this attempt is a zombie (frozen after its incarnation claim)
      // that started after a newer process, whose stored checkpoint may hold the file. Deleting it
      // would lose its records; the newer process, or the next attempt, commits or deletes it.
      if (parsed.incarnation !== undefined && parsed.incarnation > incarnation) {
        kept.push(name);
        continue;
      }
      // Restored pending transactions are committed by now: what is left was never pre-committed
      // (begun after the restored checkpoint) or belongs to a checkpoint that never completed.
      await unlinkIfExists(join(this.stagingDirectory, name));
      deleted.push(name);
    }
    if (kept.length > 0) {
      this.logger.warn(
        { incarnation, kept },
        "kept staging files of newer incarnations: this process is a zombie that resumed after a newer one started (it will be stopped), or the checkpoint storage was reset and its incarnations started again",
      );
    }
    if (deleted.length > 0) {
      this.logger.info(
        { restoredCheckpointId: this.lastCheckpointId, deleted },
        "deleted staging files that no checkpoint will commit",
      );
    }
  }

  protected override describeTransaction(transaction: FileTransaction): string {
    return transaction.committedFile ?? transaction.stagingFile;
  }

  protected override classifyCommitError(error: unknown): CommitErrorClassification {
    return error instanceof MissingStagingFileError ? "fatal" : "retry";
  }

  private writerOf(transaction: FileTransaction): StagingWriter {
    const writer = this.writers.get(transaction.stagingFile);
    if (writer === undefined) {
      throw new MissingStagingFileError(`transaction ${transaction.stagingFile} is not open in this sink`);
    }
    return writer;
  }

  private append(transaction: FileTransaction, writer: StagingWriter, value: IN): void {
    const encoded = this.encoder(value);
    const size = typeof encoded === "string" ? Buffer.byteLength(encoded) : encoded.length;
    if (typeof encoded !== "string") writer.onlyStrings = false;
    writer.parts.push(encoded);
    writer.bufferedBytes += size;
    transaction.byteLength += size;
    transaction.recordCount += 1;
  }

  /** Hands the buffered bytes to the write chain (taken now, so order is kept) and returns the chain. */
  private flush(transaction: FileTransaction, writer: StagingWriter): Promise<void> {
    if (writer.bufferedBytes > 0) {
      const data = writer.onlyStrings
        ? Buffer.from((writer.parts as string[]).join(""))
        : Buffer.concat(writer.parts.map((part) => (typeof part === "string" ? Buffer.from(part) : part)));
      writer.parts = [];
      writer.bufferedBytes = 0;
      writer.onlyStrings = true;
      const path = join(this.stagingDirectory, transaction.stagingFile);
      writer.writing = writer.writing.then(async () => {
        writer.handle ??= await open(path, "wx");
        await writeFully(writer.handle, data);
      });
    }
    return writer.writing;
  }

  /** A staging file's subtask and incarnation (`undefined` in names from before incarnations were in them). */
  private parseStagingName(
    name: string,
  ): { subtaskIndex: number; beganAfterPlusOne: number; incarnation: number | undefined } | undefined {
    if (!name.startsWith(`${this.filePrefix}-`)) return undefined;
    const match = /^(\d+)-(\d+)-(?:i(\d+)-)?[0-9a-f]{16}\.staging$/.exec(
      name.slice(this.filePrefix.length + 1),
    );
    if (match === null) return undefined;
    return {
      subtaskIndex: Number(match[1]),
      beganAfterPlusOne: Number(match[2]),
      incarnation: match[3] === undefined ? undefined : Number(match[3]),
    };
  }
}

/**
 * Reads the records of every committed file in `directory` (the `.staging` folder and other
 * dot-files are ignored), ordered by checkpoint id, then subtask, then name — for tests and demos.
 * The default decoder parses one JSON value per non-empty line, matching FileSink's default encoder.
 *
 * @example
 * ```ts
 * const orders = await readCommittedFiles<Order>("out/orders");
 * const lines = await readCommittedFiles("out/csv", { decoder: (content) => content.toString().split("\n").filter(Boolean) });
 * ```
 */
export async function readCommittedFiles<T = unknown>(
  directory: string,
  options: {
    decoder?: (content: Buffer, fileName: string) => T[];
    /** Only files whose name starts with `<filePrefix>-`. */
    filePrefix?: string;
  } = {},
): Promise<T[]> {
  const decoder =
    options.decoder ??
    ((content: Buffer) =>
      content
        .toString("utf8")
        .split("\n")
        .filter((line) => line.length > 0)
        .map((line) => JSON.parse(line) as T));
  let names: string[];
  try {
    names = await readdir(directory);
  } catch (error) {
    if (isCode(error, "ENOENT")) return [];
    throw error;
  }
  const files: Array<{ name: string; checkpointId: number; subtaskIndex: number }> = [];
  for (const name of names) {
    if (name.startsWith(".")) continue;
    if (options.filePrefix !== undefined && !name.startsWith(`${options.filePrefix}-`)) continue;
    if (!(await stat(join(directory, name))).isFile()) continue;
    const match = /^.+-(\d+)-(\d+)-[0-9a-f]{16}/.exec(name);
    files.push({
      name,
      subtaskIndex: match === null ? Number.POSITIVE_INFINITY : Number(match[1]),
      checkpointId: match === null ? Number.POSITIVE_INFINITY : Number(match[2]),
    });
  }
  files.sort(
    (a, b) =>
      a.checkpointId - b.checkpointId ||
      a.subtaskIndex - b.subtaskIndex ||
      (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
  );
  const records: T[] = [];
  for (const file of files) records.push(...decoder(await readFile(join(directory, file.name)), file.name));
  return records;
}

async function writeFully(handle: FileHandle, data: Buffer): Promise<void> {
  let offset = 0;
  while (offset < data.length) {
    const { bytesWritten } = await handle.write(data, offset, data.length - offset);
    offset += bytesWritten;
  }
}

async function unlinkIfExists(path: string): Promise<void> {
  try {
    await unlink(path);
  } catch (error) {
    if (!isCode(error, "ENOENT")) throw error;
  }
}
