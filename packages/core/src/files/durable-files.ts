import { closeSync, type Dirent, fsync, openSync, statSync, write, writeSync } from "node:fs";
import { open, readdir, stat } from "node:fs/promises";

// Durable file operations: what a crash-safe write needs on POSIX (fsync the file, then its folder)
// and what Windows lacks (it cannot open a folder; NTFS journals renames), in one place.

/** Writes a new file (`wx`: never over an existing one) and fsyncs it. */
export async function writeDurably(path: string, bytes: Uint8Array): Promise<void> {
  const handle = await open(path, "wx");
  try {
    await handle.writeFile(bytes);
    await handle.sync();
  } catch (error) {
    await handle.close().catch(() => {});
    throw error;
  }
  await handle.close();
}

/**
 * Up to this size a file is written synchronously, into the page cache (microseconds); a larger one
 * in the thread pool, so that a large state does not stall the event loop.
 */
const SYNCHRONOUS_WRITE_LIMIT = 1024 * 1024;

/**
 * Writes `bytes` into a new file opened (`openSync(path, "wx")`) by the caller, and fsyncs it. Each
 * awaited file operation waits for a turn of the event loop, which busy subtasks make long: a write
 * up to 1 MiB happens before this returns, so only the fsync (which waits for the disk) is awaited.
 *
 * @example
 * ```ts
 * const file = openSync(join(folder, "_metadata.json"), "wx");
 * try { await writeDurablyTo(file, bytes); } finally { closeQuietly(file); }
 * ```
 */
export async function writeDurablyTo(descriptor: number, bytes: Uint8Array): Promise<void> {
  let written = 0;
  if (bytes.byteLength <= SYNCHRONOUS_WRITE_LIMIT) {
    while (written < bytes.byteLength) written += writeSync(descriptor, bytes, written);
  } else {
    while (written < bytes.byteLength) written += await writeAt(descriptor, bytes, written);
  }
  await syncDescriptor(descriptor, "file");
}

/** `fs.write` of `bytes` from `offset`, in the thread pool; resolves with the bytes written. */
function writeAt(descriptor: number, bytes: Uint8Array, offset: number): Promise<number> {
  return new Promise((resolve, reject) => {
    write(descriptor, bytes, offset, bytes.byteLength - offset, null, (error, count) => {
      if (error === null) resolve(count);
      else reject(error);
    });
  });
}

/** `closeSync`, whose failure is ignored: closing cannot undo a write, and the fsync before it reported any error. */
export function closeQuietly(descriptor: number | undefined): void {
  if (descriptor === undefined) return;
  try {
    closeSync(descriptor);
  } catch {
    // Ignored: see the summary.
  }
}

/** Opens a folder synchronously for {@link syncDescriptor}; `undefined` on Windows (it cannot open one). */
export function openDirectorySync(path: string): number | undefined {
  try {
    return openSync(path, "r");
  } catch (error) {
    if (process.platform === "win32") return undefined;
    throw error;
  }
}

/**
 * fsync an open file or folder (a folder's `undefined` from {@link openDirectorySync} on Windows
 * is nothing to do), in the thread pool; the caller closes it.
 */
export function syncDescriptor(descriptor: number | undefined, kind: "file" | "folder"): Promise<void> {
  if (descriptor === undefined) return Promise.resolve();
  return new Promise((resolve, reject) => {
    fsync(descriptor, (error) => {
      // Windows cannot fsync a folder; its renames are durable without it.
      if (error === null || (kind === "folder" && process.platform === "win32")) resolve();
      else reject(error);
    });
  });
}

/** fsync a folder so the names created, renamed or removed in it survive a power loss. */
export async function syncDirectory(path: string): Promise<void> {
  let handle: Awaited<ReturnType<typeof open>> | undefined;
  try {
    handle = await open(path, "r");
    await handle.sync();
  } catch (error) {
    // Windows cannot open or fsync a folder; its renames are durable without it.
    if (process.platform !== "win32") throw error;
  } finally {
    await handle?.close();
  }
}

/**
 * `items.map(fn)`, at most `limit` at a time, results in the order of `items`. Rejects with the
 * first error once every call started has settled.
 *
 * @example
 * ```ts
 * const sizes = await mapConcurrently(paths, 16, async (path) => (await stat(path)).size);
 * ```
 */
export async function mapConcurrently<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++;
      try {
        results[index] = await fn(items[index]!);
      } catch (error) {
        next = items.length; // start no more
        throw error;
      }
    }
  };
  const workers = Array.from({ length: Math.min(limit, items.length) }, worker);
  const settled = await Promise.allSettled(workers);
  const failure = settled.find((result) => result.status === "rejected");
  if (failure !== undefined) throw failure.reason;
  return results;
}

/** The folders in `path`; none when it does not exist. */
export async function readDirectories(path: string): Promise<Dirent[]> {
  try {
    return (await readdir(path, { withFileTypes: true })).filter((entry) => entry.isDirectory());
  } catch (error) {
    if (isCode(error, "ENOENT", "ENOTDIR")) return [];
    throw error;
  }
}

/** {@link exists}, synchronously. */
export function pathExistsSync(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch (error) {
    if (isCode(error, "ENOENT", "ENOTDIR")) return false;
    throw error;
  }
}

/** Whether `path` exists (a missing parent, or a file where a folder was expected, is "no"). */
export async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (error) {
    if (isCode(error, "ENOENT", "ENOTDIR")) return false;
    throw error;
  }
}

/** Whether `error` is a Node system error with one of `codes` (`ENOENT`, `EEXIST`, …). */
export function isCode(error: unknown, ...codes: string[]): boolean {
  return (
    typeof error === "object" && error !== null && codes.includes(String((error as { code?: unknown }).code))
  );
}
