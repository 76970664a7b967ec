import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FileSink, readCommittedFiles } from "@onceflow/core";
import { afterAll } from "vitest";
import { describeTwoPhaseCommitSink } from "./describe-two-phase-commit-sink.js";

// The contract suite on core's FileSink: one directory per case, read back with readCommittedFiles
// (which ignores the .staging folder, as any reader must). Leftovers: any file still in .staging.

interface Line {
  readonly id: number;
  readonly text: string;
}

const root = await mkdtemp(join(tmpdir(), "onceflow-file-contract-"));
afterAll(() => rm(root, { recursive: true, force: true }));

describeTwoPhaseCommitSink({
  name: "FileSink",
  createSink: (scope) =>
    new FileSink<Line>({ directory: join(root, scope.id), commitRetry: { initialDelay: 10 } }),
  readCommitted: (scope) => readCommittedFiles<Line>(join(root, scope.id)),
  createRecord: (index): Line => ({ id: index, text: `line ${index}` }),
  lingering: async (scope) =>
    (await readdir(join(root, scope.id, ".staging")).catch(() => [])).map((file) => `.staging/${file}`),
});
