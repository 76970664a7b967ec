import { type FileHandle, open, readdir, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { ConfigurationError, RecoveryError } from "../errors/onceflow-error.js";
import type {
  Source,
  SourceBatch,
  SourceReader,
  SourceReaderContext,
  SourceSplit,
  SplitEnumeratorContext,
} from "./source.js";

/**
 * One file of a {@link FileLinesSource} and how far it has been read: `offset` is the byte offset
 * of the next unread line, `lineNumber` how many lines were read before it (the 0-based number of
 * the next line).
 *
 * @example
 * ```ts
 * const split: FileLinesSplit = { splitId: "/data/a.log", path: "/data/a.log", fileIndex: 0, offset: 120, lineNumber: 3 };
 * ```
 */
export interface FileLinesSplit extends SourceSplit {
  /** Absolute path of the file. */
  readonly path: string;
  /** Position of the file among the source's files (sorted by name for a directory). */
  readonly fileIndex: number;
  readonly offset: number;
  readonly lineNumber: number;
}

/**
 * Which files a {@link FileLinesSource} reads: a list of paths, or the files of one directory
 * (not its subdirectories) whose names match `pattern`, a glob with `*` and `?` such as `"*.log"`.
 *
 * @example
 * ```ts
 * const input: FileLinesInput = { directory: "/var/log/app", pattern: "*.log" };
 * ```
 */
export type FileLinesInput =
  | { readonly paths: readonly string[] }
  | { readonly directory: string; readonly pattern?: string };

/**
 * Options of a {@link FileLinesSource}: the input plus how much to read at once.
 *
 * @example
 * ```ts
 * const options: FileLinesSourceOptions = { paths: ["in/a.txt", "in/b.txt"], batchSize: 500 };
 * ```
 */
export type FileLinesSourceOptions = FileLinesInput & {
  /** Most lines per batch (default 1024). */
  readonly batchSize?: number;
  /** Bytes read from a file at a time (default 64 KiB); a reader holds about one chunk per open file. */
  readonly readChunkSize?: number;
  /** Shown in logs (default "file-lines"). */
  readonly name?: string;
};

const DEFAULT_BATCH_SIZE = 1024;
const DEFAULT_READ_CHUNK_SIZE = 64 * 1024;
const NEWLINE = 0x0a;
const CARRIAGE_RETURN = 0x0d;

/**
 * Reads text files line by line (UTF-8), one split per file — a bounded source like Flink's
 * `FileSource` with a line format. Lines end with `\n` or `\r\n`, which are not part of the record;
 * a last line without a newline is read too. A checkpoint stores the byte offset of each file's next
 * unread line, and a restore seeks there. Files are read in chunks, so memory stays bounded by the
 * chunk size and the longest line.
 *
 * @example
 * ```ts
 * const source = new FileLinesSource({ directory: "./input", pattern: "*.csv" });
 * job.fromSource(source).map((line) => line.split(","));
 * ```
 */
export class FileLinesSource implements Source<string, FileLinesSplit> {
  readonly name: string;
  readonly boundedness = "bounded" as const;
  private readonly options: FileLinesSourceOptions;

  constructor(options: FileLinesSourceOptions) {
    validateFileLinesOptions(options);
    this.options = options;
    this.name = options.name ?? "file-lines";
  }

  /**
   * Lists the files, each at offset 0.
   *
   * @example
   * ```ts
   * const splits = await new FileLinesSource({ paths: ["a.txt"] }).discoverSplits();
   * ```
   */
  async discoverSplits(_context?: SplitEnumeratorContext): Promise<FileLinesSplit[]> {
    const paths = await this.listFiles();
    return paths.map((path, fileIndex) => ({ splitId: path, path, fileIndex, offset: 0, lineNumber: 0 }));
  }

  /**
   * File `i` goes to subtask `i % parallelism`, which spreads files evenly.
   *
   * @example
   * ```ts
   * source.assignSplit(split, 4);
   * ```
   */
  assignSplit(split: FileLinesSplit, parallelism: number): number {
    return split.fileIndex % parallelism;
  }

  /**
   * Creates the reader of one subtask.
   *
   * @example
   * ```ts
   * const reader = source.createReader(readerContext);
   * ```
   */
  createReader(_context?: SourceReaderContext): FileLinesReader {
    return new FileLinesReader({
      batchSize: this.options.batchSize ?? DEFAULT_BATCH_SIZE,
      readChunkSize: this.options.readChunkSize ?? DEFAULT_READ_CHUNK_SIZE,
    });
  }

  private async listFiles(): Promise<string[]> {
    if ("paths" in this.options) {
      const paths = this.options.paths.map((path) => resolve(path));
      const seen = new Set<string>();
      for (const path of paths) {
        if (seen.has(path)) throw new ConfigurationError("fileLines.paths", `${path} is listed twice`);
        seen.add(path);
        const info = await stat(path).catch(() => undefined);
        if (info === undefined || !info.isFile()) {
          throw new ConfigurationError("fileLines.paths", `${path} is not a readable file`);
        }
      }
      return paths;
    }
    const directory = resolve(this.options.directory);
    const entries = await readdir(directory, { withFileTypes: true }).catch((error: unknown) => {
      throw new ConfigurationError("fileLines.directory", `cannot list ${directory}`, { cause: error });
    });
    const matches = globToRegExp(this.options.pattern ?? "*");
    return entries
      .filter((entry) => entry.isFile() && matches.test(entry.name))
      .map((entry) => entry.name)
      .sort()
      .map((name) => join(directory, name));
  }
}

function validateFileLinesOptions(options: FileLinesSourceOptions): void {
  if ("paths" in options) {
    if (!Array.isArray(options.paths)) throw new ConfigurationError("fileLines.paths", "must be an array");
  } else if (typeof (options as { directory?: unknown }).directory !== "string") {
    throw new ConfigurationError("fileLines", "give either `paths` (a list of files) or `directory`");
  }
  const { batchSize, readChunkSize } = options;
  if (batchSize !== undefined && !(Number.isSafeInteger(batchSize) && batchSize >= 1)) {
    throw new ConfigurationError("fileLines.batchSize", `must be a whole number ≥ 1, got ${batchSize}`);
  }
  if (readChunkSize !== undefined && !(Number.isSafeInteger(readChunkSize) && readChunkSize >= 1)) {
    throw new ConfigurationError(
      "fileLines.readChunkSize",
      `must be a whole number ≥ 1, got ${readChunkSize}`,
    );
  }
}

/** `*` matches any run of characters, `?` one character; everything else is literal. */
function globToRegExp(pattern: string): RegExp {
  let source = "";
  for (const char of pattern) {
    if (char === "*") source += ".*";
    else if (char === "?") source += ".";
    else source += char.replace(/[\\^$.|+()[\]{}]/g, "\\$&");
  }
  return new RegExp(`^${source}$`, "s");
}

interface FileState {
  readonly splitId: string;
  readonly path: string;
  readonly fileIndex: number;
  offset: number;
  lineNumber: number;
  handle: FileHandle | undefined;
  /** Bytes read but not yet handed out as lines: `buffer[start…]` begins at `offset`. */
  buffer: Buffer;
  start: number;
  endOfFile: boolean;
  finished: boolean;
}

const resolved: Promise<void> = Promise.resolve();

/**
 * Reads the files of a {@link FileLinesSource} assigned to one subtask, one file after the other.
 *
 * @example
 * ```ts
 * const reader = new FileLinesReader({ batchSize: 100, readChunkSize: 65536 });
 * reader.addSplits(await source.discoverSplits());
 * const batch = await reader.pollNext();
 * ```
 */
export class FileLinesReader implements SourceReader<string, FileLinesSplit> {
  private readonly batchSize: number;
  private readonly readChunkSize: number;
  private readonly files: FileState[] = [];
  private current = 0;

  constructor(options: { batchSize: number; readChunkSize: number }) {
    this.batchSize = options.batchSize;
    this.readChunkSize = options.readChunkSize;
  }

  addSplits(splits: FileLinesSplit[]): void {
    for (const split of splits) {
      this.files.push({
        splitId: split.splitId,
        path: split.path,
        fileIndex: split.fileIndex,
        offset: split.offset,
        lineNumber: split.lineNumber,
        handle: undefined,
        buffer: Buffer.alloc(0),
        start: 0,
        endOfFile: false,
        finished: false,
      });
    }
  }

  async pollNext(): Promise<SourceBatch<string> | undefined> {
    while (this.current < this.files.length) {
      const file = this.files[this.current];
      if (file === undefined || file.finished) {
        this.current++;
        continue;
      }
      if (file.handle === undefined) await this.openAtOffset(file);
      const records: string[] = [];
      // Fill the batch, reading a chunk at a time: memory stays at one batch plus one chunk.
      for (;;) {
        this.takeLines(file, records);
        if (records.length >= this.batchSize) break;
        if (file.endOfFile) {
          await this.finish(file);
          break;
        }
        await this.readChunk(file);
      }
      if (records.length > 0) return { splitId: file.splitId, records };
    }
    return undefined;
  }

  isAvailable(): Promise<void> {
    return resolved;
  }

  isFinished(): boolean {
    for (const file of this.files) if (!file.finished) return false;
    return true;
  }

  snapshotState(_checkpointId?: number): FileLinesSplit[] {
    return this.files.map((file) => ({
      splitId: file.splitId,
      path: file.path,
      fileIndex: file.fileIndex,
      offset: file.offset,
      lineNumber: file.lineNumber,
    }));
  }

  async close(): Promise<void> {
    await Promise.all(
      this.files.map(async (file) => {
        const handle = file.handle;
        file.handle = undefined;
        await handle?.close();
      }),
    );
  }

  private async openAtOffset(file: FileState): Promise<void> {
    const handle = await open(file.path, "r");
    try {
      const { size } = await handle.stat();
      if (size < file.offset) {
        throw new RecoveryError(
          `${file.path} has ${size} bytes but the checkpoint read it up to byte ${file.offset}: ` +
            "the file was truncated or replaced since",
          { details: { splitId: file.splitId, offset: file.offset, size } },
        );
      }
    } catch (error) {
      await handle.close();
      throw error;
    }
    file.handle = handle;
    file.buffer = Buffer.alloc(0);
    file.start = 0;
  }

  /** Moves complete lines from the buffer into `records`, up to a batch; advances the position past them. */
  private takeLines(file: FileState, records: string[]): void {
    const buffer = file.buffer;
    const before = records.length;
    let start = file.start;
    while (records.length < this.batchSize) {
      const newline = buffer.indexOf(NEWLINE, start);
      if (newline < 0) break;
      const end = newline > start && buffer[newline - 1] === CARRIAGE_RETURN ? newline - 1 : newline;
      records.push(buffer.toString("utf8", start, end));
      file.offset += newline + 1 - start;
      start = newline + 1;
    }
    if (records.length < this.batchSize && file.endOfFile && start < buffer.length) {
      // The last line has no newline.
      const end = buffer[buffer.length - 1] === CARRIAGE_RETURN ? buffer.length - 1 : buffer.length;
      records.push(buffer.toString("utf8", start, end));
      file.offset += buffer.length - start;
      start = buffer.length;
    }
    file.lineNumber += records.length - before;
    file.start = start;
  }

  private async readChunk(file: FileState): Promise<void> {
    const handle = file.handle;
    if (handle === undefined) return;
    const rest = file.buffer.subarray(file.start);
    // A fresh buffer per read: the previous one may still hold the unread rest of a line.
    const chunk = Buffer.allocUnsafe(this.readChunkSize);
    const { bytesRead } = await handle.read(chunk, 0, this.readChunkSize, file.offset + rest.length);
    if (bytesRead === 0) {
      file.endOfFile = true;
      return;
    }
    const fresh = chunk.subarray(0, bytesRead);
    file.buffer = rest.length === 0 ? fresh : Buffer.concat([rest, fresh]);
    file.start = 0;
  }

  private async finish(file: FileState): Promise<void> {
    file.finished = true;
    file.buffer = Buffer.alloc(0);
    file.start = 0;
    const handle = file.handle;
    file.handle = undefined;
    await handle?.close();
  }
}
