import { randomBytes } from "node:crypto";
import { mkdtempSync, openSync, renameSync } from "node:fs";
import { mkdir, readFile, rename, rm, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { CheckpointError, ConfigurationError } from "../errors/onceflow-error.js";
import {
  closeQuietly,
  exists,
  isCode,
  mapConcurrently,
  openDirectorySync,
  pathExistsSync,
  readDirectories,
  syncDescriptor,
  syncDirectory,
  writeDurablyTo,
} from "../files/durable-files.js";
import {
  assertCheckpointId,
  assertCheckpointName,
  checksumOf,
  compareCheckpoints,
  describeCheckpoint,
  parseCheckpointMetadata,
  validateCheckpointForStore,
  verifySubtaskStates,
} from "./checkpoint-files.js";
import type { CheckpointHistoryEntry } from "./checkpoint-history-entries.js";
import type {
  CheckpointMetadata,
  CheckpointStorage,
  ClaimIncarnationOptions,
  CompletedCheckpoint,
  IncarnationSeries,
} from "./checkpoint-storage.js";
import { FileSystemCheckpointHistory } from "./filesystem-checkpoint-history.js";
import { FileSystemIncarnations } from "./filesystem-incarnations.js";
import { fencingScopeOf } from "./incarnation.js";

/** The name of the metadata file in a checkpoint folder. */
export const METADATA_FILE_NAME = "_metadata.json";

/** Prefix of a checkpoint being written; never listed, removed by `cleanupPartialCheckpoints`. */
const TEMP_PREFIX = ".tmp-chk-";
/** Prefix of a checkpoint being discarded; never listed, removed by `cleanupPartialCheckpoints`. */
const DISCARD_PREFIX = ".discard-chk-";
const CHECKPOINT_DIR = /^chk-(\d+)$/;
/** How many reads `list` runs at once (well below any open-files limit). */
const LIST_CONCURRENCY = 16;
const DEFAULT_STALE_AFTER_MS = 60_000;

/**
 * The folder name of checkpoint `id`: `chk-` and the id padded to 10 digits, so folders sort by id.
 *
 * @example
 * ```ts
 * checkpointDirectoryName(12); // "chk-0000000012"
 * ```
 */
export function checkpointDirectoryName(checkpointId: number): string {
  return `chk-${String(checkpointId).padStart(10, "0")}`;
}

/**
 * The file name of one subtask's state in a checkpoint folder.
 *
 * @example
 * ```ts
 * subtaskStateFileName(3); // "subtask-3.state"
 * ```
 */
export function subtaskStateFileName(subtaskIndex: number): string {
  return `subtask-${subtaskIndex}.state`;
}

/** What {@link FileSystemCheckpointStorage.verify} found for one subtask's state file. */
export interface SubtaskFileCheck {
  readonly subtaskIndex: number;
  readonly path: string;
  readonly expectedBytes: number;
  /** The file's size, or `undefined` when it is missing. */
  readonly actualBytes: number | undefined;
  readonly ok: boolean;
  /** Why it is not ok. */
  readonly problem?: string;
}

/** The result of {@link FileSystemCheckpointStorage.verify}. */
export interface CheckpointFileReport {
  readonly path: string;
  readonly metadata: CheckpointMetadata;
  readonly subtasks: readonly SubtaskFileCheck[];
  /** True when every state file has the size and SHA-256 the metadata records. */
  readonly ok: boolean;
}

/** Options of {@link FileSystemCheckpointStorage.cleanupPartialCheckpoints}. */
export interface CleanupOptions {
  /** Only this job (default: every job under the root). */
  readonly jobId?: string;
  /** Only this scope of the job. */
  readonly scope?: string;
  /**
   * Only remove leftovers older than this many milliseconds (default 60 000). A younger temporary
   * folder may belong to another process still writing its checkpoint; pass 0 to remove all when
   * no other process writes to this root.
   */
  readonly olderThanMs?: number;
}

/**
 * Options of {@link FileSystemCheckpointStorage}.
 *
 * @example
 * ```ts
 * const storage = filesystem("./checkpoints", { corruptCheckpoints: "skip" });
 * ```
 */
export interface FileSystemCheckpointStorageOptions {
  /**
   * What `list` does with a `chk-*` folder whose metadata is unreadable (a damaged disk, a hand
   * edit: onceflow never leaves one, its writes are atomic). `"fail"` (default): throw a
   * `CheckpointError` coded `CHECKPOINT_CORRUPT` that names the folder, so "latest" never silently
   * restores an older checkpoint. `"skip"`: leave it out and restore the newest readable one —
   * output committed after that older checkpoint is produced again.
   */
  readonly corruptCheckpoints?: "fail" | "skip";
}

/**
 * Stores checkpoints as files (Flink's `FileSystemCheckpointStorage`), one folder per checkpoint:
 *
 * ```text
 * <root>/<jobId>/<scope>/chk-0000000012/subtask-0.state
 *                                      /subtask-1.state
 *                                      /_metadata.json      (pretty JSON, written last)
 * <root>/<jobId>/.incarnations/<n>/scope                    (the scope incarnation n runs)
 *                                 /staging/               (where incarnation n writes; gone once fenced)
 * <root>/<jobId>/.history/<scope>.jsonl                     (the checkpoint history, JSON lines)
 * ```
 *
 * Incarnations ({@link FileSystemCheckpointStorage.claimIncarnation}) fence with one atomic rename:
 * a checkpoint of incarnation `n` is written under `.incarnations/<n>/staging/` and renamed into its
 * scope from there; a newer claim renames that `staging` folder away, so from then on the old
 * incarnation's rename (or anything it writes) fails — it landed before, or it never lands.
 *
 * A checkpoint is written into a temporary folder `.tmp-chk-<id>-<random>` next to its final place,
 * every file fsynced, then the folder is renamed and its parent fsynced. A crash at any moment leaves
 * either the whole checkpoint or a temporary folder that `list` ignores and
 * {@link FileSystemCheckpointStorage.cleanupPartialCheckpoints} removes (the first `store` of each
 * scope does so for leftovers older than a minute). `load` checks every file's size and SHA-256.
 *
 * The root must be a local filesystem (or one with POSIX rename and fsync semantics).
 *
 * @example
 * ```ts
 * const storage = new FileSystemCheckpointStorage("/var/lib/onceflow/checkpoints");
 * const latest = (await storage.list("orders")).at(-1);
 * ```
 */
export class FileSystemCheckpointStorage implements CheckpointStorage {
  /** The absolute root folder. */
  readonly root: string;
  readonly description: string;
  private readonly cleanedScopes = new Set<string>();
  /** {@link FileSystemCheckpointStorage.prepareScope}'s work, so a store does not wait for a `mkdir`. */
  private readonly preparedScopes = new Map<string, Promise<void>>();
  private readonly incarnations: FileSystemIncarnations;
  private readonly history: FileSystemCheckpointHistory;
  private readonly corruptCheckpoints: "fail" | "skip";

  constructor(root: string, options: FileSystemCheckpointStorageOptions = {}) {
    if (typeof root !== "string" || root.trim() === "") {
      throw new ConfigurationError("checkpointing.storage", "filesystem(path) needs a folder path");
    }
    this.root = resolve(root);
    this.description = `filesystem:${this.root}`;
    this.incarnations = new FileSystemIncarnations(this.root, this.description);
    this.history = new FileSystemCheckpointHistory(this.root);
    this.corruptCheckpoints = options.corruptCheckpoints ?? "fail";
    if (this.corruptCheckpoints !== "fail" && this.corruptCheckpoints !== "skip") {
      throw new ConfigurationError(
        "corruptCheckpoints",
        `must be "fail" or "skip", got ${JSON.stringify(this.corruptCheckpoints)}`,
      );
    }
  }

  async store(checkpoint: CompletedCheckpoint): Promise<void> {
    const metadataJson = validateCheckpointForStore(checkpoint);
    const { metadata } = checkpoint;
    const { checkpointId } = metadata;
    const failed = (message: string, cause?: unknown): CheckpointError =>
      new CheckpointError("CHECKPOINT_FAILED", `${describeCheckpoint(metadata)}: ${message}`, {
        checkpointId,
        cause,
      });

    const scopeDir = this.scopeDirectory(metadata.jobId, metadata.scope);
    const finalDir = join(scopeDir, checkpointDirectoryName(checkpointId));
    let tempDir: string | undefined;
    const opened = new Set<number>();
    const close = (descriptors: Iterable<number | undefined>): void => {
      for (const descriptor of descriptors) if (opened.delete(descriptor as number)) closeQuietly(descriptor);
    };
    try {
      // Each awaited file operation waits for a turn of the event loop, and the subtasks keep it
      // busy (10-50 ms a turn while they catch up with a backlog, as after every start): a store
      // of ten awaited steps took 250-400 ms. So only the disk is awaited (the fsyncs, side by
      // side; the scope's folder unless the claim made it); the rest — a folder made, files
      // written into the page cache (up to 1 MiB each), a rename: microseconds each on the local
      // filesystem the root must be — runs synchronously. Two turns in all.
      const [ready, staging] = await Promise.allSettled([
        this.prepareScope(metadata.jobId, metadata.scope),
        // The temporary folder goes into the incarnation's staging folder (made at its claim);
        // without an incarnation, into the scope's folder.
        metadata.incarnation === undefined
          ? scopeDir
          : this.incarnations.stagingOf(
              metadata.jobId,
              fencingScopeOf(metadata),
              metadata.incarnation,
              checkpointId,
            ),
      ]);
      if (ready.status === "rejected") throw ready.reason;
      if (pathExistsSync(finalDir)) throw failed(`already exists at ${finalDir}`);
      if (staging.status === "rejected") throw staging.reason;
      try {
        tempDir = mkdtempSync(join(staging.value, `${TEMP_PREFIX}${checkpointId}-`));
      } catch (error) {
        throw await this.incarnations.fencedOr(metadata, error);
      }
      const written = tempDir;
      // The order within the folder does not matter: nothing reads it before the rename below
      // publishes it whole.
      const files: [string, Uint8Array][] = [...checkpoint.subtaskStates].map(([subtaskIndex, bytes]) => [
        subtaskStateFileName(subtaskIndex),
        bytes,
      ]);
      files.push([METADATA_FILE_NAME, Buffer.from(metadataJson, "utf8")]);
      const created: { file: number; bytes: Uint8Array }[] = [];
      for (const [name, bytes] of files) {
        const file = openSync(join(written, name), "wx");
        opened.add(file);
        created.push({ file, bytes });
      }
      const tempFolder = openDirectorySync(written);
      const scopeFolder = openDirectorySync(scopeDir);
      for (const folder of [tempFolder, scopeFolder]) if (folder !== undefined) opened.add(folder);
      // The files' contents and names are durable before the rename makes the folder a checkpoint.
      // Side by side: the folder's fsync covers the names it holds when it runs, all made above.
      const synced = await Promise.allSettled([
        ...created.map(({ file, bytes }) => writeDurablyTo(file, bytes)),
        syncDescriptor(tempFolder, "folder"),
      ]);
      // Closed before the rename: Windows cannot rename a folder with open files.
      close([...created.map(({ file }) => file), tempFolder]);
      for (const result of synced) if (result.status === "rejected") throw result.reason;
      try {
        // The commit point, and the fence: a newer claim renamed `staging` away, so this fails.
        renameSync(written, finalDir);
      } catch (error) {
        // Another writer got there between the check above and the rename.
        if (isCode(error, "ENOTEMPTY", "EEXIST")) throw failed(`already exists at ${finalDir}`, error);
        throw await this.incarnations.fencedOr(metadata, error);
      }
      tempDir = undefined;
      await syncDescriptor(scopeFolder, "folder");
    } catch (error) {
      close([...opened]);
      // The scope's folder is made again by the next store, in case it is what went missing.
      this.preparedScopes.delete(`${metadata.jobId}/${metadata.scope}`);
      if (tempDir !== undefined) await rm(tempDir, { recursive: true, force: true }).catch(() => {});
      if (error instanceof CheckpointError) throw error;
      // A write into a staging folder that a newer claim renamed away: fenced, not broken.
      const fenced = await this.incarnations.fencedOr(metadata, error);
      if (fenced instanceof CheckpointError) throw fenced;
      throw failed(`could not be written under ${scopeDir}: ${messageOf(error)}`, error);
    } finally {
      close([...opened]);
    }
  }

  /**
   * Completed checkpoints of a job, every scope, ordered by checkpoint id then scope. Temporary
   * folders are left out: they were never completed. A `chk-*` folder without readable metadata
   * throws `CHECKPOINT_CORRUPT` (or is left out with `corruptCheckpoints: "skip"`).
   */
  async list(jobId: string): Promise<CheckpointMetadata[]> {
    assertCheckpointName("jobId", jobId);
    // Scopes and metadata files are read side by side, a few at a time: each read waits for a turn
    // of an event loop the subtasks keep busy, and retention lists after every store.
    const scopes = (await readDirectories(join(this.root, jobId)))
      .map((entry) => entry.name)
      .filter((scope) => !scope.startsWith("."));
    const folders = (
      await mapConcurrently(scopes, LIST_CONCURRENCY, async (scope) => {
        const scopeDir = join(this.root, jobId, scope);
        return (await readDirectories(scopeDir)).flatMap((entry) => {
          const match = CHECKPOINT_DIR.exec(entry.name);
          return match === null
            ? []
            : [{ scope, checkpointId: Number(match[1]), path: join(scopeDir, entry.name) }];
        });
      })
    ).flat();
    const read = await mapConcurrently(folders, LIST_CONCURRENCY, async ({ scope, checkpointId, path }) => {
      let metadata: CheckpointMetadata;
      try {
        metadata = await readMetadata(path, checkpointId);
      } catch (error) {
        // Discarded meanwhile (retention in the process that owns the scope): gone, not damaged.
        if (!(await exists(path))) return undefined;
        if (this.corruptCheckpoints === "skip") return undefined;
        throw corruptFolder(path, { jobId, scope, checkpointId }, messageOf(error), error);
      }
      if (metadata.jobId !== jobId || metadata.scope !== scope || metadata.checkpointId !== checkpointId) {
        if (this.corruptCheckpoints === "skip") return undefined;
        throw corruptFolder(
          path,
          { jobId, scope, checkpointId },
          `its metadata describes ${describeCheckpoint(metadata)}`,
        );
      }
      return metadata;
    });
    const found = read.filter((metadata): metadata is CheckpointMetadata => metadata !== undefined);
    return found.sort(compareCheckpoints);
  }

  /**
   * The job ids that have a folder under the root, sorted (they may hold no completed checkpoint).
   *
   * @example
   * ```ts
   * for (const jobId of await storage.listJobs()) console.log(jobId, (await storage.list(jobId)).length);
   * ```
   */
  async listJobs(): Promise<string[]> {
    return (await readDirectories(this.root))
      .map((entry) => entry.name)
      .filter((name) => !name.startsWith("."))
      .sort();
  }

  async load(jobId: string, scope: string, checkpointId: number): Promise<CompletedCheckpoint> {
    const { metadata, states } = await this.read(jobId, scope, checkpointId);
    const problem = states.find((state) => !state.check.ok);
    if (problem !== undefined) {
      throw new CheckpointError(
        "CHECKPOINT_CORRUPT",
        `${describeCheckpoint(metadata)}: ${problem.check.problem ?? "damaged"} (${problem.check.path})`,
        { checkpointId },
      );
    }
    const subtaskStates = new Map<number, Buffer>();
    for (const state of states)
      if (state.bytes !== undefined) subtaskStates.set(state.check.subtaskIndex, state.bytes);
    // Also catches entries listed twice: never return state the metadata does not describe exactly.
    verifySubtaskStates(metadata, subtaskStates, "CHECKPOINT_CORRUPT");
    return { metadata, subtaskStates };
  }

  /**
   * Checks every state file of a checkpoint against its metadata and reports each one, instead of
   * stopping at the first problem as `load` does. Used by `onceflow checkpoints inspect`.
   *
   * @throws CheckpointError `CHECKPOINT_NOT_FOUND` when the folder does not exist, `CHECKPOINT_CORRUPT`
   * when its metadata is missing or unreadable.
   * @example
   * ```ts
   * const report = await storage.verify("orders", "all", 12);
   * if (!report.ok) console.error(report.subtasks.filter((s) => !s.ok));
   * ```
   */
  async verify(jobId: string, scope: string, checkpointId: number): Promise<CheckpointFileReport> {
    const { path, metadata, states } = await this.read(jobId, scope, checkpointId);
    const subtasks = states.map((state) => state.check);
    return { path, metadata, subtasks, ok: subtasks.every((check) => check.ok) };
  }

  /**
   * Removes a checkpoint. The folder is first renamed to a hidden temporary name, so a crash while
   * deleting never leaves a half checkpoint that `list` would show. Discarding a checkpoint that is
   * not there does nothing, so retention in two processes may race harmlessly.
   */
  async discard(jobId: string, scope: string, checkpointId: number): Promise<void> {
    assertCheckpointName("jobId", jobId);
    assertCheckpointName("scope", scope);
    assertCheckpointId(checkpointId);
    const scopeDir = this.scopeDirectory(jobId, scope);
    const doomed = join(scopeDir, `${DISCARD_PREFIX}${checkpointId}-${randomBytes(6).toString("hex")}`);
    try {
      await rename(join(scopeDir, checkpointDirectoryName(checkpointId)), doomed);
    } catch (error) {
      if (isCode(error, "ENOENT")) return;
      throw new CheckpointError(
        "CHECKPOINT_FAILED",
        `${describeCheckpoint({ jobId, scope, checkpointId })}: could not be discarded: ${messageOf(error)}`,
        { checkpointId, cause: error },
      );
    }
    await syncDirectory(scopeDir).catch(() => {});
    // The checkpoint is gone from `list` already; a leftover folder is removed by the next cleanup.
    await rm(doomed, { recursive: true, force: true }).catch(() => {});
  }

  /**
   * Removes what interrupted `store` and `discard` calls left behind: the hidden `.tmp-chk-*` and
   * `.discard-chk-*` folders. Call it when a job starts; the first `store` of each scope also calls it
   * for that scope. Folders named `chk-*` without readable metadata are kept for a person to look at.
   *
   * @returns the paths removed.
   * @example
   * ```ts
   * await storage.cleanupPartialCheckpoints({ jobId: "orders", olderThanMs: 0 });
   * ```
   */
  async cleanupPartialCheckpoints(options: CleanupOptions = {}): Promise<string[]> {
    const olderThanMs = options.olderThanMs ?? DEFAULT_STALE_AFTER_MS;
    if (!Number.isFinite(olderThanMs) || olderThanMs < 0) {
      throw new ConfigurationError("olderThanMs", `must be 0 or more, got ${String(olderThanMs)}`);
    }
    if (options.jobId !== undefined) assertCheckpointName("jobId", options.jobId);
    if (options.scope !== undefined) assertCheckpointName("scope", options.scope);
    const jobIds = options.jobId !== undefined ? [options.jobId] : await this.listJobs();
    const removed: string[] = [];
    const cutoff = Date.now() - olderThanMs;
    for (const jobId of jobIds) {
      const scopes =
        options.scope !== undefined
          ? [options.scope]
          : (await readDirectories(join(this.root, jobId))).map((entry) => entry.name);
      for (const scope of scopes) {
        const scopeDir = join(this.root, jobId, scope);
        for (const entry of await readDirectories(scopeDir)) {
          if (!entry.name.startsWith(TEMP_PREFIX) && !entry.name.startsWith(DISCARD_PREFIX)) continue;
          const path = join(scopeDir, entry.name);
          const info = await stat(path).catch(() => undefined);
          if (info === undefined || (olderThanMs > 0 && info.mtimeMs > cutoff)) continue;
          await rm(path, { recursive: true, force: true });
          removed.push(path);
        }
      }
    }
    return removed.sort();
  }

  /**
   * Claims incarnation `n` by renaming a prepared folder (holding the scope's name and an empty
   * `staging/`) to `.incarnations/<n>`: the rename fails when `n` is taken, so two claimers never get
   * the same number. Then it checks that no newer claim of the scope won meanwhile, and fences every
   * older incarnation of the scope by renaming its `staging/` away. See
   * {@link CheckpointStorage.claimIncarnation} for the contract.
   */
  async claimIncarnation(
    jobId: string,
    scope: string,
    options: ClaimIncarnationOptions = {},
  ): Promise<number> {
    const incarnation = await this.incarnations.claim(jobId, scope, options);
    // Here the job's event loop is idle; at the first store it is busy, and each awaited step of
    // making the folder would take a turn. A failure here is the first store's to report.
    await this.prepareScope(jobId, scope).catch(() => {});
    return incarnation;
  }

  claimedScopes(jobId: string): Promise<string[]> {
    return this.incarnations.claimedScopes(jobId);
  }

  /**
   * The job's incarnation series (`<root>/<jobId>/.incarnations/series`, deleted with the
   * incarnations it numbers) and the newest incarnation. See {@link CheckpointStorage.describeIncarnations}.
   */
  describeIncarnations(jobId: string): Promise<IncarnationSeries> {
    return this.incarnations.describe(jobId);
  }

  /**
   * Appends to `<root>/<jobId>/.history/<scope>.jsonl` without fsync (see
   * {@link CheckpointStorage.recordHistory}); a crash may lose the last entries, never the file.
   */
  recordHistory(entry: CheckpointHistoryEntry, keep: number): Promise<void> {
    return this.history.record(entry, keep);
  }

  readHistory(jobId: string): Promise<CheckpointHistoryEntry[]> {
    return this.history.read(jobId);
  }

  private scopeDirectory(jobId: string, scope: string): string {
    assertCheckpointName("jobId", jobId);
    assertCheckpointName("scope", scope);
    return join(this.root, jobId, scope);
  }

  /**
   * The scope's folder made durably and its leftovers cleaned up, once per storage (the folder
   * again after a store failed): started by the claim, while the job's event loop is still idle.
   */
  private prepareScope(jobId: string, scope: string): Promise<void> {
    const key = `${jobId}/${scope}`;
    let prepared = this.preparedScopes.get(key);
    if (prepared === undefined) {
      prepared = Promise.all([
        this.ensureScopeDirectory(jobId, scope),
        this.cleanupScopeOnce(jobId, scope),
      ]).then(() => undefined);
      this.preparedScopes.set(key, prepared);
      prepared.catch(() => this.preparedScopes.delete(key));
    }
    return prepared;
  }

  private async ensureScopeDirectory(jobId: string, scope: string): Promise<void> {
    const scopeDir = this.scopeDirectory(jobId, scope);
    const created = await mkdir(scopeDir, { recursive: true });
    // New folders are durable only once their parents are synced.
    if (created !== undefined)
      await Promise.all([syncDirectory(join(this.root, jobId)), syncDirectory(this.root)]);
  }

  private async cleanupScopeOnce(jobId: string, scope: string): Promise<void> {
    const key = `${jobId}/${scope}`;
    if (this.cleanedScopes.has(key)) return;
    this.cleanedScopes.add(key);
    await this.cleanupPartialCheckpoints({ jobId, scope }).catch(() => {});
  }

  private async read(
    jobId: string,
    scope: string,
    checkpointId: number,
  ): Promise<{
    path: string;
    metadata: CheckpointMetadata;
    states: { check: SubtaskFileCheck; bytes: Buffer | undefined }[];
  }> {
    assertCheckpointId(checkpointId);
    const path = join(this.scopeDirectory(jobId, scope), checkpointDirectoryName(checkpointId));
    const at = describeCheckpoint({ jobId, scope, checkpointId });
    if (!(await exists(path))) {
      throw new CheckpointError("CHECKPOINT_NOT_FOUND", `${at} does not exist in ${this.description}`, {
        checkpointId,
      });
    }
    const metadata = await readMetadata(path, checkpointId).catch((error: unknown) => {
      throw new CheckpointError(
        "CHECKPOINT_CORRUPT",
        `${at}: its metadata is unreadable (${messageOf(error)}); the checkpoint cannot be restored`,
        { checkpointId, cause: error },
      );
    });
    if (metadata.jobId !== jobId || metadata.scope !== scope || metadata.checkpointId !== checkpointId) {
      throw new CheckpointError(
        "CHECKPOINT_CORRUPT",
        `${at}: its metadata describes ${describeCheckpoint(metadata)}`,
        { checkpointId },
      );
    }
    const states = await Promise.all(
      metadata.subtasks.map(async (entry) => {
        const file = join(path, subtaskStateFileName(entry.subtaskIndex));
        const base = { subtaskIndex: entry.subtaskIndex, path: file, expectedBytes: entry.stateBytes };
        let bytes: Buffer;
        try {
          bytes = await readFile(file);
        } catch (error) {
          const problem = isCode(error, "ENOENT")
            ? `the state file of subtask ${entry.subtaskIndex} is missing`
            : `the state file of subtask ${entry.subtaskIndex} is unreadable: ${messageOf(error)}`;
          return { check: { ...base, actualBytes: undefined, ok: false, problem }, bytes: undefined };
        }
        let problem: string | undefined;
        if (bytes.length !== entry.stateBytes) {
          problem = `the state file of subtask ${entry.subtaskIndex} has ${bytes.length} bytes, the metadata says ${entry.stateBytes}`;
        } else if (checksumOf(bytes) !== entry.sha256) {
          problem = `the state file of subtask ${entry.subtaskIndex} fails its SHA-256 check`;
        }
        const check: SubtaskFileCheck =
          problem === undefined
            ? { ...base, actualBytes: bytes.length, ok: true }
            : { ...base, actualBytes: bytes.length, ok: false, problem };
        return { check, bytes };
      }),
    );
    return { path, metadata, states };
  }
}

/**
 * Checkpoint storage in a folder: the default, and what production jobs use (Flink's
 * `state.checkpoints.dir`). See {@link FileSystemCheckpointStorage} for the layout.
 *
 * @example
 * ```ts
 * const job = new Job({ jobId: "orders", checkpointing: { interval: 5000, storage: filesystem("./checkpoints") } });
 * ```
 */
export function filesystem(
  path: string,
  options: FileSystemCheckpointStorageOptions = {},
): FileSystemCheckpointStorage {
  return new FileSystemCheckpointStorage(path, options);
}

async function readMetadata(checkpointDir: string, checkpointId: number): Promise<CheckpointMetadata> {
  return parseCheckpointMetadata(
    await readFile(join(checkpointDir, METADATA_FILE_NAME), "utf8"),
    checkpointId,
  );
}

function corruptFolder(
  path: string,
  at: Pick<CheckpointMetadata, "jobId" | "scope" | "checkpointId">,
  problem: string,
  cause?: unknown,
): CheckpointError {
  return new CheckpointError(
    "CHECKPOINT_CORRUPT",
    `${describeCheckpoint(at)}: ${problem} (${path}). onceflow never leaves such a folder (its writes are atomic), so it was damaged afterwards; it is not skipped, because restoring an older checkpoint silently would produce its output again. Repair or move the folder aside, restore a named checkpoint, or pass { corruptCheckpoints: "skip" } to filesystem() to fall back to the newest readable one.`,
    { checkpointId: at.checkpointId, cause },
  );
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
