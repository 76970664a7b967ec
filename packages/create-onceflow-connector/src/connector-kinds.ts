/**
 * The kinds of connector the generator writes. Each kind is a folder of `templates/` laid over
 * `templates/common/`, plus the runtime dependencies its sink needs.
 *
 * @example
 * ```ts
 * connectorKinds.redis.dependencies; // { redis: "^6.3.1" }
 * ```
 */
export const connectorKinds = {
  custom: {
    summary:
      "a TwoPhaseCommitSink skeleton for your own system; its stand-in system is a directory of files, so the contract suite passes out of the box",
    dependencies: {},
    keywords: [],
  },
  redis: {
    summary:
      "a complete exactly-once Redis sink (node-redis); its contract suite runs against a real Redis that the testkit finds or starts",
    dependencies: { redis: "^6.3.1" },
    keywords: ["redis"],
  },
  source: {
    summary:
      "a replayable source over Redis Streams (XRANGE positions, no consumer groups); its source contract suite runs against a real Redis that the testkit finds or starts",
    dependencies: { redis: "^6.3.1" },
    keywords: ["redis", "source"],
  },
} as const satisfies Record<string, ConnectorKindDefinition>;

/**
 * What defines one kind of connector.
 *
 * @example
 * ```ts
 * const kind: ConnectorKindDefinition = { summary: "…", dependencies: { redis: "^6.3.1" }, keywords: ["redis"] };
 * ```
 */
export interface ConnectorKindDefinition {
  /** One line for `--help` and the prompt. */
  readonly summary: string;
  /** Runtime dependencies of the generated package (the external system's client). */
  readonly dependencies: Readonly<Record<string, string>>;
  /** Extra package.json keywords. */
  readonly keywords: readonly string[];
}

/**
 * A kind of connector: `custom`, `redis` or `source`.
 *
 * @example
 * ```ts
 * const kind: ConnectorKind = "custom";
 * ```
 */
export type ConnectorKind = keyof typeof connectorKinds;

/**
 * Whether `value` names a kind the generator knows.
 *
 * @example
 * ```ts
 * isConnectorKind("redis"); // true
 * ```
 */
export function isConnectorKind(value: string): value is ConnectorKind {
  return Object.hasOwn(connectorKinds, value);
}

/**
 * The kind names, in the order `--help` and the prompt list them.
 *
 * @example
 * ```ts
 * connectorKindNames(); // ["custom", "redis", "source"]
 * ```
 */
export function connectorKindNames(): ConnectorKind[] {
  return Object.keys(connectorKinds) as ConnectorKind[];
}
