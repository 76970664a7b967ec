import { open } from "node:fs/promises";
import { outputTail } from "./processes.js";

/**
 * Reads the last lines of a (possibly large) log file, for error messages. Never throws: a missing
 * file gives a note saying so.
 *
 * @example
 * ```ts
 * throw new Error(`broker did not start; log tail:\n${await readLogTail(logPath)}`);
 * ```
 */
export async function readLogTail(path: string, maxLines = 60, maxBytes = 64 * 1024): Promise<string> {
  try {
    const file = await open(path, "r");
    try {
      const { size } = await file.stat();
      const length = Math.min(size, maxBytes);
      const buffer = Buffer.alloc(length);
      await file.read(buffer, 0, length, size - length);
      return outputTail(buffer.toString("utf8"), maxLines);
    } finally {
      await file.close();
    }
  } catch (error) {
    return `(no log at ${path}: ${(error as Error).message})`;
  }
}
