import { ConfigurationError } from "@onceflow/core";

/**
 * The wall clock of this process, shifted by an offset the test controls (see {@link steppableClock}).
 *
 * @example
 * ```ts
 * const clock = steppableClock();
 * clock.step(-60_000); // NTP stepped the clock back a minute
 * clock.restore();
 * ```
 */
export interface SteppableClock {
  /** How far (ms) `Date.now()` is from the real wall clock now: positive ahead, negative behind. */
  readonly offset: number;
  /** True until {@link SteppableClock.restore}. */
  readonly active: boolean;
  /** Steps the clock by `milliseconds`: forward when positive, back when negative. */
  step(milliseconds: number): void;
  /** Sets the offset from the real wall clock (0: the real time again, still installed). */
  setOffset(milliseconds: number): void;
  /** Sets the clock so that `Date.now()` reads `epochMilliseconds` at this moment, and runs on from there. */
  setTime(epochMilliseconds: number): void;
  /** The shifted time, as `Date.now()` returns it. */
  now(): number;
  /** Puts the real `Date` back. Idempotent. */
  restore(): void;
}

let installed: SteppableClock | undefined;

/**
 * Shifts this process's wall clock, as an NTP step, a VM resume or a wrong clock would: replaces
 * the global `Date` so that `Date.now()`, `new Date()` and `Date()` read the real time plus an
 * offset the test steps back and forward. Everything else about `Date` is unchanged (`new Date(x)`,
 * parsing, `instanceof Date` of dates made before or after). Timers (`setTimeout`) and monotonic
 * clocks (`performance.now()`, `process.hrtime`) are not affected — as with a real clock step, only
 * the wall clock jumps. No dependency on a test runner; call `restore()` when done (for example in
 * `afterEach`). One clock at a time: creating a second before restoring the first throws.
 *
 * Other threads (worker threads) and child processes keep the real clock.
 *
 * @example
 * ```ts
 * import { steppableClock } from "@onceflow/testkit";
 *
 * const clock = steppableClock();
 * try {
 *   await job.runUntilCheckpoint(1);
 *   clock.step(-3_600_000);            // the clock jumps an hour back
 *   await job.runUntilCheckpoint(2);   // checkpoint 2 is "older" by wall clock than checkpoint 1
 * } finally {
 *   clock.restore();
 * }
 * ```
 */
export function steppableClock(options: { offset?: number } = {}): SteppableClock {
  if (installed?.active === true) {
    throw new ConfigurationError(
      "steppableClock",
      "another steppable clock is installed; call its restore() first (one clock shifts the whole process)",
    );
  }
  const RealDate = globalThis.Date;
  let offset = finiteMilliseconds("offset", options.offset ?? 0);
  let active = true;
  const now = (): number => RealDate.now() + offset;

  const SteppedDate: DateConstructor = new Proxy(RealDate, {
    // `Date()` called as a function returns the current time as text.
    apply: () => new RealDate(now()).toString(),
    // `new Date()` is now; `new Date(value)` is unchanged. `newTarget` keeps subclasses working.
    construct: (target, args: unknown[], newTarget): object =>
      Reflect.construct(
        target,
        args.length === 0 ? [now()] : args,
        newTarget === SteppedDate ? target : newTarget,
      ),
    get: (target, property, receiver) =>
      property === "now" ? now : Reflect.get(target, property, receiver === SteppedDate ? target : receiver),
  });

  const clock: SteppableClock = {
    get offset() {
      return offset;
    },
    get active() {
      return active;
    },
    step(milliseconds) {
      offset += finiteMilliseconds("step", milliseconds);
    },
    setOffset(milliseconds) {
      offset = finiteMilliseconds("setOffset", milliseconds);
    },
    setTime(epochMilliseconds) {
      offset = finiteMilliseconds("setTime", epochMilliseconds) - RealDate.now();
    },
    now,
    restore() {
      if (!active) return;
      active = false;
      if (globalThis.Date === SteppedDate) globalThis.Date = RealDate;
      if (installed === clock) installed = undefined;
    },
  };
  globalThis.Date = SteppedDate;
  installed = clock;
  return clock;
}

function finiteMilliseconds(setting: string, value: number): number {
  if (!Number.isFinite(value)) {
    throw new ConfigurationError(
      `steppableClock.${setting}`,
      `must be a finite number of milliseconds, got ${value}`,
    );
  }
  return value;
}
