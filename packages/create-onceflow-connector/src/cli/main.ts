// `npm create onceflow-connector` / `create-onceflow-connector`: asks for (or takes from flags) a
// package name and a kind, writes the package and prints what to run next.
import { relative } from "node:path";
import { formatError } from "@onceflow/core";
import { type ConnectorKind, connectorKindNames } from "../connector-kinds.js";
import { connectorNames } from "../connector-names.js";
import { generateConnector } from "../generate-connector.js";
import { builtOnceflowVersion } from "../onceflow-version.js";
import { parseCliArguments, parseConnectorKind, usage } from "./cli-arguments.js";
import { terminalPrompts } from "./terminal-prompts.js";

async function main(argv: readonly string[]): Promise<number> {
  const parsed = parseCliArguments(argv);
  if (parsed.help) {
    console.log(usage());
    return 0;
  }
  if (parsed.version) {
    console.log(builtOnceflowVersion());
    return 0;
  }
  let { name, kind, directory } = parsed;
  if (!parsed.yes && (name === undefined || kind === undefined || directory === undefined)) {
    const prompts = terminalPrompts(process.stdin, process.stdout);
    try {
      name ??= await prompts.ask("Package name", "onceflow-connector-custom");
      connectorNames(name); // refuse a bad name before the next question
      kind ??= parseConnectorKind(await prompts.ask(`Kind (${connectorKindNames().join(", ")})`, "custom"));
      directory ??= await prompts.ask("Folder", connectorNames(name).directory);
    } finally {
      prompts.close();
    }
  }
  name ??= "onceflow-connector-custom";
  const chosenKind: ConnectorKind = kind ?? "custom";
  const written = await generateConnector({
    packageName: name,
    kind: chosenKind,
    directory: directory ?? connectorNames(name).directory,
  });
  const relativeFolder = relative(process.cwd(), written.directory) || ".";
  const folder = relativeFolder.startsWith("..") ? written.directory : relativeFolder;
  console.log(`Wrote ${written.names.packageName} (${chosenKind}, ${written.names.sinkClass}) to ${folder}:`);
  for (const file of written.files) console.log(`  ${file}`);
  console.log(`
Next:
  cd ${folder}
  npm install
  npm run build && npm test   # the contract suite against the real system
Then read README.md: the rules of a TwoPhaseCommitSink are comments in src/, publishing is at the end.`);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(formatError(error));
    process.exitCode = error instanceof Error && "code" in error && error.code === "CONFIGURATION" ? 2 : 1;
  },
);
