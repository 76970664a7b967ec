import { describe, expect, it } from "vitest";
import {
  asOnceflowError,
  ConfigurationError,
  isOnceflowError,
  ONCEFLOW_ERROR_BRAND,
  OnceflowError,
  TransactionError,
} from "./onceflow-error.js";

describe("isOnceflowError and instanceof OnceflowError", () => {
  it("recognise onceflow errors and their subclasses by the brand", () => {
    const error = new TransactionError("COMMIT_FAILED", "boom", { checkpointId: 2 });
    expect(isOnceflowError(error)).toBe(true);
    expect(error instanceof OnceflowError).toBe(true);
    expect(error instanceof TransactionError).toBe(true);
    expect(error instanceof ConfigurationError).toBe(false);
    expect(Symbol.keyFor(ONCEFLOW_ERROR_BRAND)).toBe("onceflow.error");
  });

  it("recognise an error of another copy (same brand, other prototype) as OnceflowError, not as a subclass", () => {
    // What another copy of the package produces: the brand on its own prototype chain.
    const otherPrototype = Object.create(Error.prototype, { [ONCEFLOW_ERROR_BRAND]: { value: true } });
    const foreign = Object.assign(Object.create(otherPrototype), { code: "CONFIGURATION", message: "x" });
    expect(isOnceflowError(foreign)).toBe(true);
    expect(foreign instanceof OnceflowError).toBe(true);
    expect(foreign instanceof ConfigurationError).toBe(false);
    expect(asOnceflowError(foreign)).toBe(foreign);
  });

  it("reject plain errors, look-alikes without the brand, and non-objects", () => {
    for (const value of [new Error("x"), { code: "CONFIGURATION" }, null, undefined, "CONFIGURATION", 3]) {
      expect(isOnceflowError(value)).toBe(false);
      expect(value instanceof OnceflowError).toBe(false);
    }
    expect(asOnceflowError(new Error("x"))).toBeInstanceOf(OnceflowError);
  });
});
