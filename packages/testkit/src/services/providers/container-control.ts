import type { StartedTestContainer } from "testcontainers";
import { loadTestcontainers } from "./testcontainers-loader.js";

/**
 * Low-level control of a started container for fault injection: kill with a signal (the container
 * stops, its writable layer and port bindings stay), start it again, read its log tail, remove it.
 *
 * @example
 * ```ts
 * const control: ContainerControl = await controlContainer(started);
 * await control.kill("SIGQUIT");
 * ```
 */
export interface ContainerControl {
  kill(signal: "SIGKILL" | "SIGQUIT" | "SIGINT" | "SIGTERM"): Promise<void>;
  start(): Promise<void>;
  logTail(lines?: number): Promise<string>;
  remove(): Promise<void>;
}

// Docker multiplexes stdout/stderr in frames: 1 byte stream, 3 zero bytes, 4 bytes big-endian size.
function demultiplex(buffer: Buffer): string {
  let text = "";
  let offset = 0;
  while (offset + 8 <= buffer.length && buffer[offset + 1] === 0 && buffer[offset + 2] === 0) {
    const size = buffer.readUInt32BE(offset + 4);
    text += buffer.subarray(offset + 8, offset + 8 + size).toString("utf8");
    offset += 8 + size;
  }
  return offset === 0 ? buffer.toString("utf8") : text;
}

/**
 * Wraps a started testcontainers container with the operations fault-injection tests need.
 *
 * @example
 * ```ts
 * const control = await controlContainer(started);
 * await control.kill("SIGKILL");
 * await control.start();
 * ```
 */
export async function controlContainer(started: StartedTestContainer): Promise<ContainerControl> {
  const { getContainerRuntimeClient } = await loadTestcontainers();
  const client = await getContainerRuntimeClient();
  const container = client.container.getById(started.getId());
  return {
    async kill(signal) {
      await container.kill({ signal });
      await container.wait();
    },
    async start() {
      await container.start();
    },
    async logTail(lines = 60) {
      try {
        const output = (await container.logs({
          stdout: true,
          stderr: true,
          tail: lines,
          follow: false,
        })) as unknown;
        return Buffer.isBuffer(output) ? demultiplex(output) : String(output);
      } catch (error) {
        return `(no container log: ${(error as Error).message})`;
      }
    },
    async remove() {
      await container.remove({ force: true, v: true }).catch(() => {});
    },
  };
}
