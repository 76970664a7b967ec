import type { ProbeResult } from "./provider-selection.js";
import { loadTestcontainers, TESTCONTAINERS_INSTALL_HINT } from "./testcontainers-loader.js";

/**
 * Options of {@link probeDockerEngine}.
 *
 * @example
 * ```ts
 * await probeDockerEngine({ timeoutMs: 5_000 });
 * ```
 */
export interface DockerProbeOptions {
  /** Give up and report "unavailable" after this long. Default 15 s. */
  timeoutMs?: number;
  /** Replaces the real check (for tests): resolves when an engine answers, rejects when not. */
  check?: () => Promise<string>;
}

async function askTestcontainers(): Promise<string> {
  const { getContainerRuntimeClient } = await loadTestcontainers();
  const client = await getContainerRuntimeClient();
  const info = client.info.containerRuntime;
  return `engine at ${info.host} (${info.operatingSystem}, server ${info.serverVersion})`;
}

function firstLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split("\n")[0] ?? message;
}

/**
 * Whether a Docker (or compatible) engine answers, asked through testcontainers'
 * `getContainerRuntimeClient()`. Never hangs: after `timeoutMs` the engine counts as unavailable.
 *
 * @example
 * ```ts
 * const probe = await probeDockerEngine({ timeoutMs: 10_000 });
 * if (!probe.available) console.log(probe.detail);
 * ```
 */
export async function probeDockerEngine(options: DockerProbeOptions = {}): Promise<ProbeResult> {
  const timeoutMs = options.timeoutMs ?? 15_000;
  const remedy = `start a Docker engine (or set DOCKER_HOST to one) and install the optional peers: ${TESTCONTAINERS_INSTALL_HINT}`;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    timer.unref();
  });
  try {
    const detail = await Promise.race([(options.check ?? askTestcontainers)(), timeout]);
    return { provider: "testcontainers", available: true, detail, remedy };
  } catch (error) {
    return {
      provider: "testcontainers",
      available: false,
      detail: `no Docker engine answered (${firstLine(error)})`,
      remedy,
    };
  } finally {
    clearTimeout(timer);
  }
}
