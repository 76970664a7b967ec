import { type ConnectorKind, connectorKinds } from "./connector-kinds.js";

/**
 * Versions of the tools a generated connector builds and tests with (those this repository uses).
 *
 * @example
 * ```ts
 * toolVersions.vitest; // "^4.1.12"
 * ```
 */
export const toolVersions = {
  "@arethetypeswrong/cli": "^0.18.5",
  "@changesets/cli": "^2.31.1",
  "@types/node": "^20.19.43",
  publint: "^0.3.25",
  tsup: "^8.5.1",
  typescript: "^5.9.3",
  vitest: "^4.1.12",
} as const;

/**
 * What the package.json of a new connector is made from.
 *
 * @example
 * ```ts
 * const input: ConnectorPackageJsonInput = { packageName: "onceflow-connector-acme", kind: "custom", onceflowVersion: "0.1.0" };
 * ```
 */
export interface ConnectorPackageJsonInput {
  readonly packageName: string;
  readonly kind: ConnectorKind;
  /** The @onceflow/* version to depend on (`^` is added): the generator's own core version. */
  readonly onceflowVersion: string;
}

/**
 * The package.json of a new connector: ESM first with a CommonJS build beside it (an exports map
 * with `types` first in each condition), `@onceflow/core` as a peer dependency (one copy in the
 * user's app) and a dev dependency (to build and test), the `onceflow-connector` keyword users
 * search for, and the scripts the README and the CI workflow use.
 *
 * @example
 * ```ts
 * const json = connectorPackageJson({ packageName: "onceflow-connector-acme", kind: "custom", onceflowVersion: "0.1.0" });
 * json.peerDependencies["@onceflow/core"]; // "^0.1.0"
 * ```
 */
export function connectorPackageJson(input: ConnectorPackageJsonInput) {
  const onceflowRange = `^${input.onceflowVersion}`;
  const kind = connectorKinds[input.kind];
  const dependencies: Record<string, string> = { ...kind.dependencies };
  return {
    name: input.packageName,
    version: "0.1.0",
    description: `An exactly-once onceflow connector (${descriptionOf(input.kind)})`,
    license: "Apache-2.0",
    type: "module",
    engines: { node: ">=20.19" },
    keywords: ["onceflow", "onceflow-connector", "exactly-once", ...kind.keywords],
    sideEffects: false,
    main: "./dist/index.cjs",
    module: "./dist/index.js",
    types: "./dist/index.d.ts",
    exports: {
      ".": {
        import: { types: "./dist/index.d.ts", default: "./dist/index.js" },
        require: { types: "./dist/index.d.cts", default: "./dist/index.cjs" },
      },
      "./package.json": "./package.json",
    },
    files: ["dist", "README.md", "LICENSE"],
    publishConfig: { access: "public" },
    scripts: {
      build: "tsup",
      typecheck: "tsc --noEmit",
      test: "vitest run",
      "lint:package": "publint --strict && attw --pack . --profile node16",
      changeset: "changeset",
      "version-packages": "changeset version",
      release: "npm run build && changeset publish",
    },
    peerDependencies: { "@onceflow/core": onceflowRange },
    ...(Object.keys(dependencies).length > 0 ? { dependencies } : {}),
    devDependencies: {
      "@onceflow/core": onceflowRange,
      "@onceflow/testkit": onceflowRange,
      ...toolVersions,
    },
  };
}

/** What the package holds, for its description. */
function descriptionOf(kind: ConnectorKind): string {
  if (kind === "custom") return "TwoPhaseCommitSink";
  if (kind === "source") return "replayable Redis Streams source";
  return `${kind} sink`;
}
