/**
 * The gate every external call of one explored process goes through — its storage, its source and
 * its sink. It models what can happen to a process from the outside:
 *
 * - `kill()`: SIGKILL. The gate never opens again: calls in flight and later calls never settle, so
 *   nothing the process does afterwards has any effect.
 * - `freeze()` then `resume()`: SIGSTOP / SIGCONT, a long GC pause or a network partition. Calls
 *   wait while frozen and go on afterwards: the process comes back as a zombie.
 *
 * @example
 * ```ts
 * const gate = new ProcessGate("p1");
 * await gate.pass(() => storage.store(checkpoint)); // never settles once gate.kill() ran
 * ```
 */
export class ProcessGate {
  private state: "open" | "frozen" | "killed" = "open";
  private waiting: (() => void)[] = [];

  constructor(readonly name: string) {}

  get isKilled(): boolean {
    return this.state === "killed";
  }

  get isFrozen(): boolean {
    return this.state === "frozen";
  }

  /** Runs `call` when the gate is open; its result reaches the caller only through an open gate too. */
  async pass<T>(call: () => T | Promise<T>): Promise<T> {
    await this.whenOpen();
    const result = await call();
    await this.whenOpen();
    return result;
  }

  /** Resolves once the gate is open; never, once the process was killed. */
  whenOpen(): Promise<void> {
    if (this.state === "open") return Promise.resolve();
    return new Promise<void>((resolve) => {
      if (this.state === "frozen") this.waiting.push(resolve);
      // killed: never resolves — the promise chain behind it is simply dropped.
    });
  }

  freeze(): void {
    if (this.state === "open") this.state = "frozen";
  }

  resume(): void {
    if (this.state !== "frozen") return;
    this.state = "open";
    const waiting = this.waiting;
    this.waiting = [];
    for (const resolve of waiting) resolve();
  }

  kill(): void {
    this.state = "killed";
    this.waiting = [];
  }
}
