import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FileSink, readCommittedFiles } from "../../src/index.js";
import { gatedSink } from "./gated-sink.js";
import type { SinkUnderTest } from "./sink-under-test.js";

/**
 * The real {@link FileSink} in a fresh temporary folder, each instance behind its process's gate:
 * visible is what {@link readCommittedFiles} reads, left over is every staging file.
 *
 * @example
 * ```ts
 * await explore({ target: fileSinkUnderTest, runs: 30 });
 * ```
 */
export async function fileSinkUnderTest(): Promise<SinkUnderTest> {
  const directory = await mkdtemp(join(tmpdir(), "onceflow-explore-"));
  return {
    name: "file",
    createSink(host) {
      return gatedSink(
        new FileSink<number>({ directory, commitRetry: { maxAttempts: 3, initialDelay: 1 } }),
        host.gate,
      );
    },
    visible() {
      return readCommittedFiles<number>(directory);
    },
    async leftovers() {
      try {
        return (await readdir(join(directory, ".staging"))).map((name) => `staging file ${name}`);
      } catch {
        return [];
      }
    },
    async close() {
      await rm(directory, { recursive: true, force: true });
    },
  };
}
