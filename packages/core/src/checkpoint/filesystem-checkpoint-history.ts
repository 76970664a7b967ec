import { randomBytes } from "node:crypto";
import { appendFile, mkdir, readdir, readFile, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { isCode, syncDirectory, writeDurably } from "../files/durable-files.js";
import { assertCheckpointName } from "./checkpoint-files.js";
import {
  assertHistorySize,
  type CheckpointHistoryEntry,
  compareHistoryEntries,
  parseHistoryEntry,
  validateHistoryEntry,
} from "./checkpoint-history-entries.js";

/** The folder of a job's history under the storage root: hidden, so `list` and `listJobs` skip it. */
export const HISTORY_FOLDER_NAME = ".history";
const HISTORY_FILE = /^(.+)\.jsonl$/;

interface HistoryHeader {
  readonly checkpointHistory: 1;
  /** How many entries a reader returns: the newest `keep` lines of the file. */
  readonly keep: number;
}

/**
 * The checkpoint history of a {@link FileSystemCheckpointStorage}: one JSON-lines file per scope,
 * `<root>/<jobId>/.history/<scope>.jsonl`, whose first line says how many entries to keep.
 *
 * An entry is appended without fsync: the history is for people, never for restoring, and an fsync
 * waits for the disk — on the event loop the subtasks share — for every checkpoint. A crash may lose
 * the last entries or tear the last line (readers skip a torn line). Appending stays cheap by
 * compacting rarely: once the file holds twice `keep` entries, it is rewritten with the newest `keep`
 * (written durably, then renamed over the old file, so a crash leaves the old or the new file).
 * Readers return the newest `keep` entries of each file either way.
 *
 * Appends of one scope are serialized in this process; one process writes a scope at a time
 * (incarnations fence the others), so files are never compacted by two writers at once.
 */
export class FileSystemCheckpointHistory {
  /** Entries in each file as this process last knew it, and the chain of its writes. */
  private readonly files = new Map<string, { lines: number; keep: number }>();
  private readonly writes = new Map<string, Promise<void>>();

  constructor(private readonly root: string) {}

  async record(entry: CheckpointHistoryEntry, keep: number): Promise<void> {
    validateHistoryEntry(entry);
    assertHistorySize(keep);
    const path = this.fileOf(entry.jobId, entry.scope);
    const write = (this.writes.get(path) ?? Promise.resolve()).then(() => this.append(path, entry, keep));
    const tracked = write.catch(() => undefined);
    this.writes.set(path, tracked);
    tracked.then(() => {
      if (this.writes.get(path) === tracked) this.writes.delete(path);
    });
    return write;
  }

  async read(jobId: string): Promise<CheckpointHistoryEntry[]> {
    assertCheckpointName("jobId", jobId);
    const folder = join(this.root, jobId, HISTORY_FOLDER_NAME);
    let names: string[];
    try {
      names = await readdir(folder);
    } catch (error) {
      if (isCode(error, "ENOENT", "ENOTDIR")) return [];
      throw error;
    }
    const found: CheckpointHistoryEntry[] = [];
    for (const name of names) {
      if (HISTORY_FILE.exec(name) === null) continue;
      const { header, entries } = await readHistoryFile(join(folder, name));
      found.push(...entries.slice(-(header?.keep ?? entries.length)).filter((e) => e.jobId === jobId));
    }
    return found.sort(compareHistoryEntries);
  }

  private fileOf(jobId: string, scope: string): string {
    return join(this.root, jobId, HISTORY_FOLDER_NAME, `${scope}.jsonl`);
  }

  private async append(path: string, entry: CheckpointHistoryEntry, keep: number): Promise<void> {
    let known = this.files.get(path);
    if (known === undefined) {
      await mkdir(join(path, ".."), { recursive: true });
      const { header, entries } = await readHistoryFile(path);
      known = { lines: entries.length, keep: header?.keep ?? 0 };
      if (header === undefined && entries.length === 0) {
        // A new file starts with its header.
        await appendFile(path, `${JSON.stringify(headerOf(keep))}\n`);
        known = { lines: 0, keep };
      }
      this.files.set(path, known);
    }
    await appendFile(path, `${JSON.stringify(entry)}\n`);
    known.lines++;
    if (known.lines >= 2 * keep || known.keep !== keep) {
      known.lines = await compact(path, keep);
      known.keep = keep;
    }
  }
}

function headerOf(keep: number): HistoryHeader {
  return { checkpointHistory: 1, keep };
}

async function readHistoryFile(
  path: string,
): Promise<{ header: HistoryHeader | undefined; entries: CheckpointHistoryEntry[] }> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    if (isCode(error, "ENOENT")) return { header: undefined, entries: [] };
    throw error;
  }
  let header: HistoryHeader | undefined;
  const entries: CheckpointHistoryEntry[] = [];
  for (const line of text.split("\n")) {
    if (line === "") continue;
    if (header === undefined && entries.length === 0 && line.includes('"checkpointHistory"')) {
      try {
        const parsed = JSON.parse(line) as HistoryHeader;
        if (Number.isSafeInteger(parsed.keep) && parsed.keep >= 1) header = parsed;
        continue;
      } catch {
        // Not a header: read on as an entry (and skipped if it is none).
      }
    }
    const entry = parseHistoryEntry(line);
    if (entry !== undefined) entries.push(entry);
  }
  return { header, entries };
}

/** Rewrites the file with its newest `keep` entries; returns how many it holds now. */
async function compact(path: string, keep: number): Promise<number> {
  const { entries } = await readHistoryFile(path);
  const kept = entries.slice(-keep);
  const lines = [headerOf(keep), ...kept].map((value) => `${JSON.stringify(value)}\n`).join("");
  const temporary = `${path}.tmp-${randomBytes(6).toString("hex")}`;
  try {
    await writeDurably(temporary, Buffer.from(lines, "utf8"));
    await rename(temporary, path);
  } catch (error) {
    await rm(temporary, { force: true }).catch(() => {});
    throw error;
  }
  await syncDirectory(join(path, "..")).catch(() => {});
  return kept.length;
}
