import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigurationError, RecoveryError } from "../errors/onceflow-error.js";
import { type FileLinesReader, FileLinesSource, type FileLinesSourceOptions } from "./file-lines-source.js";

let directory: string;

beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), "onceflow-file-lines-"));
});

afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

async function readAll(reader: FileLinesReader): Promise<Array<{ splitId: string; records: string[] }>> {
  const batches: Array<{ splitId: string; records: string[] }> = [];
  for (let batch = await reader.pollNext(); batch !== undefined; batch = await reader.pollNext()) {
    batches.push({ splitId: batch.splitId, records: batch.records });
  }
  return batches;
}

async function linesOf(options: FileLinesSourceOptions): Promise<string[]> {
  const source = new FileLinesSource(options);
  const reader = source.createReader();
  reader.addSplits(await source.discoverSplits());
  const lines = (await readAll(reader)).flatMap((batch) => batch.records);
  expect(reader.isFinished()).toBe(true);
  await reader.close();
  return lines;
}

describe("FileLinesSource", () => {
  it("reads lines, with or without a final newline, and CRLF", async () => {
    const a = join(directory, "a.txt");
    const b = join(directory, "b.txt");
    const c = join(directory, "c.txt");
    await writeFile(a, "one\ntwo\n\nfour\n");
    await writeFile(b, "x\r\ny\r\nlast");
    await writeFile(c, "");
    expect(await linesOf({ paths: [a] })).toEqual(["one", "two", "", "four"]);
    expect(await linesOf({ paths: [b] })).toEqual(["x", "y", "last"]);
    expect(await linesOf({ paths: [c] })).toEqual([]);
  });

  it("keeps multi-byte UTF-8 characters whole across chunk boundaries", async () => {
    const path = join(directory, "utf8.txt");
    const lines = ["żółć", "日本語のテキスト", "emoji 🎉🎉", "ascii"];
    await writeFile(path, `${lines.join("\n")}\n`);
    expect(await linesOf({ paths: [path], readChunkSize: 3 })).toEqual(lines);
  });

  it("handles lines longer than the read chunk and batches of at most batchSize", async () => {
    const path = join(directory, "long.txt");
    const lines = Array.from({ length: 50 }, (_, i) => `${i}:${"x".repeat(i * 7)}`);
    await writeFile(path, lines.join("\n"));
    const source = new FileLinesSource({ paths: [path], readChunkSize: 16, batchSize: 4 });
    const reader = source.createReader();
    reader.addSplits(await source.discoverSplits());
    const batches = await readAll(reader);
    expect(batches.every((batch) => batch.records.length <= 4)).toBe(true);
    expect(batches.flatMap((batch) => batch.records)).toEqual(lines);
  });

  it("lists a directory's matching files in name order, one split each", async () => {
    await writeFile(join(directory, "b.log"), "b1\nb2\n");
    await writeFile(join(directory, "a.log"), "a1\n");
    await writeFile(join(directory, "c.txt"), "ignored\n");
    await mkdir(join(directory, "sub.log"));
    const source = new FileLinesSource({ directory, pattern: "*.log" });
    const splits = await source.discoverSplits();
    expect(splits).toEqual([
      {
        splitId: join(directory, "a.log"),
        path: join(directory, "a.log"),
        fileIndex: 0,
        offset: 0,
        lineNumber: 0,
      },
      {
        splitId: join(directory, "b.log"),
        path: join(directory, "b.log"),
        fileIndex: 1,
        offset: 0,
        lineNumber: 0,
      },
    ]);
    expect(splits.map((split) => source.assignSplit(split, 2))).toEqual([0, 1]);
    expect(await linesOf({ directory, pattern: "*.log" })).toEqual(["a1", "b1", "b2"]);
    expect(await linesOf({ directory, pattern: "?.txt" })).toEqual(["ignored"]);
  });

  it("records the byte offset and line number of the next unread line, and resumes there", async () => {
    const path = join(directory, "pos.txt");
    // "é" is two bytes: offsets count bytes, not characters.
    await writeFile(path, "é1\r\nline2\nline3\nline4\nline5");
    const source = new FileLinesSource({ paths: [path], batchSize: 2, readChunkSize: 5 });
    const first = source.createReader();
    first.addSplits(await source.discoverSplits());
    expect((await first.pollNext())?.records).toEqual(["é1", "line2"]);
    const snapshot = first.snapshotState(1);
    expect(snapshot).toEqual([{ splitId: path, path, fileIndex: 0, offset: 11, lineNumber: 2 }]);
    expect((await first.pollNext())?.records).toEqual(["line3", "line4"]);
    await first.close();

    const second = source.createReader();
    second.addSplits(structuredClone(snapshot));
    expect((await readAll(second)).flatMap((batch) => batch.records)).toEqual(["line3", "line4", "line5"]);
    expect(second.snapshotState(2)).toEqual([
      { splitId: path, path, fileIndex: 0, offset: 28, lineNumber: 5 },
    ]);
    expect(second.isFinished()).toBe(true);
  });

  it("a split restored at the end of its file is finished without reading anything", async () => {
    const path = join(directory, "done.txt");
    await writeFile(path, "a\nb\n");
    const source = new FileLinesSource({ paths: [path] });
    const reader = source.createReader();
    reader.addSplits([{ splitId: path, path, fileIndex: 0, offset: 4, lineNumber: 2 }]);
    expect(await reader.pollNext()).toBeUndefined();
    expect(reader.isFinished()).toBe(true);
  });

  it("fails the restore when the file is shorter than the checkpointed offset", async () => {
    const path = join(directory, "short.txt");
    await writeFile(path, "a\n");
    const reader = new FileLinesSource({ paths: [path] }).createReader();
    reader.addSplits([{ splitId: path, path, fileIndex: 0, offset: 100, lineNumber: 9 }]);
    await expect(reader.pollNext()).rejects.toBeInstanceOf(RecoveryError);
  });

  it("reads several files assigned to one reader one after the other", async () => {
    const paths = ["1.txt", "2.txt", "3.txt"].map((name) => join(directory, name));
    await Promise.all(paths.map((path, i) => writeFile(path, `f${i}a\nf${i}b\n`)));
    const source = new FileLinesSource({ paths });
    const reader = source.createReader();
    reader.addSplits(await source.discoverSplits());
    const batches = await readAll(reader);
    expect(batches.map((batch) => batch.splitId)).toEqual(paths);
    expect(batches.flatMap((batch) => batch.records)).toEqual(["f0a", "f0b", "f1a", "f1b", "f2a", "f2b"]);
  });

  it("rejects missing files, duplicates and bad sizes with a ConfigurationError", async () => {
    const missing = new FileLinesSource({ paths: [join(directory, "nope.txt")] });
    await expect(missing.discoverSplits()).rejects.toThrow(/fileLines\.paths/);
    const path = join(directory, "x.txt");
    await writeFile(path, "x");
    await expect(new FileLinesSource({ paths: [path, path] }).discoverSplits()).rejects.toThrow(
      /listed twice/,
    );
    await expect(
      new FileLinesSource({ directory: join(directory, "absent") }).discoverSplits(),
    ).rejects.toBeInstanceOf(ConfigurationError);
    expect(() => new FileLinesSource({ paths: [path], batchSize: 0 })).toThrow(/fileLines\.batchSize/);
    expect(() => new FileLinesSource({ paths: [path], readChunkSize: -1 })).toThrow(
      /fileLines\.readChunkSize/,
    );
    expect(() => new FileLinesSource({} as FileLinesSourceOptions)).toThrow(ConfigurationError);
  });

  it("reads a large file in bounded chunks with exact positions", async () => {
    const path = join(directory, "big.txt");
    const count = 40_000;
    await writeFile(path, Array.from({ length: count }, (_, i) => `record-${i}`).join("\n"));
    const source = new FileLinesSource({ paths: [path], readChunkSize: 4096 });
    const reader = source.createReader();
    reader.addSplits(await source.discoverSplits());
    const lines: string[] = [];
    let batches = 0;
    for (let batch = await reader.pollNext(); batch !== undefined; batch = await reader.pollNext()) {
      batches++;
      for (const line of batch.records) lines.push(line);
    }
    expect(lines).toEqual(Array.from({ length: count }, (_, i) => `record-${i}`));
    // Batches are filled across chunks: 1024 lines each but the last.
    expect(batches).toBe(Math.ceil(count / 1024));
    expect(reader.snapshotState(1)[0]?.lineNumber).toBe(count);
  });
});
