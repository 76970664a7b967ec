import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// The package's modules form no import circle, type-only imports included: shared types live in
// modules of their own (`protocol/raw-record.ts`, `producer/producer-message.ts`,
// `sink/kafka-transaction.ts`), so the wire format, the producer and the sink read top-down.
const root = dirname(fileURLToPath(import.meta.url));

function sourceFiles(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts") ? [path] : [];
  });
}

function importsOf(file: string, known: ReadonlySet<string>): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/from\s+"(\.{1,2}\/[^"]+)\.js"/g)]
    .map((match) => resolve(dirname(file), `${match[1]}.ts`))
    .filter((path) => known.has(path));
}

/** Every circle found by a depth-first walk, as the files along it. */
function circles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const found: string[][] = [];
  const done = new Set<string>();
  const path: string[] = [];
  const visit = (file: string): void => {
    const at = path.indexOf(file);
    if (at >= 0) {
      found.push([...path.slice(at), file]);
      return;
    }
    if (done.has(file)) return;
    path.push(file);
    for (const next of graph.get(file) ?? []) visit(next);
    path.pop();
    done.add(file);
  };
  for (const file of graph.keys()) visit(file);
  return found;
}

describe("the connector's modules", () => {
  it("import one another without circles", () => {
    const files = sourceFiles(root);
    const known = new Set(files);
    const graph = new Map(files.map((file) => [file, importsOf(file, known)]));
    expect(graph.size).toBeGreaterThan(50);
    const named = circles(graph).map((circle) => circle.map((file) => relative(root, file)).join(" → "));
    expect(named).toEqual([]);
  });

  it("finds a circle where there is one", () => {
    const graph = new Map([
      ["a.ts", ["b.ts"]],
      ["b.ts", ["a.ts"]],
      ["c.ts", ["a.ts"]],
    ]);
    expect(circles(graph)).toEqual([["a.ts", "b.ts", "a.ts"]]);
  });
});
