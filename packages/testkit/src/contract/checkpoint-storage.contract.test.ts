import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  checkpointDirectoryName,
  filesystem,
  MemoryCheckpointStorage,
  subtaskStateFileName,
} from "@onceflow/core";
import { afterAll } from "vitest";
import { describeCheckpointStorageContract } from "./checkpoint-storage-contract.js";

const roots: string[] = [];
afterAll(async () => {
  await Promise.all(roots.map((root) => rm(root, { recursive: true, force: true })));
});

describeCheckpointStorageContract("MemoryCheckpointStorage", async () => new MemoryCheckpointStorage());

describeCheckpointStorageContract(
  "FileSystemCheckpointStorage",
  async () => {
    const root = await mkdtemp(join(tmpdir(), "onceflow-fs-contract-"));
    roots.push(root);
    return filesystem(root);
  },
  {
    // A second process on the same folder.
    reopen: async (storage) => filesystem(storage.root),
    // Flip a byte of the state file, as a bad disk would.
    corrupt: async (storage, at) => {
      const file = join(
        storage.root,
        at.jobId,
        at.scope,
        checkpointDirectoryName(at.checkpointId),
        subtaskStateFileName(at.subtaskIndex),
      );
      const bytes = await readFile(file);
      bytes[0] = (bytes[0] ?? 0) ^ 0xff;
      await writeFile(file, bytes);
    },
  },
);
