// Compiles every TypeScript snippet of the repository's Markdown docs (READMEs, docs/) with the
// repository's strict compiler options, so that the docs cannot drift from the code.
//
// Each ```ts block becomes a module of its own in a temporary folder whose `node_modules` links to
// this repository's: `@onceflow/*` resolves to the built packages (run `npm run build` first), other
// imports to the installed dependencies. What a snippet leaves out on purpose (a placeholder such as
// `declare const brokers: string[]`, a type from an earlier snippet) goes in a hidden comment right
// before the block, prepended to the module:
//
//   <!-- snippet-preamble
//   import type { Order } from "./orders.js";
//   declare const brokers: string[];
//   -->
//
// A snippet that imports a file of its own project (`../src/index.js`) gets it from a hidden
// `<!-- snippet-file ../src/index.ts ... -->` comment: the snippet is compiled as `test/snippet.ts` of
// a project folder of its own, and the path is relative to it. A block that cannot compile by design
// is skipped only with a reason, `<!-- snippet-skip: why -->`, and every skip is listed in the
// output. Several hidden comments may precede one block. Errors name the Markdown file and line.
//
//   npx tsx scripts/check-readme-snippets.mts [--verbose] [file.md ...]

import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** Folders never searched for Markdown: dependencies, build output, the generated API reference, templates. */
const IGNORED_DIRECTORIES = new Set(["node_modules", "dist", ".git", "coverage", "templates", ".onceflow"]);
const IGNORED_PATHS = new Set(["docs/api"]);
const TS_FENCE = /^(\s*)(`{3,}|~{3,})\s*(ts|typescript|mts)\s*$/;

interface Snippet {
  readonly markdown: string;
  /** 1-based line of the first code line (after the opening fence). */
  readonly line: number;
  readonly code: string;
  readonly preamble: string;
  /** Files beside the snippet: path relative to its folder, the 1-based Markdown line of the comment, text. */
  readonly files: readonly { path: string; line: number; text: string }[];
  readonly skip?: string;
}

/** Where the generated modules sit in their project folder (see `snippet-file`). */
const SNIPPET_PATH = "test/snippet.ts";

/** Every Markdown file of the repository that documents it (READMEs, docs/, bench/, examples/). */
function markdownFiles(directory = root): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    const path = join(directory, entry.name);
    const rel = relative(root, path).split("\\").join("/");
    if (entry.isDirectory()) {
      if (IGNORED_DIRECTORIES.has(entry.name) || entry.name.startsWith(".") || IGNORED_PATHS.has(rel))
        continue;
      files.push(...markdownFiles(path));
    } else if (entry.isFile() && entry.name.endsWith(".md") && entry.name !== "CHANGELOG.md") {
      files.push(rel);
    }
  }
  return files.sort();
}

/** The ```ts blocks of a Markdown file, each with the hidden comment right before it. */
function extractSnippets(markdown: string, text: string): Snippet[] {
  const lines = text.split("\n");
  const snippets: Snippet[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = TS_FENCE.exec(lines[i] ?? "");
    if (open === null) continue;
    const indent = open[1] ?? "";
    const fence = open[2] ?? "```";
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const line = lines[j] ?? "";
      const close = /^\s*(`{3,}|~{3,})\s*$/.exec(line)?.[1];
      if (close !== undefined && close[0] === fence[0] && close.length >= fence.length) break;
      body.push(line.startsWith(indent) ? line.slice(indent.length) : line);
    }
    if (j === lines.length) throw new Error(`${markdown}:${i + 1}: the code block is never closed`);
    const { preamble, files, skip } = hiddenCommentsBefore(lines, i);
    snippets.push({
      markdown,
      line: i + 2,
      code: body.join("\n"),
      preamble,
      files,
      ...(skip === undefined ? {} : { skip }),
    });
    i = j;
  }
  return snippets;
}

/** The hidden comments (`snippet-preamble`, `snippet-file`, `snippet-skip`) right before `fenceIndex`. */
function hiddenCommentsBefore(
  lines: readonly string[],
  fenceIndex: number,
): { preamble: string; files: Snippet["files"]; skip?: string } {
  const preambles: string[] = [];
  const files: { path: string; line: number; text: string }[] = [];
  let skip: string | undefined;
  let end = fenceIndex - 1;
  for (;;) {
    while (end >= 0 && (lines[end] ?? "").trim() === "") end--;
    if (end < 0 || !(lines[end] ?? "").trim().endsWith("-->")) break;
    let start = end;
    while (start >= 0 && !(lines[start] ?? "").includes("<!--")) start--;
    if (start < 0) break;
    const comment = lines
      .slice(start, end + 1)
      .join("\n")
      .replace(/^[\s\S]*?<!--/, "")
      .replace(/-->\s*$/, "");
    const directive = /^\s*(snippet-preamble|snippet-file|snippet-skip)\b:?[ \t]*([^\n]*)\n?([\s\S]*)$/.exec(
      comment,
    );
    if (directive === null) break;
    const [, kind, argument = "", rest = ""] = directive;
    if (kind === "snippet-skip") {
      skip = `${argument} ${rest}`.replace(/\s+/g, " ").trim();
      if (skip === "") throw new Error(`line ${start + 1}: snippet-skip needs a reason`);
    } else if (kind === "snippet-file") {
      if (argument.trim() === "") throw new Error(`line ${start + 1}: snippet-file needs a path`);
      files.push({ path: argument.trim(), line: start + 2, text: rest });
    } else {
      preambles.unshift(`${argument}\n${rest}`.trim());
    }
    end = start - 1;
  }
  return { preamble: preambles.join("\n"), files, ...(skip === undefined ? {} : { skip }) };
}

/** Where a line of a generated file comes from. */
interface Origin {
  readonly snippet: Snippet;
  /** Lines of the module before the snippet's first line (for the snippet itself). */
  readonly offset: number;
  /** Set for a `snippet-file`: the Markdown line of its first line. */
  readonly fileLine?: number;
}

function moduleText(snippet: Snippet): { text: string; offset: number } {
  const head = snippet.preamble === "" ? "" : `${snippet.preamble}\n// ---- end of the preamble\n`;
  // `export {}` makes every snippet a module (top-level await, no clash between snippets' names).
  return {
    text: `${head}${snippet.code}\nexport {};\n`,
    offset: head === "" ? 0 : head.split("\n").length - 1,
  };
}

function compilerOptions(): ts.CompilerOptions {
  const base = ts.readConfigFile(join(root, "tsconfig.base.json"), (path) => ts.sys.readFile(path));
  if (base.error !== undefined)
    throw new Error(ts.flattenDiagnosticMessageText(base.error.messageText, "\n"));
  const parsed = ts.parseJsonConfigFileContent(base.config, ts.sys, root);
  return {
    ...parsed.options,
    // The docs are held to the repository's own settings: strict, noUncheckedIndexedAccess, ...
    strict: true,
    noUncheckedIndexedAccess: true,
    noEmit: true,
    declaration: false,
    sourceMap: false,
  };
}

function main(): number {
  const args = process.argv.slice(2);
  const verbose = args.includes("--verbose");
  const only = args.filter((arg) => !arg.startsWith("--"));
  const files = only.length > 0 ? only.map((file) => relative(root, resolve(file))) : markdownFiles();

  const snippets = files.flatMap((file) => {
    try {
      return extractSnippets(file, readFileSync(join(root, file), "utf8"));
    } catch (error) {
      throw new Error(`${file}: ${(error as Error).message}`);
    }
  });
  const checked = snippets.filter((snippet) => snippet.skip === undefined);
  const skipped = snippets.filter((snippet) => snippet.skip !== undefined);

  // The modules live in a temporary folder whose node_modules is this repository's.
  const work = mkdtempSync(join(tmpdir(), "onceflow-readme-snippets-"));
  try {
    symlinkSync(join(root, "node_modules"), join(work, "node_modules"), "dir");
    writeFileSync(join(work, "package.json"), JSON.stringify({ type: "module", private: true }));
    const origins = new Map<string, Origin>();
    for (const snippet of checked) {
      // One project folder per snippet, so that its snippet-files cannot clash with another's.
      const folder = join(work, `${snippet.markdown.replace(/[^A-Za-z0-9]+/g, "_")}_L${snippet.line}`);
      const path = join(folder, SNIPPET_PATH);
      mkdirSync(dirname(path), { recursive: true });
      const { text, offset } = moduleText(snippet);
      writeFileSync(path, text);
      origins.set(path, { snippet, offset });
      for (const file of snippet.files) {
        const filePath = resolve(dirname(path), file.path);
        if (relative(folder, filePath).startsWith("..")) {
          throw new Error(
            `${snippet.markdown}:${file.line - 1}: snippet-file ${file.path} leaves the snippet's folder`,
          );
        }
        mkdirSync(dirname(filePath), { recursive: true });
        writeFileSync(filePath, file.text);
        origins.set(filePath, { snippet, offset: 0, fileLine: file.line });
      }
    }

    const program = ts.createProgram([...origins.keys()], compilerOptions());
    const diagnostics = ts.getPreEmitDiagnostics(program);
    const failing = new Set<Snippet>();
    for (const diagnostic of diagnostics) {
      const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n  ");
      const file = diagnostic.file;
      const origin = file === undefined ? undefined : origins.get(resolve(file.fileName));
      if (file === undefined || origin === undefined || diagnostic.start === undefined) {
        console.error(
          `error TS${diagnostic.code}: ${message}${file === undefined ? "" : ` (${file.fileName})`}`,
        );
        continue;
      }
      failing.add(origin.snippet);
      const { line, character } = file.getLineAndCharacterOfPosition(diagnostic.start);
      const where =
        origin.fileLine !== undefined
          ? `${origin.snippet.markdown}:${origin.fileLine + line}:${character + 1} (a snippet-file)`
          : line < origin.offset
            ? `${origin.snippet.markdown}:${origin.snippet.line - 1} (the snippet-preamble, its line ${line + 1})`
            : `${origin.snippet.markdown}:${origin.snippet.line + line - origin.offset}:${character + 1}`;
      console.error(`${where} - error TS${diagnostic.code}: ${message}`);
    }

    if (verbose) {
      for (const snippet of checked) {
        console.log(`${failing.has(snippet) ? "FAIL" : "ok  "} ${snippet.markdown}:${snippet.line}`);
      }
    }
    for (const snippet of skipped)
      console.log(`skipped ${snippet.markdown}:${snippet.line} — ${snippet.skip}`);
    const errors = diagnostics.length;
    if (diagnostics.some((d) => d.code === 7016 && String(d.messageText).includes("@onceflow/"))) {
      console.error("hint: a package has no type declarations in dist/ — run `npm run build` first");
    }
    console.log(
      `${checked.length} TypeScript snippets in ${files.length} Markdown files: ${checked.length - failing.size} compile, ` +
        `${failing.size} fail${errors > 0 ? ` (${errors} errors)` : ""}; ${skipped.length} skipped`,
    );
    return errors > 0 ? 1 : 0;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

process.exitCode = main();
