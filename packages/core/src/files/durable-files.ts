import type { Dirent } from "node:fs";
import { type FileHandle, open, readdir, stat } from "node:fs/promises";

// Durable file operations: what a crash-safe write needs on POSIX (fsync the file, then its folder)
// and what Windows lacks (it cannot open a folder; NTFS journals renames), in one place.

/** An open folder to fsync, or `undefined` on Windows (which cannot open one; its renames are durable without it). */
export type DirectoryHandle = FileHandle | undefined;

/** Opens a folder for {@link syncDirectoryHandle}; `undefined` on Windows. */
export async function openDirectory(path: string): Promise<DirectoryHandle> {
  try {
    return await open(path, "r");
  } catch (error) {
    if (process.platform === "win32") return undefined;
    throw error;
  }
}

/** fsync an opened folder (see {@link syncDirectory}); the caller closes it. */
export async function syncDirectoryHandle(handle: DirectoryHandle): Promise<void> {
  try {
    await handle?.sync();
  } catch (error) {
    if (process.platform !== "win32") throw error;
  }
}

/** Writes a new file (`wx`: never over an existing one) and fsyncs it. */
export async function writeDurably(path: string, bytes: Uint8Array): Promise<void> {
  const handle = await writeDurablyOpen(path, bytes);
  await handle.close();
}

/**
 * Writes a new file and fsyncs it; returns it still open, for the caller to close (side by side
 * with its next step: each awaited file operation costs a turn of the event loop).
 */
export async function writeDurablyOpen(path: string, bytes: Uint8Array): Promise<FileHandle> {
  const handle = await open(path, "wx");
  try {
    await handle.writeFile(bytes);
    await handle.sync();
  } catch (error) {
    await handle.close().catch(() => {});
    throw error;
  }
  return handle;
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
