import { appendFile, mkdir, mkdtemp, readdir, readlink, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FileLinesSource } from "@onceflow/core";
import { afterAll } from "vitest";
import { describeSource } from "./describe-source.js";

// The source contract suite on core's FileLinesSource: one directory per case, one file per split.
// Small batches and read chunks, so checkpoints fall in the middle of a file and of a chunk.
// Leftovers: any file of the case's directory this process still holds open (/proc/self/fd).

const root = await mkdtemp(join(tmpdir(), "onceflow-file-lines-contract-"));
afterAll(() => rm(root, { recursive: true, force: true }));

const directoryOf = (scopeId: string) => join(root, scopeId);

async function openFilesUnder(directory: string): Promise<string[]> {
  const open: string[] = [];
  for (const fd of await readdir("/proc/self/fd").catch(() => [])) {
    const target = await readlink(join("/proc/self/fd", fd)).catch(() => "");
    if (target.startsWith(`${directory}/`)) open.push(`open file ${target} (fd ${fd})`);
  }
  return open;
}

describeSource<string>({
  name: "FileLinesSource",
  setup: (scope) => mkdir(directoryOf(scope.id)).then(() => {}),
  teardown: (scope) => rm(directoryOf(scope.id), { recursive: true, force: true }),
  writeInput: (scope, split, records) =>
    appendFile(join(directoryOf(scope.id), `part-${split}.txt`), records.map((line) => `${line}\n`).join("")),
  createSource: async (scope) => {
    // A split is a file: an idle split is an empty file.
    for (let split = 0; split < scope.splits; split++) {
      await appendFile(join(directoryOf(scope.id), `part-${split}.txt`), "");
    }
    return new FileLinesSource({ directory: directoryOf(scope.id), batchSize: 2, readChunkSize: 16 });
  },
  createRecord: (index) => `line ${index}`,
  identify: (line) => line,
  lingering: (scope) => openFilesUnder(directoryOf(scope.id)),
});
