/**
 * Formats a byte count for people: `512 B`, `1.5 KiB`, `3.2 MiB`.
 *
 * @example
 * ```ts
 * formatBytes(1536); // "1.5 KiB"
 * ```
 */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

/**
 * A millisecond timestamp as ISO 8601 in UTC, or `-` when it is not a valid time.
 *
 * @example
 * ```ts
 * formatTime(0); // "1970-01-01T00:00:00.000Z"
 * ```
 */
export function formatTime(epochMs: number): string {
  const date = new Date(epochMs);
  return Number.isNaN(date.getTime()) ? "-" : date.toISOString();
}

/**
 * Lays rows out as a plain-text table: a header, columns padded to their widest cell, two spaces
 * between them, no trailing spaces.
 *
 * @example
 * ```ts
 * formatTable(["ID", "SCOPE"], [["1", "all"]]); // "ID  SCOPE\n1   all"
 * ```
 */
export function formatTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => (row[column] ?? "").length)),
  );
  return [header, ...rows]
    .map((row) =>
      header
        .map((_, column) => (row[column] ?? "").padEnd(widths[column] ?? 0))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}
