import { OnceflowError } from "@onceflow/core";

/**
 * The error every testkit failure to provide a service ends in: code `SERVICE_UNAVAILABLE`, with a
 * message that says what was tried and what to install.
 *
 * @example
 * ```ts
 * throw serviceUnavailable("Java 17 was not found (tried $JAVA_HOME/bin/java, java on PATH)", { service: "kafka" });
 * ```
 */
export function serviceUnavailable(
  message: string,
  details: Record<string, unknown> = {},
  cause?: unknown,
): OnceflowError {
  return new OnceflowError("SERVICE_UNAVAILABLE", message, { details, cause });
}

/**
 * The error for kill/start/restart on a service the testkit does not run (named by an environment
 * variable): fault injection needs a process or container the testkit controls.
 *
 * @example
 * ```ts
 * throw faultInjectionUnsupported("Kafka", "kill()", "ONCEFLOW_KAFKA_BROKERS");
 * ```
 */
export function faultInjectionUnsupported(
  service: string,
  operation: string,
  variable: string,
): OnceflowError {
  return serviceUnavailable(
    `${service} ${operation}: fault injection needs a provider the testkit controls (testcontainers or local ` +
      `processes), but this ${service} was named by ${variable} and is not the testkit's to kill or restart. ` +
      `Start a private one for this test with faultInjection: true (it skips ${variable}).`,
    { operation, variable },
  );
}
