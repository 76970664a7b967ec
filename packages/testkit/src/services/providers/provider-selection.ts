/**
 * Where a service comes from: named by an environment variable, a container started through
 * testcontainers, or processes the testkit starts on this machine.
 *
 * @example
 * ```ts
 * const kafka = await startKafka({ provider: "local" satisfies ProviderKind });
 * ```
 */
export type ProviderKind = "environment" | "testcontainers" | "local";

/**
 * The order providers are tried in when nothing forces one.
 *
 * @example
 * ```ts
 * PROVIDER_ORDER; // ["environment", "testcontainers", "local"]
 * ```
 */
export const PROVIDER_ORDER: readonly ProviderKind[] = ["environment", "testcontainers", "local"];

/**
 * What one probe found out about one provider.
 *
 * @example
 * ```ts
 * const probe: ProbeResult = { provider: "local", available: false, detail: "no Java runtime", remedy: "install Java 17" };
 * ```
 */
export interface ProbeResult {
  provider: ProviderKind;
  available: boolean;
  /** What was checked and what was found, e.g. "no Docker engine answered (…)". */
  detail: string;
  /** What to install or set to make this provider work, shown when nothing is available. */
  remedy: string;
}

/**
 * The outcome of {@link decideProvider}.
 *
 * @example
 * ```ts
 * const decision: ProviderDecision = decideProvider("Kafka", providerOrder(), probes);
 * if (!decision.ok) throw new Error(decision.message);
 * ```
 */
export type ProviderDecision =
  | { ok: true; provider: ProviderKind; probe: ProbeResult; tried: readonly ProbeResult[] }
  | { ok: false; message: string; tried: readonly ProbeResult[] };

/**
 * The options that shape the order: a forced provider, or a test that needs fault injection.
 *
 * @example
 * ```ts
 * providerOrder({ faultInjection: true } satisfies ProviderPreference);
 * ```
 */
export interface ProviderPreference {
  /** Use only this provider. */
  provider?: ProviderKind;
  /** The test kills or restarts the service: a service named by the environment cannot do that. */
  faultInjection?: boolean;
  /** Why the environment provider is left out, when something other than fault injection excludes it. */
  environmentExcludedBecause?: string;
}

/**
 * The providers to try, in order, for a preference.
 *
 * @example
 * ```ts
 * providerOrder({ faultInjection: true }); // ["testcontainers", "local"]
 * ```
 */
export function providerOrder(preference: ProviderPreference = {}): ProviderKind[] {
  const excludeEnvironment =
    preference.faultInjection === true || preference.environmentExcludedBecause !== undefined;
  if (preference.provider !== undefined) {
    return excludeEnvironment && preference.provider === "environment" ? [] : [preference.provider];
  }
  return PROVIDER_ORDER.filter((kind) => !(excludeEnvironment && kind === "environment"));
}

/**
 * Picks the provider for a service from probe results: the first available one in `order`. When none
 * is available the result carries a message listing, per provider, what was tried and what to
 * install. Pure: it only looks at its arguments.
 *
 * @example
 * ```ts
 * const decision = decideProvider("Kafka", ["environment", "local"], [
 *   { provider: "environment", available: false, detail: "ONCEFLOW_KAFKA_BROKERS is not set", remedy: "…" },
 *   { provider: "local", available: true, detail: "Java 17.0.15, Maven 3.8.7", remedy: "…" },
 * ]);
 * decision.ok && decision.provider; // "local"
 * ```
 */
export function decideProvider(
  service: string,
  order: readonly ProviderKind[],
  probes: readonly ProbeResult[],
): ProviderDecision {
  const tried: ProbeResult[] = [];
  for (const kind of order) {
    const probe = probes.find((candidate) => candidate.provider === kind);
    if (probe === undefined) continue;
    tried.push(probe);
    if (probe.available) return { ok: true, provider: kind, probe, tried };
  }
  const lines = [`No ${service} for the tests: every provider was tried and none can run it.`];
  if (order.length === 0) lines.push("  (no provider was allowed by the options)");
  for (const probe of tried) {
    lines.push(`  - ${probe.provider}: ${probe.detail}`);
    lines.push(`      to use it: ${probe.remedy}`);
  }
  lines.push("The tests never skip for a missing service: provide one of the above and run again.");
  return { ok: false, message: lines.join("\n"), tried };
}

/**
 * A probe for one provider, run only when the providers before it are unavailable.
 *
 * @example
 * ```ts
 * const docker: Probe = () => probeDockerEngine({ timeoutMs: 10_000 });
 * ```
 */
export type Probe = () => Promise<ProbeResult>;

/**
 * Runs the probes lazily in `order` (a later provider is probed only when the earlier ones are
 * unavailable) and decides with {@link decideProvider}.
 *
 * @example
 * ```ts
 * const decision = await chooseProvider("PostgreSQL", providerOrder(), {
 *   environment: probeEnv, testcontainers: probeDocker, local: probeBinaries,
 * });
 * ```
 */
export async function chooseProvider(
  service: string,
  order: readonly ProviderKind[],
  probes: Readonly<Record<ProviderKind, Probe>>,
): Promise<ProviderDecision> {
  const results: ProbeResult[] = [];
  for (const kind of order) {
    const result = await probes[kind]();
    results.push(result);
    if (result.available) break;
  }
  return decideProvider(service, order, results);
}
